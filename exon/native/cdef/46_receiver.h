/* cdef: publication image (network) + receiver agent (exon_receiver_agent.h). */
#define EXON_NETIMG_ACTIVE ...
#define EXON_NETIMG_DONE_TIMEOUT ...
#define EXON_NETIMG_DONE_EOS ...
typedef struct exon_net_image_params_stct
{
    int32_t initial_window_length;
    int64_t sm_timeout_ns;
    int64_t liveness_timeout_ns;
    int64_t nak_delay_ns;
    int64_t nak_retry_delay_ns;
    ...;
} exon_net_image_params_t;
typedef struct exon_net_image_stats_stct
{
    int64_t packets;
    int64_t frames_inserted;
    int64_t heartbeats_received;
    int64_t naks_sent;
    int64_t sms_sent;
    int64_t under_runs;
    int64_t over_runs;
    int64_t bad_packets;
    ...;
} exon_net_image_stats_t;
typedef struct exon_net_image_stct
{
    exon_log_t *log;
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t term_length;
    int32_t window;
    int32_t state;
    int64_t receiver_id;
    int64_t join_position;
    int64_t rebuild_position;
    int64_t hwm_position;
    int64_t eos_position;
    int64_t *consumer_position;
    int64_t consumer_position_local;
    int64_t last_packet_ns;
    exon_net_image_params_t params;
    exon_net_image_stats_t stats;
    ...;
} exon_net_image_t;
void exon_net_image_default_params(exon_net_image_params_t *params);
int exon_setup_check(const exon_setup_header_t *setup);
int exon_net_image_init(exon_net_image_t *image, exon_log_t *log, exon_udp_channel_t *channel,
    const exon_udp_addr_t *control, const exon_setup_header_t *setup, int64_t receiver_id,
    const exon_net_image_params_t *params, int64_t now_ns);
int exon_net_image_on_data(exon_net_image_t *image, const uint8_t *packet, int32_t length, int64_t now_ns);
int exon_net_image_do_work(exon_net_image_t *image, int64_t now_ns);
int exon_net_image_send_eos(exon_net_image_t *image);
typedef struct exon_setup_request_stct
{
    exon_setup_header_t setup;
    exon_udp_addr_t source;
    exon_udp_channel_t *channel;
    ...;
} exon_setup_request_t;
typedef struct exon_receiver_agent_stct
{
    int32_t stream_count;
    int32_t image_count;
    int32_t pending_count;
    int64_t setup_elicit_interval_ns;
    int64_t image_cool_down_ns;
    int32_t max_setup_term_length;
    int64_t cool_down_packets;
    int64_t invalid_packets;
    int64_t unknown_stream_packets;
    int64_t setups_elicited;
    int64_t receive_loss_drops;
    ...;
} exon_receiver_agent_t;
int exon_receiver_agent_init(exon_receiver_agent_t *agent, exon_udp_channel_t *channel, double receive_loss_rate,
    int64_t receive_loss_seed);
void exon_receiver_agent_fini(exon_receiver_agent_t *agent);
int exon_receiver_agent_subscribe(exon_receiver_agent_t *agent, int32_t stream_id);
int exon_receiver_agent_unsubscribe(exon_receiver_agent_t *agent, int32_t stream_id);
int exon_receiver_agent_take_setup(exon_receiver_agent_t *agent, exon_setup_request_t *out);
int exon_receiver_agent_add_image(exon_receiver_agent_t *agent, exon_net_image_t *image);
int exon_receiver_agent_take_removed(exon_receiver_agent_t *agent, exon_net_image_t **out);
int exon_receiver_agent_do_work(exon_receiver_agent_t *agent, int64_t now_ns);
