/* cdef: network publication + sender agent (exon_sender_agent.h). Needs exon_log_t (10_logbuffer.h). */
#define EXON_NETPUB_ACTIVE ...
#define EXON_NETPUB_DRAINING ...
#define EXON_NETPUB_DONE ...
typedef struct exon_net_publication_params_stct
{
    int64_t setup_interval_ns;
    int64_t heartbeat_interval_ns;
    int64_t connection_timeout_ns;
    int64_t linger_ns;
    int64_t retransmit_delay_ns;
    int64_t retransmit_linger_ns;
    int32_t max_resend;
    int32_t max_datagrams_per_cycle;
    double send_loss_rate;
    int64_t send_loss_seed;
    ...;
} exon_net_publication_params_t;
typedef struct exon_net_publication_stats_stct
{
    int64_t data_datagrams;
    int64_t data_bytes;
    int64_t setups_sent;
    int64_t heartbeats_sent;
    int64_t eos_heartbeats_sent;
    int64_t retransmits;
    int64_t retransmitted_bytes;
    int64_t naks_received;
    int64_t sms_received;
    int64_t rttm_replies;
    int64_t short_sends;
    int64_t send_loss_drops;
    ...;
} exon_net_publication_stats_t;
typedef struct exon_net_publication_stct
{
    exon_log_t *log;
    exon_udp_channel_t *channel;
    exon_udp_addr_t destination;
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t term_length;
    int32_t mtu;
    int32_t state;
    bool connected;
    bool should_send_setup;
    int32_t receiver_window;
    int64_t receiver_id;
    int64_t sender_position;
    int64_t sender_limit;
    int64_t *snd_pos_counter;
    int64_t *snd_lmt_counter;
    int64_t linger_deadline_ns;
    exon_net_publication_params_t params;
    exon_net_publication_stats_t stats;
    ...;
} exon_net_publication_t;
void exon_net_publication_default_params(exon_net_publication_params_t *params);
int exon_net_publication_init(exon_net_publication_t *pub, exon_log_t *log, exon_udp_channel_t *channel,
    const exon_udp_addr_t *destination, const exon_net_publication_params_t *params, int64_t now_ns);
int exon_net_publication_send(exon_net_publication_t *pub, int64_t now_ns);
int exon_net_publication_on_control(exon_net_publication_t *pub, const uint8_t *frame, int32_t length,
    const exon_udp_addr_t *source, int64_t now_ns);
void exon_net_publication_close(exon_net_publication_t *pub, int64_t now_ns);
bool exon_net_publication_is_done(const exon_net_publication_t *pub);
typedef struct exon_sender_agent_stct
{
    int32_t publication_count;
    int64_t invalid_packets;
    int64_t unknown_session_packets;
    ...;
} exon_sender_agent_t;
void exon_sender_agent_init(exon_sender_agent_t *agent);
int exon_sender_agent_add(exon_sender_agent_t *agent, exon_net_publication_t *pub);
int exon_sender_agent_remove(exon_sender_agent_t *agent, exon_net_publication_t *pub);
int exon_sender_agent_do_work(exon_sender_agent_t *agent, int64_t now_ns);
