/* cdef: images (exon_image.h). */
typedef struct exon_fragment_stct {
    int64_t position;
    int64_t reserved_value;
    int32_t offset;
    int32_t length;
    int32_t term_id;
    int32_t term_offset;
    int32_t session_id;
    int32_t stream_id;
    int32_t flags;
    int32_t fragments;
    ...;
} exon_fragment_t;
typedef struct exon_frame_info_stct {
    int32_t term_offset;
    int32_t frame_length;
    int32_t type;
    int32_t flags;
    ...;
} exon_frame_info_t;
typedef struct exon_image_stct {
    exon_log_t *log;
    exon_log_metadata_t *meta;
    int64_t *subscriber_position;
    uint8_t *counters_values;
    int32_t assembly_length;
    int32_t term_length;
    int32_t position_bits_to_shift;
    int32_t initial_term_id;
    int32_t max_message_length;
    int32_t closed;
    int32_t lt_polled;
    int32_t lt_malformed;
    ...;
} exon_image_t;
int exon_image_init(exon_image_t *img, exon_log_t *log, int64_t *subscriber_position, uint8_t *counters_values);
void exon_image_close(exon_image_t *img);
int exon_image_poll(exon_image_t *img, exon_fragment_t *out, int32_t max_messages, int32_t fragment_limit, uint8_t *copy_buf, int32_t copy_cap, int32_t *copy_used);
int exon_image_poll_count(exon_image_t *img, int32_t fragment_limit, int64_t *bytes);
int32_t exon_image_available(exon_image_t *img);
int64_t exon_image_position(exon_image_t *img);
int exon_image_set_position(exon_image_t *img, int64_t position);
int64_t exon_image_end_of_stream_position(exon_image_t *img);
int exon_image_is_end_of_stream(exon_image_t *img);
int exon_term_scan(const uint8_t *term, int32_t term_offset, int32_t limit_offset, exon_frame_info_t *out, int32_t max_frames, int32_t *next_offset);
int exon_image_wait(exon_image_t **images, int32_t count, int32_t *doorbell, int64_t timeout_ns);
