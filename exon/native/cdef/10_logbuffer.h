/* cdef: log buffer files (exon_logbuffer.h). */
#define EXON_LOG_PATH_MAX ...
#define EXON_DRIVER_DIR_MAX_LENGTH ...
/* exon_doorbell.h (declared here because publications use it before 13_doorbell.h) */
typedef void (*exon_agent_ring_fn_t)(void *ctx, int32_t doorbell_id);
typedef struct exon_log_stct {
    uint8_t *addr;
    int64_t length;
    uint8_t *terms[3];
    exon_log_metadata_t *meta;
    int32_t term_length;
    int32_t position_bits_to_shift;
    int32_t initial_term_id;
    int32_t mtu;
    int32_t page_size;
    int32_t session_id;
    int32_t stream_id;
    int32_t max_message_length;
    int64_t correlation_id;
    char path[...];
    ...;
} exon_log_t;
typedef struct exon_log_params_stct {
    int32_t term_length;
    int32_t mtu;
    int32_t page_size;
    int32_t initial_term_id;
    int32_t session_id;
    int32_t stream_id;
    int64_t correlation_id;
    int32_t publication_window_length;
    int32_t receiver_window_length;
    int32_t type;
    int32_t is_connected;
    int32_t sparse;
    int32_t file_mode;
    ...;
} exon_log_params_t;
int exon_log_create(exon_log_t *log, const char *path, const exon_log_params_t *params);
int exon_log_open(exon_log_t *log, const char *path);
int exon_log_close(exon_log_t *log);
int exon_log_unlink(const char *path);
int exon_log_path_format(char *path, size_t length, const char *dir, const char *folder, int64_t id);
int64_t exon_log_clean_to(exon_log_t *log, int64_t *clean_position, int64_t position);
int64_t exon_log_producer_position(const exon_log_t *log);
void exon_log_set_end_of_stream(exon_log_t *log, int64_t position);
int64_t exon_log_pack_tail(int32_t term_id, int32_t term_offset);
int64_t exon_log_compute_position(int32_t term_id, int32_t term_offset, int32_t bits_to_shift, int32_t initial_term_id);
int32_t exon_log_term_id_by_position(int64_t position, int32_t bits_to_shift, int32_t initial_term_id);
int32_t exon_log_term_offset_by_position(int64_t position, int32_t term_length);
int32_t exon_log_index_by_position(int64_t position, int32_t bits_to_shift);
int32_t exon_log_compute_max_message_length(int32_t term_length);
