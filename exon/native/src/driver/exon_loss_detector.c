/* exon_loss_detector.c: gap scan + NAK timer; see exon_loss_detector.h. */
#include <string.h>

#include "driver/exon_loss_detector.h"
#include "driver/exon_term_rebuilder.h"

void exon_loss_detector_init(exon_loss_detector_t *detector, int64_t delay_ns, int64_t retry_delay_ns)
{
    memset(detector, 0, sizeof(*detector));
    detector->delay_ns = delay_ns;
    detector->retry_delay_ns = retry_delay_ns;
    detector->expiry_ns = EXON_LOSS_DETECTOR_NO_TIMER;
    detector->verified = true;
    detector->max_retry_delay_ns = retry_delay_ns;
    detector->backoff_ns = retry_delay_ns;
}

void exon_loss_detector_set_policy(exon_loss_detector_t *detector, int64_t max_retry_delay_ns, int64_t window_ns,
    int32_t max_per_window, bool verified)
{
    detector->max_retry_delay_ns = max_retry_delay_ns > detector->retry_delay_ns ?
        max_retry_delay_ns : detector->retry_delay_ns;
    detector->window_ns = window_ns > 0 && max_per_window > 0 ? window_ns : 0;
    detector->max_per_window = max_per_window;
    detector->verified = verified;
}

void exon_loss_detector_verify(exon_loss_detector_t *detector, int64_t now_ns)
{
    if (detector->verified)
    {
        return;
    }
    detector->verified = true;
    detector->backoff_ns = detector->retry_delay_ns;
    if (detector->has_active_gap && detector->withheld && detector->expiry_ns > now_ns)
    {
        detector->expiry_ns = now_ns; /* it was due already: ask now */
    }
    detector->withheld = false;
}

/* The retry delay after this NAK (sent or withheld): the backoff, then doubled to the cap. */
static int64_t exon_loss_detector_step(exon_loss_detector_t *detector)
{
    int64_t delay = detector->backoff_ns;
    int64_t next = delay > detector->max_retry_delay_ns / 2 ? detector->max_retry_delay_ns : delay * 2;
    detector->backoff_ns = next;
    return delay;
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
            detector->backoff_ns = detector->retry_delay_ns;
            detector->withheld = false;
            result->loss_found = true;
            work++;
        }
        detector->active_length = gap_length;
        if (now_ns >= detector->expiry_ns)
        {
            if (detector->window_ns > 0 && now_ns - detector->window_start_ns >= detector->window_ns)
            {
                detector->window_start_ns = now_ns;
                detector->window_count = 0;
                detector->window_suppressed = false;
            }
            if (!detector->verified)
            {
                result->nak_suppressed = true;
                detector->withheld = true;
                detector->expiry_ns = now_ns + exon_loss_detector_step(detector);
            }
            else if (detector->window_ns > 0 && detector->window_count >= detector->max_per_window)
            {
                result->nak_suppressed = !detector->window_suppressed;
                detector->window_suppressed = true;
                detector->expiry_ns = detector->window_start_ns + detector->window_ns;
            }
            else
            {
                result->send_nak = true;
                result->nak_term_id = detector->active_term_id;
                result->nak_term_offset = detector->active_term_offset;
                result->nak_length = detector->active_length;
                detector->expiry_ns = now_ns + exon_loss_detector_step(detector);
                detector->window_count++;
                work++;
            }
        }
    }
    return work;
}
