/*
 * exon_loss_detector.h: receiver-side gap detection and NAK scheduling (sans-IO).
 *
 * exon_loss_detector_scan() looks at an image term from the rebuild position (everything
 * before it is complete) up to the high-water mark, finds the first gap and decides when
 * to ask for it: a new gap arms a timer of delay_ns (Aeron's unicast NAK delay, 1 us); when
 * the timer expires the result says "send NAK (term_id, term_offset, length)" and the
 * timer re-arms with retry_delay_ns (delay x 100) for as long as the gap persists. The
 * same gap growing or shrinking keeps its timer and NAKs its current length. Time is the
 * caller's now_ns; the detector never sends anything itself.
 *
 * NAK policy (issue 13: two spoofed datagrams drew ~6,500 NAKs/s at a third party):
 *   - an unverified detector never asks for a NAK. The image verifies it once its source
 *     proved real (data contiguous from the join position, or an RTTM answer echoing the
 *     image's own timestamp); until then a due NAK is withheld (reported as suppressed) and
 *     its timer steps on with the backoff below. exon_loss_detector_verify() makes such a
 *     withheld gap due at once (a gap not yet due keeps its delay);
 *   - the same gap NAKed again backs off: each repeat doubles the retry delay, up to
 *     max_retry_delay_ns (a new gap starts again at retry_delay_ns);
 *   - at most max_per_window NAKs per window_ns (0 = no cap): a NAK over the cap waits for
 *     the next window and is reported suppressed once per window.
 * exon_loss_detector_init() leaves the detector verified, without backoff or cap (Aeron's
 * plain timer); exon_loss_detector_set_policy() turns the policy on.
 *
 * Python reference twin: exon.transport.aeron.policies.LossDetector (parity-tested).
 * Thread-safety: one detector per image, used by the receiver agent only.
 */
#ifndef EXON_LOSS_DETECTOR_H
#define EXON_LOSS_DETECTOR_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"

#define EXON_LOSS_DETECTOR_NO_TIMER INT64_MAX

typedef struct exon_loss_detector_stct
{
    int64_t delay_ns;
    int64_t retry_delay_ns;
    int64_t expiry_ns;          /* EXON_LOSS_DETECTOR_NO_TIMER when idle */
    bool has_active_gap;
    int32_t active_term_id;
    int32_t active_term_offset;
    int32_t active_length;
    bool verified;              /* the source proved real: NAKs may go */
    int64_t max_retry_delay_ns; /* backoff cap (== retry_delay_ns: no backoff) */
    int64_t backoff_ns;         /* the next retry delay of the active gap */
    int64_t window_ns;          /* rate cap window (0 = no cap) */
    int32_t max_per_window;
    int32_t window_count;       /* NAKs sent in the current window */
    int64_t window_start_ns;
    bool window_suppressed;     /* a NAK was held back in the current window */
    bool withheld;              /* the active gap's NAK was due while unverified */
}
exon_loss_detector_t;

typedef struct exon_loss_detector_result_stct
{
    int64_t rebuild_position;   /* new rebuild position (>= the one passed in) */
    bool loss_found;            /* a new gap became active in this scan */
    bool send_nak;              /* the caller should send the NAK below now */
    bool nak_suppressed;        /* a NAK was due but withheld (unverified or over the cap) */
    int32_t nak_term_id;
    int32_t nak_term_offset;
    int32_t nak_length;
}
exon_loss_detector_result_t;

void exon_loss_detector_init(exon_loss_detector_t *detector, int64_t delay_ns, int64_t retry_delay_ns);

/* Turn the NAK policy on (see above); the detector becomes unverified when !verified. */
void exon_loss_detector_set_policy(exon_loss_detector_t *detector, int64_t max_retry_delay_ns, int64_t window_ns,
    int32_t max_per_window, bool verified);

/* The source proved real: NAKs may go, an open gap is due at now_ns. */
void exon_loss_detector_verify(exon_loss_detector_t *detector, int64_t now_ns);

/*
 * term: the term that holds rebuild_position (partition (rebuild_position >> bits) % 3).
 * Returns the work count (0, 1 or 2) and fills *result.
 */
int exon_loss_detector_scan(
    exon_loss_detector_t *detector,
    const uint8_t *term,
    int64_t rebuild_position,
    int64_t hwm_position,
    int64_t now_ns,
    int32_t term_length,
    int32_t initial_term_id,
    exon_loss_detector_result_t *result);

#endif /* EXON_LOSS_DETECTOR_H */
