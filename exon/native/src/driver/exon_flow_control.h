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
 * Sender, multicast (exon_flow_control_t, Aeron's Min/MaxMulticastFlowControl): SMs from
 * several receivers (told apart by the SM's receiver id) arrive on the control group.
 *   - EXON_FC_MIN (the default, fc=min): every receiver heard from in the last
 *     receiver_timeout_ns (2 s by default, fc=min,t:DURATION) is tracked with its
 *     position + window; the sender limit is the smallest of them, so the slowest receiver
 *     paces the publication. A receiver whose SMs stop is dropped after the timeout (the
 *     limit then follows the others). With no receiver tracked the limit stays where it is.
 *     At most EXON_FC_RECEIVERS_MAX receivers: a new one beyond that replaces the one heard
 *     from least recently (counted in `replaced`).
 *   - EXON_FC_MAX (fc=max): the fastest receiver paces it: max(limit, position + window),
 *     as unicast; slower receivers recover by NAK or fall behind.
 *
 * Thread-safety: plain data; each instance belongs to one agent.
 */
#ifndef EXON_FLOW_CONTROL_H
#define EXON_FLOW_CONTROL_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"

#define EXON_SM_TIMEOUT_DEFAULT_NS (200LL * 1000 * 1000)
#define EXON_INITIAL_WINDOW_DEFAULT (512 * 1024)
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

#define EXON_FC_UNICAST 0
#define EXON_FC_MIN 1
#define EXON_FC_MAX 2
#define EXON_FC_RECEIVERS_MAX 64
#define EXON_FC_RECEIVER_TIMEOUT_DEFAULT_NS (2000LL * 1000 * 1000)

typedef struct exon_fc_receiver_stct
{
    int64_t receiver_id;
    int64_t limit;            /* its last position + window */
    int64_t last_sm_ns;
}
exon_fc_receiver_t;

typedef struct exon_flow_control_stct
{
    int32_t strategy;         /* EXON_FC_* */
    int32_t receiver_count;
    int64_t receiver_timeout_ns;
    int64_t replaced;         /* receivers pushed out by a new one when the table was full */
    exon_fc_receiver_t receivers[EXON_FC_RECEIVERS_MAX];
}
exon_flow_control_t;

/* receiver_timeout_ns <= 0 takes the default. */
void exon_flow_control_init(exon_flow_control_t *fc, int32_t strategy, int64_t receiver_timeout_ns);

/* An SM (position = its consumption position) arrived: the new sender limit. */
int64_t exon_flow_control_on_sm(
    exon_flow_control_t *fc, int64_t sender_limit, int64_t receiver_id, int64_t position,
    int32_t receiver_window, int64_t now_ns);

/* Periodic: drop receivers silent for the timeout (min); the new sender limit. */
int64_t exon_flow_control_on_idle(exon_flow_control_t *fc, int64_t sender_limit, int64_t now_ns);

int32_t exon_flow_control_max_retransmit_length(
    int32_t term_offset, int32_t resend_length, int32_t term_length, int32_t receiver_window);

int32_t exon_static_window_length(int32_t term_length, int32_t initial_window_length);

/* The window an image grants: the static window, at most half the receive socket buffer
 * the kernel granted (getsockopt's figure, which counts the kernel's own overhead), so a
 * host whose net.core.rmem_max caps the buffer does not drop datagrams at an overfull
 * socket; never below one 4 KiB page. so_rcvbuf <= 0 (unknown) leaves the static window. */
int32_t exon_receiver_window_length(int32_t term_length, int32_t initial_window_length, int32_t so_rcvbuf);

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
