/* cdef: retransmit handler, flow control + SM scheduler, loss generator. */
#define EXON_RETRANSMIT_MAX_ACTIONS ...
#define EXON_RETRANSMIT_STATE_INACTIVE ...
#define EXON_RETRANSMIT_STATE_DELAYED ...
#define EXON_RETRANSMIT_STATE_LINGERING ...
typedef struct exon_retransmit_stct { int32_t term_id; int32_t term_offset; int32_t length; ...; } exon_retransmit_t;
typedef struct exon_retransmit_action_stct { int64_t expiry_ns; int32_t term_id; int32_t term_offset; int32_t length; int32_t state; ...; } exon_retransmit_action_t;
typedef struct exon_retransmit_handler_stct
{
    int64_t delay_ns;
    int64_t linger_ns;
    int32_t max_resend;
    int32_t active_count;
    exon_retransmit_action_t actions[256];
    ...;
} exon_retransmit_handler_t;
int exon_retransmit_handler_init(exon_retransmit_handler_t *handler, int64_t delay_ns, int64_t linger_ns, int32_t max_resend);
int exon_retransmit_handler_on_nak(exon_retransmit_handler_t *handler, int32_t term_id, int32_t term_offset,
    int32_t length, int32_t term_length, int64_t now_ns, exon_retransmit_t *resend);
int exon_retransmit_handler_process_timeouts(exon_retransmit_handler_t *handler, int64_t now_ns,
    exon_retransmit_t *resends, int32_t capacity);

#define EXON_SM_TIMEOUT_DEFAULT_NS ...
#define EXON_INITIAL_WINDOW_DEFAULT ...
#define EXON_FLOW_OK ...
#define EXON_FLOW_UNDER_RUN ...
#define EXON_FLOW_OVER_RUN ...
int64_t exon_compute_position(int32_t term_id, int32_t term_offset, int32_t position_bits_to_shift, int32_t initial_term_id);
int64_t exon_flow_control_unicast_on_sm(int64_t sender_limit, int32_t consumption_term_id,
    int32_t consumption_term_offset, int32_t receiver_window, int32_t initial_term_id, int32_t position_bits_to_shift);
#define EXON_FC_UNICAST ...
#define EXON_FC_MIN ...
#define EXON_FC_MAX ...
#define EXON_FC_RECEIVERS_MAX ...
#define EXON_FC_RECEIVER_TIMEOUT_DEFAULT_NS ...
typedef struct exon_fc_receiver_stct { int64_t receiver_id; int64_t limit; int64_t last_sm_ns; ...; } exon_fc_receiver_t;
typedef struct exon_flow_control_stct
{
    int32_t strategy;
    int32_t receiver_count;
    int64_t receiver_timeout_ns;
    int64_t replaced;
    exon_fc_receiver_t receivers[64];
    ...;
} exon_flow_control_t;
void exon_flow_control_init(exon_flow_control_t *fc, int32_t strategy, int64_t receiver_timeout_ns);
int64_t exon_flow_control_on_sm(exon_flow_control_t *fc, int64_t sender_limit, int64_t receiver_id, int64_t position,
    int32_t receiver_window, int64_t now_ns);
int64_t exon_flow_control_on_idle(exon_flow_control_t *fc, int64_t sender_limit, int64_t now_ns);
int32_t exon_flow_control_max_retransmit_length(int32_t term_offset, int32_t resend_length, int32_t term_length, int32_t receiver_window);
int32_t exon_static_window_length(int32_t term_length, int32_t initial_window_length);
int32_t exon_receiver_window_length(int32_t term_length, int32_t initial_window_length, int32_t so_rcvbuf);
int exon_flow_control_receiver_check(int64_t window_position, int32_t window_length, int64_t packet_position, int64_t proposed_position);
typedef struct exon_sm_scheduler_stct
{
    int64_t sm_timeout_ns;
    int64_t last_sm_timestamp_ns;
    int64_t last_sm_position;
    int32_t last_sm_window;
    bool any_sent;
    ...;
} exon_sm_scheduler_t;
void exon_sm_scheduler_init(exon_sm_scheduler_t *scheduler, int64_t sm_timeout_ns, int64_t now_ns);
bool exon_sm_scheduler_check(exon_sm_scheduler_t *scheduler, int64_t consumed_position, int32_t window_length, int64_t now_ns);

typedef struct exon_loss_generator_stct { uint64_t state; uint64_t threshold; bool data_only; int64_t dropped; int64_t seen; ...; } exon_loss_generator_t;
int exon_loss_generator_init(exon_loss_generator_t *generator, double rate, int64_t seed, bool data_only);
uint64_t exon_loss_generator_next(exon_loss_generator_t *generator);
bool exon_loss_generator_should_drop(exon_loss_generator_t *generator, const uint8_t *packet, size_t length);

#define EXON_NAK_MULTICAST_MAX_BACKOFF_NS ...
#define EXON_NAK_MULTICAST_GROUP_SIZE ...
typedef struct exon_feedback_delay_stct { int64_t max_backoff_ns; double lambda; double scale; uint64_t state; ...; } exon_feedback_delay_t;
void exon_feedback_delay_init(exon_feedback_delay_t *generator, int64_t max_backoff_ns, int32_t group_size, uint64_t seed);
int64_t exon_feedback_delay_next(exon_feedback_delay_t *generator);

/* exon_spin_policy.h */
#define EXON_SPIN_BACKOFF_MAX ...
#define EXON_SPIN_PATIENCE_WAITS ...
typedef struct exon_spin_policy_stct { int32_t skip; int32_t backoff; int32_t misses; int32_t patience; } exon_spin_policy_t;
int64_t exon_spin_policy_budget(exon_spin_policy_t *policy, int64_t spin_ns);
void exon_spin_policy_outcome(exon_spin_policy_t *policy, bool answered);
