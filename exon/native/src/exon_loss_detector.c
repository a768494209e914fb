/* exon_loss_detector.c: gap scan + NAK timer; see exon_loss_detector.h. */
#include <string.h>

#include "exon_loss_detector.h"
#include "exon_term_rebuilder.h"

void exon_loss_detector_init(exon_loss_detector_t *detector, int64_t delay_ns, int64_t retry_delay_ns)
{
    memset(detector, 0, sizeof(*detector));
    detector->delay_ns = delay_ns;
    detector->retry_delay_ns = retry_delay_ns;
    detector->expiry_ns = EXON_LOSS_DETECTOR_NO_TIMER;
}

static int bits_of(int32_t term_length)
{
    return __builtin_ctz((unsigned)term_length);
}

int exon_loss_detector_scan(
    exon_loss_detector_t *detector,
    const uint8_t *term,
    int64_t rebuild_position,
    int64_t hwm_position,
    int64_t now_ns,
    int32_t term_length,
    int32_t initial_term_id,
    exon_loss_detector_result_t *result)
{
    memset(result, 0, sizeof(*result));
    result->rebuild_position = rebuild_position;
    if (rebuild_position >= hwm_position)
    {
        return 0;
    }
    const int bits = bits_of(term_length);
    const int64_t mask = term_length - 1;
    const int64_t rebuild_term_count = rebuild_position >> bits;
    const int64_t hwm_term_count = hwm_position >> bits;
    const int32_t rebuild_offset = (int32_t)(rebuild_position & mask);
    const int32_t limit = rebuild_term_count == hwm_term_count ? (int32_t)(hwm_position & mask) : term_length;
    const int32_t term_id = (int32_t)((uint32_t)initial_term_id + (uint32_t)rebuild_term_count);

    int32_t gap_length = 0;
    const int32_t end = exon_term_gap_scan(term, term_length, rebuild_offset, limit, &gap_length);
    result->rebuild_position = rebuild_position - rebuild_offset + end;
    int work = 0;
    if (end < limit)
    {
        if (!detector->has_active_gap || detector->active_term_id != term_id ||
            detector->active_term_offset != end)
        {
            detector->has_active_gap = true;
            detector->active_term_id = term_id;
            detector->active_term_offset = end;
            detector->expiry_ns = now_ns + detector->delay_ns;
            result->loss_found = true;
            work++;
        }
        detector->active_length = gap_length;
        if (now_ns >= detector->expiry_ns)
        {
            result->send_nak = true;
            result->nak_term_id = detector->active_term_id;
            result->nak_term_offset = detector->active_term_offset;
            result->nak_length = detector->active_length;
            detector->expiry_ns = now_ns + detector->retry_delay_ns;
            work++;
        }
    }
    return work;
}
