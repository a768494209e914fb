/* cdef: term rebuilder, gap scanner, loss detector (exon_term_rebuilder.h, exon_loss_detector.h). */
int exon_term_rebuilder_insert(
    uint8_t *term, int32_t term_length, int32_t term_offset, const uint8_t *packet, int32_t length);
int32_t exon_term_gap_scan(
    const uint8_t *term, int32_t term_length, int32_t offset, int32_t limit_offset, int32_t *gap_length);
bool exon_position_propose_max(int64_t *position, int64_t proposed);

#define EXON_LOSS_DETECTOR_NO_TIMER ...
typedef struct exon_loss_detector_stct
{
    int64_t delay_ns;
    int64_t retry_delay_ns;
    int64_t expiry_ns;
    bool has_active_gap;
    int32_t active_term_id;
    int32_t active_term_offset;
    int32_t active_length;
    bool verified;
    int64_t max_retry_delay_ns;
    int64_t backoff_ns;
    int64_t window_ns;
    int32_t max_per_window;
    int32_t window_count;
    int64_t window_start_ns;
    bool window_suppressed;
    bool withheld;
    ...;
} exon_loss_detector_t;

typedef struct exon_loss_detector_result_stct
{
    int64_t rebuild_position;
    bool loss_found;
    bool send_nak;
    bool nak_suppressed;
    int32_t nak_term_id;
    int32_t nak_term_offset;
    int32_t nak_length;
    ...;
} exon_loss_detector_result_t;

void exon_loss_detector_init(exon_loss_detector_t *detector, int64_t delay_ns, int64_t retry_delay_ns);
void exon_loss_detector_set_policy(exon_loss_detector_t *detector, int64_t max_retry_delay_ns, int64_t window_ns,
    int32_t max_per_window, bool verified);
void exon_loss_detector_verify(exon_loss_detector_t *detector, int64_t now_ns);
int exon_loss_detector_scan(
    exon_loss_detector_t *detector, const uint8_t *term, int64_t rebuild_position,
    int64_t hwm_position, int64_t now_ns, int32_t term_length, int32_t initial_term_id,
    exon_loss_detector_result_t *result);
