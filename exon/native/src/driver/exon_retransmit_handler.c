/* exon_retransmit_handler.c: NAK de-duplication with linger; see the header. */
#include <string.h>

#include "driver/exon_retransmit_handler.h"

int exon_retransmit_handler_init(
    exon_retransmit_handler_t *handler, int64_t delay_ns, int64_t linger_ns, int32_t max_resend)
{
    if (NULL == handler || max_resend < 1 || max_resend > EXON_RETRANSMIT_MAX_ACTIONS ||
        delay_ns < 0 || linger_ns < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "retransmit handler: max_resend %d outside 1..%d or negative timeout",
            max_resend, EXON_RETRANSMIT_MAX_ACTIONS);
    }
    memset(handler, 0, sizeof(*handler));
    handler->delay_ns = delay_ns;
    handler->linger_ns = linger_ns;
    handler->max_resend = max_resend;
    return 0;
}

int exon_retransmit_handler_on_nak(
    exon_retransmit_handler_t *handler,
    int32_t term_id,
    int32_t term_offset,
    int32_t length,
    int32_t term_length,
    int64_t now_ns,
    exon_retransmit_t *resend)
{
    if (term_offset < 0 || length <= 0 || term_offset >= term_length ||
        (int64_t)term_offset + length > term_length)
    {
        return 0;
    }
    exon_retransmit_action_t *free_slot = NULL;
    for (int32_t i = 0; i < handler->max_resend; i++)
    {
        exon_retransmit_action_t *action = &handler->actions[i];
        if (action->state == EXON_RETRANSMIT_STATE_INACTIVE)
        {
            if (NULL == free_slot)
            {
                free_slot = action;
            }
        }
        else if (action->term_id == term_id && action->term_offset == term_offset)
        {
            return 0; /* already resent (lingering) or about to be (delayed) */
        }
    }
    if (NULL == free_slot)
    {
        return 0;
    }
    free_slot->term_id = term_id;
    free_slot->term_offset = term_offset;
    free_slot->length = length;
    handler->active_count++;
    if (handler->delay_ns == 0)
    {
        free_slot->state = EXON_RETRANSMIT_STATE_LINGERING;
        free_slot->expiry_ns = now_ns + handler->linger_ns;
        resend->term_id = term_id;
        resend->term_offset = term_offset;
        resend->length = length;
        return 1;
    }
    free_slot->state = EXON_RETRANSMIT_STATE_DELAYED;
    free_slot->expiry_ns = now_ns + handler->delay_ns;
    return 0;
}

int exon_retransmit_handler_process_timeouts(
    exon_retransmit_handler_t *handler, int64_t now_ns, exon_retransmit_t *resends, int32_t capacity)
{
    int count = 0;
    if (handler->active_count == 0)
    {
        return 0;
    }
    for (int32_t i = 0; i < handler->max_resend; i++)
    {
        exon_retransmit_action_t *action = &handler->actions[i];
        if (action->state == EXON_RETRANSMIT_STATE_INACTIVE || now_ns < action->expiry_ns)
        {
            continue;
        }
        if (action->state == EXON_RETRANSMIT_STATE_DELAYED)
        {
            if (count >= capacity)
            {
                continue;
            }
            resends[count].term_id = action->term_id;
            resends[count].term_offset = action->term_offset;
            resends[count].length = action->length;
            count++;
            action->state = EXON_RETRANSMIT_STATE_LINGERING;
            action->expiry_ns = now_ns + handler->linger_ns;
        }
        else
        {
            action->state = EXON_RETRANSMIT_STATE_INACTIVE;
            handler->active_count--;
        }
    }
    return count;
}
