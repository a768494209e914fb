/* cdef: the media driver (exon_driver.h). */
#define EXON_THREADING_DEDICATED ...
#define EXON_THREADING_SHARED_NETWORK ...
#define EXON_THREADING_SHARED ...

typedef struct exon_driver_context_stct {
    char dir[4096];
    int32_t dir_delete_on_start;
    int32_t dir_delete_on_shutdown;
    int32_t threading_mode;
    int32_t idle_strategy;
    int64_t idle_max_spins;
    int64_t idle_max_yields;
    int64_t idle_min_park_ns;
    int64_t idle_max_park_ns;
    int32_t ipc_term_buffer_length;
    int32_t ipc_mtu_length;
    int32_t term_buffer_length;
    int32_t mtu_length;
    int32_t file_page_size;
    int32_t ipc_publication_term_window_length;
    int32_t to_driver_buffer_length;
    int32_t to_clients_buffer_length;
    int32_t counters_values_buffer_length;
    int32_t error_buffer_length;
    int64_t client_liveness_timeout_ns;
    int64_t publication_linger_timeout_ns;
    int64_t publication_unblock_timeout_ns;
    int64_t timer_interval_ns;
    int64_t driver_timeout_ms;
    int64_t publication_connection_timeout_ns;
    int64_t image_liveness_timeout_ns;
    int64_t status_message_timeout_ns;
    int32_t publication_term_window_length;
    int32_t initial_window_length;
    int32_t socket_rcvbuf_length;
    int32_t socket_sndbuf_length;
    double receive_loss_rate;
    int64_t receive_loss_seed;
    double send_loss_rate;
    int64_t send_loss_seed;
    int64_t nak_delay_ns;
    int64_t nak_retry_delay_ns;
    int64_t retransmit_delay_ns;
    int64_t retransmit_linger_ns;
    int32_t max_resend;
    int32_t max_image_term_length;
    int64_t heartbeat_interval_ns;
    int64_t setup_interval_ns;
    int32_t max_images_per_endpoint;          /* UDP: images + queued SETUPs per endpoint */
    int32_t max_unverified_images_per_source; /* UDP: per source address */
    int64_t image_idle_eviction_timeout_ns;   /* UDP: a verified image quiet this long may be evicted */
    int64_t nak_retry_max_delay_ns;           /* UDP: a repeated NAK backs off up to this */
    int64_t nak_rate_window_ns;               /* UDP: NAK cap window per image (0 = no cap) */
    int32_t nak_rate_max_per_window;
    int32_t invoker;
    int32_t udp_gso;
    int32_t udp_gro;
    int32_t term_buffer_sparse_file;
    int32_t dir_mode;
    ...;
} exon_driver_context_t;

typedef struct exon_driver_stct exon_driver_t;

void exon_driver_context_defaults(exon_driver_context_t *ctx);
int exon_driver_launch(exon_driver_t **driver, const exon_driver_context_t *ctx);
int exon_driver_close(exon_driver_t *driver);
int exon_driver_terminate_requested(exon_driver_t *driver);
const char *exon_driver_dir(exon_driver_t *driver);
int32_t exon_driver_runner_count(exon_driver_t *driver);
int exon_driver_delete_dir(const char *dir);
int exon_driver_invoke(exon_driver_t *driver);
int exon_driver_invoker_enabled(exon_driver_t *driver);
int exon_invoker_wait(exon_driver_t *driver, exon_image_t **images, int32_t count, int32_t *doorbell, int64_t spin_ns, int64_t timeout_ns);
int exon_invoker_bridge(exon_driver_t *driver, int32_t *doorbell);
int exon_invoker_unbridge(exon_driver_t *driver, int32_t *doorbell);
