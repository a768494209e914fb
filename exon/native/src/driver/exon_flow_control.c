/* exon_flow_control.c: unicast and multicast (min/max) flow control, static window, SM scheduling. */
#include <string.h>

#include "driver/exon_flow_control.h"

int64_t exon_flow_control_unicast_on_sm(
    int64_t sender_limit,
    int32_t consumption_term_id,
    int32_t consumption_term_offset,
    int32_t receiver_window,
    int32_t initial_term_id,
    int32_t position_bits_to_shift)
{
    if (receiver_window < 0)
    {
        receiver_window = 0;
    }
    int64_t position = exon_compute_position(
        consumption_term_id, consumption_term_offset, position_bits_to_shift, initial_term_id);
    int64_t proposed = position + receiver_window;
    return proposed > sender_limit ? proposed : sender_limit;
}

void exon_flow_control_init(exon_flow_control_t *fc, int32_t strategy, int64_t receiver_timeout_ns)
{
    memset(fc, 0, sizeof(*fc));
    fc->strategy = strategy;
    fc->receiver_timeout_ns = receiver_timeout_ns > 0 ? receiver_timeout_ns : EXON_FC_RECEIVER_TIMEOUT_DEFAULT_NS;
}

static int64_t exon_fc_min_limit(const exon_flow_control_t *fc, int64_t sender_limit)
{
    if (0 == fc->receiver_count)
    {
        return sender_limit;
    }
    int64_t min = INT64_MAX;
    for (int32_t i = 0; i < fc->receiver_count; i++)
    {
        if (fc->receivers[i].limit < min)
        {
            min = fc->receivers[i].limit;
        }
    }
    return min;
}

int64_t exon_flow_control_on_sm(
    exon_flow_control_t *fc, int64_t sender_limit, int64_t receiver_id, int64_t position,
    int32_t receiver_window, int64_t now_ns)
{
    if (receiver_window < 0)
    {
        receiver_window = 0;
    }
    int64_t proposed = position + receiver_window;
    if (fc->strategy != EXON_FC_MIN)
    {
        return proposed > sender_limit ? proposed : sender_limit;
    }
    exon_fc_receiver_t *r = NULL;
    for (int32_t i = 0; i < fc->receiver_count; i++)
    {
        if (fc->receivers[i].receiver_id == receiver_id)
        {
            r = &fc->receivers[i];
            break;
        }
    }
    if (NULL == r)
    {
        if (fc->receiver_count < EXON_FC_RECEIVERS_MAX)
        {
            r = &fc->receivers[fc->receiver_count++];
        }
        else
        {
            r = &fc->receivers[0];
            for (int32_t i = 1; i < fc->receiver_count; i++)
            {
                if (fc->receivers[i].last_sm_ns < r->last_sm_ns)
                {
                    r = &fc->receivers[i];
                }
            }
            fc->replaced++;
        }
        r->receiver_id = receiver_id;
        r->limit = proposed;
    }
    else if (proposed > r->limit)
    {
        r->limit = proposed; /* a reordered older SM never moves a receiver back */
    }
    r->last_sm_ns = now_ns;
    return exon_fc_min_limit(fc, sender_limit);
}

int64_t exon_flow_control_on_idle(exon_flow_control_t *fc, int64_t sender_limit, int64_t now_ns)
{
    if (fc->strategy != EXON_FC_MIN)
    {
        return sender_limit;
    }
    int32_t kept = 0;
    for (int32_t i = 0; i < fc->receiver_count; i++)
    {
        if (now_ns - fc->receivers[i].last_sm_ns <= fc->receiver_timeout_ns)
        {
            fc->receivers[kept++] = fc->receivers[i];
        }
    }
    bool dropped = kept < fc->receiver_count;
    fc->receiver_count = kept;
    return dropped ? exon_fc_min_limit(fc, sender_limit) : sender_limit;
}

int32_t exon_flow_control_max_retransmit_length(
    int32_t term_offset, int32_t resend_length, int32_t term_length, int32_t receiver_window)
{
    int64_t max = (int64_t)receiver_window * EXON_RETRANSMIT_WINDOW_MULTIPLE;
    int64_t to_end = (int64_t)term_length - term_offset;
    int64_t length = resend_length;
    if (length > max)
    {
        length = max;
    }
    if (length > to_end)
    {
        length = to_end;
    }
    return length < 0 ? 0 : (int32_t)length;
}

int32_t exon_static_window_length(int32_t term_length, int32_t initial_window_length)
{
    int32_t half = term_length / 2;
    return half < initial_window_length ? half : initial_window_length;
}

int32_t exon_receiver_window_length(int32_t term_length, int32_t initial_window_length, int32_t so_rcvbuf)
{
    int32_t window = exon_static_window_length(term_length, initial_window_length);
    if (so_rcvbuf > 0)
    {
        int32_t cap = so_rcvbuf / 2 < 4096 ? 4096 : so_rcvbuf / 2;
        window = window < cap ? window : cap;
    }
    return window;
}

int exon_flow_control_receiver_check(
    int64_t window_position, int32_t window_length, int64_t packet_position, int64_t proposed_position)
{
    if (packet_position < window_position)
    {
        return EXON_FLOW_UNDER_RUN;
    }
    if (proposed_position > window_position + window_length)
    {
        return EXON_FLOW_OVER_RUN;
    }
    return EXON_FLOW_OK;
}

void exon_sm_scheduler_init(exon_sm_scheduler_t *scheduler, int64_t sm_timeout_ns, int64_t now_ns)
{
    memset(scheduler, 0, sizeof(*scheduler));
    scheduler->sm_timeout_ns = sm_timeout_ns;
    scheduler->last_sm_timestamp_ns = now_ns;
}

bool exon_sm_scheduler_check(
    exon_sm_scheduler_t *scheduler, int64_t consumed_position, int32_t window_length, int64_t now_ns)
{
    const int32_t threshold = window_length / 4;
    bool due = !scheduler->any_sent ||
        now_ns >= scheduler->last_sm_timestamp_ns + scheduler->sm_timeout_ns ||
        consumed_position > scheduler->last_sm_position + threshold ||
        window_length != scheduler->last_sm_window;
    if (due)
    {
        scheduler->any_sent = true;
        scheduler->last_sm_timestamp_ns = now_ns;
        scheduler->last_sm_position = consumed_position;
        scheduler->last_sm_window = window_length;
    }
    return due;
}
