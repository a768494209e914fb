/* cdef: native UDP end-to-end loop (exon_udp_loop.h). */
typedef struct exon_udp_loop_params_stct
{
    const char *directory;
    int32_t term_length;
    int32_t mtu;
    int32_t message_length;
    int64_t message_count;
    double receive_loss_rate;
    double send_loss_rate;
    int64_t loss_seed;
    int64_t timeout_ns;
    bool verify;
    ...;
} exon_udp_loop_params_t;
typedef struct exon_udp_loop_result_stct
{
    int64_t messages_received;
    int64_t bytes_received;
    int64_t errors;
    int64_t elapsed_ns;
    int64_t naks_sent;
    int64_t naks_received;
    int64_t retransmits;
    int64_t receive_loss_drops;
    int64_t send_loss_drops;
    int64_t data_datagrams;
    int64_t sms_sent;
    int64_t heartbeats_sent;
    int64_t setups_sent;
    ...;
} exon_udp_loop_result_t;
int exon_udp_loop_run(const exon_udp_loop_params_t *params, exon_udp_loop_result_t *result);
