/*
 * exon_retransmit_handler.h: sender-side answer to NAKs (sans-IO).
 *
 * On a NAK for (term_id, term_offset, length): if no action is active for that
 * (term_id, term_offset) and fewer than max_resend actions are active, the handler either
 * asks for the resend at once (delay_ns == 0, Aeron's unicast default) or arms a delay
 * timer. After a resend the action lingers for linger_ns (10 ms by default), during which
 * further NAKs for the same range are ignored; then it is forgotten and a new NAK resends
 * again. NAKs whose range does not lie inside a term are ignored.
 *
 * Nothing is sent here: exon_retransmit_handler_on_nak() and _process_timeouts() fill
 * exon_retransmit_t records that the sender turns into datagrams.
 *
 * Thread-safety: one handler per network publication, used by the sender agent only.
 */
#ifndef EXON_RETRANSMIT_HANDLER_H
#define EXON_RETRANSMIT_HANDLER_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"

#define EXON_RETRANSMIT_MAX_ACTIONS 256
#define EXON_RETRANSMIT_DEFAULT_LINGER_NS (10LL * 1000 * 1000)
#define EXON_RETRANSMIT_DEFAULT_MAX_RESEND 16

#define EXON_RETRANSMIT_STATE_INACTIVE 0
#define EXON_RETRANSMIT_STATE_DELAYED 1
#define EXON_RETRANSMIT_STATE_LINGERING 2

typedef struct exon_retransmit_stct
{
    int32_t term_id;
    int32_t term_offset;
    int32_t length;
}
exon_retransmit_t;

typedef struct exon_retransmit_action_stct
{
    int64_t expiry_ns;
    int32_t term_id;
    int32_t term_offset;
    int32_t length;
    int32_t state;
}
exon_retransmit_action_t;

typedef struct exon_retransmit_handler_stct
{
    int64_t delay_ns;
    int64_t linger_ns;
    int32_t max_resend;
    int32_t active_count;
    exon_retransmit_action_t actions[EXON_RETRANSMIT_MAX_ACTIONS];
}
exon_retransmit_handler_t;

/* max_resend in 1..256 (EXON_E_ARGUMENT otherwise). */
int exon_retransmit_handler_init(
    exon_retransmit_handler_t *handler, int64_t delay_ns, int64_t linger_ns, int32_t max_resend);

/*
 * Returns 1 and fills *resend when the range must be resent now, 0 when the NAK is
 * ignored (duplicate within linger, delayed, invalid, or too many active resends).
 */
int exon_retransmit_handler_on_nak(
    exon_retransmit_handler_t *handler,
    int32_t term_id,
    int32_t term_offset,
    int32_t length,
    int32_t term_length,
    int64_t now_ns,
    exon_retransmit_t *resend);

/*
 * Expire lingering actions and fire delayed ones. Writes up to `capacity` due resends to
 * `resends` and returns how many (a delayed resend that does not fit waits for the next
 * call).
 */
int exon_retransmit_handler_process_timeouts(
    exon_retransmit_handler_t *handler, int64_t now_ns, exon_retransmit_t *resends, int32_t capacity);

#endif /* EXON_RETRANSMIT_HANDLER_H */
