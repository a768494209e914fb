/*
 * exon_flow_control.h: flow and congestion control policies (sans-IO, integer clock).
 *
 * Sender (network publication), unicast "max" flow control: each SM moves the sender
 * limit to max(limit, sm_position + receiver_window). A retransmit is capped at
 * min(length, 16 x receiver window, bytes to the end of the term).
 *
 * Receiver (image), static-window congestion control: window = min(term_length / 2,
 * initial window (128 KiB by default)). The SM scheduler decides when an image sends an
 * SM: when the consumers moved more than window / 4 past the last SM position, when the
 * window changed, or when sm_timeout_ns (200 ms) passed since the last SM. Data outside
 * [sm_position, sm_position + window] is an under-run (old, already consumed) or an
 * over-run (beyond the window) and is dropped and counted by the caller.
 *
 * Thread-safety: plain data; each instance belongs to one agent.
 */
#ifndef EXON_FLOW_CONTROL_H
#define EXON_FLOW_CONTROL_H

#include <stdint.h>
#include <stdbool.h>

#include "exon_common.h"

#define EXON_SM_TIMEOUT_DEFAULT_NS (200LL * 1000 * 1000)
#define EXON_INITIAL_WINDOW_DEFAULT (128 * 1024)
#define EXON_RETRANSMIT_WINDOW_MULTIPLE 16

#define EXON_FLOW_OK 0
#define EXON_FLOW_UNDER_RUN 1
#define EXON_FLOW_OVER_RUN 2

/* position = ((term_id - initial_term_id) << bits) + term_offset (wrapping term ids). */
static inline int64_t exon_compute_position(
    int32_t term_id, int32_t term_offset, int32_t position_bits_to_shift, int32_t initial_term_id)
{
    int64_t term_count = (int32_t)((uint32_t)term_id - (uint32_t)initial_term_id);
    return (term_count << position_bits_to_shift) + term_offset;
}

int64_t exon_flow_control_unicast_on_sm(
    int64_t sender_limit,
    int32_t consumption_term_id,
    int32_t consumption_term_offset,
    int32_t receiver_window,
    int32_t initial_term_id,
    int32_t position_bits_to_shift);

int32_t exon_flow_control_max_retransmit_length(
    int32_t term_offset, int32_t resend_length, int32_t term_length, int32_t receiver_window);

int32_t exon_static_window_length(int32_t term_length, int32_t initial_window_length);

/* EXON_FLOW_OK, EXON_FLOW_UNDER_RUN or EXON_FLOW_OVER_RUN. */
int exon_flow_control_receiver_check(
    int64_t window_position, int32_t window_length, int64_t packet_position, int64_t proposed_position);

typedef struct exon_sm_scheduler_stct
{
    int64_t sm_timeout_ns;
    int64_t last_sm_timestamp_ns;
    int64_t last_sm_position;     /* the position the last SM advertised (window start) */
    int32_t last_sm_window;
    bool any_sent;
}
exon_sm_scheduler_t;

void exon_sm_scheduler_init(exon_sm_scheduler_t *scheduler, int64_t sm_timeout_ns, int64_t now_ns);

/*
 * Returns true when an SM for (consumed_position, window_length) is due now; the caller
 * sends it and the scheduler records it as sent. The first call always schedules one.
 */
bool exon_sm_scheduler_check(
    exon_sm_scheduler_t *scheduler, int64_t consumed_position, int32_t window_length, int64_t now_ns);

#endif /* EXON_FLOW_CONTROL_H */
