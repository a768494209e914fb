/* exon_network_publication.c: SETUP, DATA, heartbeats, SM/NAK/RTTM for one UDP publication. */
#include <string.h>

#include "common/exon_common.h"
#include "driver/exon_flow_control.h"
#include "driver/exon_network_publication.h"

int exon_network_publication_init(
    exon_network_publication_t *pub,
    exon_log_t *log,
    exon_counters_t *counters,
    const exon_udp_addr_t *destination,
    int32_t snd_pos_id,
    int32_t snd_lmt_id,
    const exon_network_publication_params_t *params,
    exon_loss_generator_t *send_loss,
    int64_t now_ns)
{
    pub->heartbeat_interval_ns = params->heartbeat_interval_ns > 0 ? params->heartbeat_interval_ns : EXON_NP_HEARTBEAT_TIMEOUT_NS;
    pub->setup_interval_ns = params->setup_interval_ns > 0 ? params->setup_interval_ns : EXON_NP_SETUP_TIMEOUT_NS;
    pub->log = log;
    pub->counters = counters;
    pub->destination = *destination;
    pub->send_loss = send_loss;
    pub->session_id = log->session_id;
    pub->stream_id = log->stream_id;
    pub->initial_term_id = log->initial_term_id;
    pub->term_length = log->term_length;
    pub->bits = log->position_bits_to_shift;
    pub->mtu = log->mtu;
    pub->snd_pos_id = snd_pos_id;
    pub->snd_lmt_id = snd_lmt_id;
    pub->snd_pos = 0;
    pub->snd_lmt = 0;
    pub->last_send_ns = now_ns - pub->heartbeat_interval_ns;
    pub->last_setup_ns = now_ns - pub->setup_interval_ns;
    pub->last_sm_ns = now_ns;
    pub->connection_timeout_ns = params->connection_timeout_ns > 0 ? params->connection_timeout_ns : 5000000000LL;
    pub->has_sm = false;
    pub->send_setup = true;
    pub->connected = false;
    pub->state = EXON_NP_ACTIVE;
    pub->end_of_stream_position = INT64_MAX;
    pub->multicast = params->multicast;
    pub->ttl = params->ttl;
    int32_t strategy = params->flow_control;
    if (EXON_FC_UNICAST == strategy && params->multicast)
    {
        strategy = EXON_FC_MIN;
    }
    exon_flow_control_init(&pub->fc, strategy, params->fc_receiver_timeout_ns);
    return exon_retransmit_handler_init(&pub->retransmit, params->retransmit_delay_ns > 0 ? params->retransmit_delay_ns : 0,
        params->retransmit_linger_ns >= 0 ? params->retransmit_linger_ns : EXON_RETRANSMIT_DEFAULT_LINGER_NS,
        params->max_resend > 0 ? params->max_resend : EXON_RETRANSMIT_DEFAULT_MAX_RESEND);
}

static int exon_netpub_send_one(exon_network_publication_t *pub, const uint8_t *data, int32_t length,
    const exon_udp_addr_t *to)
{
    int rc = exon_udp_channel_send(&pub->channel, data, length, to);
    if (rc < length)
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_SHORT_SENDS, 1);
        return 0;
    }
    exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_BYTES_SENT, length);
    return 1;
}

/* send_batch on the publication's socket; a GSO fallback it took is counted once. */
static int exon_netpub_send_batch(exon_network_publication_t *pub, exon_udp_msg_t *msgs, int count)
{
    int64_t fallbacks = pub->channel.gso_fallbacks;
    int rc = exon_udp_channel_send_batch(&pub->channel, msgs, count);
    if (pub->channel.gso_fallbacks != fallbacks)
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_UDP_GSO_FALLBACKS, 1);
    }
    return rc;
}

static void exon_netpub_send_setup(exon_network_publication_t *pub, int64_t now_ns)
{
    exon_setup_header_t s;
    memset(&s, 0, sizeof(s));
    s.frame_header.frame_length = EXON_SETUP_LENGTH;
    s.frame_header.version = EXON_FRAME_VERSION;
    s.frame_header.flags = 0;
    s.frame_header.type = EXON_HDR_TYPE_SETUP;
    s.term_offset = exon_log_term_offset_by_position(pub->snd_pos, pub->term_length);
    s.session_id = pub->session_id;
    s.stream_id = pub->stream_id;
    s.initial_term_id = pub->initial_term_id;
    s.active_term_id = exon_log_term_id_by_position(pub->snd_pos, pub->bits, pub->initial_term_id);
    s.term_length = pub->term_length;
    s.mtu = pub->mtu;
    s.ttl = pub->ttl;
    exon_netpub_send_one(pub, (const uint8_t *)&s, EXON_SETUP_LENGTH, &pub->destination);
    pub->last_setup_ns = now_ns;
    pub->send_setup = false;
}

static void exon_netpub_send_heartbeat(exon_network_publication_t *pub, int64_t now_ns)
{
    exon_data_header_t h;
    memset(&h, 0, sizeof(h));
    h.frame_header.frame_length = 0;
    h.frame_header.version = EXON_FRAME_VERSION;
    h.frame_header.flags = EXON_DATA_FLAG_UNFRAGMENTED;
    if (EXON_LOAD_ACQ(&pub->state) != EXON_NP_ACTIVE && pub->snd_pos >= pub->end_of_stream_position)
    {
        h.frame_header.flags |= EXON_DATA_FLAG_EOS;
    }
    h.frame_header.type = EXON_HDR_TYPE_DATA;
    h.term_offset = exon_log_term_offset_by_position(pub->snd_pos, pub->term_length);
    h.session_id = pub->session_id;
    h.stream_id = pub->stream_id;
    h.term_id = exon_log_term_id_by_position(pub->snd_pos, pub->bits, pub->initial_term_id);
    if (exon_netpub_send_one(pub, (const uint8_t *)&h, EXON_DATA_HEADER_LENGTH, &pub->destination))
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_HEARTBEATS_SENT, 1);
    }
    pub->last_send_ns = now_ns;
}

/*
 * Aeron's scan for availability: committed frames from `offset`, at most max_length bytes;
 * a PAD frame ends the scan and travels as its header alone (*padding = the rest).
 */
static int32_t exon_netpub_scan(const uint8_t *term, int32_t offset, int32_t max_length, int32_t *padding)
{
    int32_t available = 0;
    *padding = 0;
    while (available < max_length)
    {
        const exon_frame_header_t *h = (const exon_frame_header_t *)(term + offset + available);
        int32_t frame_length = EXON_LOAD_ACQ(&h->frame_length);
        if (frame_length <= 0)
        {
            break;
        }
        int32_t aligned = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
        int32_t pad = 0;
        if (h->type == EXON_HDR_TYPE_PAD)
        {
            pad = aligned - EXON_DATA_HEADER_LENGTH;
            aligned = EXON_DATA_HEADER_LENGTH;
        }
        if (available + aligned > max_length)
        {
            break;
        }
        available += aligned;
        if (pad > 0 || h->type == EXON_HDR_TYPE_PAD)
        {
            *padding = pad;
            break;
        }
    }
    return available;
}

static int exon_netpub_send_data(exon_network_publication_t *pub, int64_t now_ns)
{
    exon_udp_msg_t msgs[EXON_NP_SEND_BATCH];
    int64_t ends[EXON_NP_SEND_BATCH];
    bool dropped[EXON_NP_SEND_BATCH];
    int n = 0;
    int64_t pos = pub->snd_pos;
    /* with GSO a batch is a few messages, so it may be longer; plainly it stays as short as
     * before (a long plain burst overruns a default receive buffer on loopback) */
    int batch = pub->channel.gso ? EXON_NP_SEND_BATCH : EXON_NP_BATCH;
    while (n < batch)
    {
        int64_t window = pub->snd_lmt - pos;
        if (window <= 0)
        {
            break;
        }
        int32_t offset = exon_log_term_offset_by_position(pos, pub->term_length);
        uint8_t *term = pub->log->terms[exon_log_index_by_position(pos, pub->bits)];
        int32_t max_length = pub->term_length - offset;
        if (max_length > pub->mtu)
        {
            max_length = pub->mtu;
        }
        if (window < max_length)
        {
            max_length = (int32_t)window;
        }
        int32_t padding = 0;
        int32_t available = exon_netpub_scan(term, offset, max_length, &padding);
        if (available == 0)
        {
            break;
        }
        dropped[n] = NULL != pub->send_loss && exon_loss_generator_should_drop(pub->send_loss, term + offset, (size_t)available);
        msgs[n].buffer = term + offset;
        msgs[n].length = available;
        msgs[n].capacity = available;
        msgs[n].truncated = false;
        msgs[n].addr = pub->destination;
        pos += available + padding;
        ends[n] = pos;
        n++;
    }
    if (n == 0)
    {
        return 0;
    }
    /* send the batch, skipping datagrams the debug loss generator drops */
    int done = 0;
    int64_t bytes = 0;
    while (done < n)
    {
        if (dropped[done])
        {
            done++;
            continue;
        }
        int run = done;
        while (run < n && !dropped[run])
        {
            run++;
        }
        int rc = exon_netpub_send_batch(pub, msgs + done, run - done);
        if (rc <= 0)
        {
            if (rc < 0)
            {
                exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_SHORT_SENDS, 1);
            }
            break;
        }
        for (int i = done; i < done + rc; i++)
        {
            bytes += msgs[i].length;
        }
        done += rc;
        if (done < run)
        {
            exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_SHORT_SENDS, 1);
            break;
        }
    }
    if (done == 0)
    {
        return 0;
    }
    pub->snd_pos = ends[done - 1];
    exon_counter_set(pub->counters, pub->snd_pos_id, pub->snd_pos);
    exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_BYTES_SENT, bytes);
    pub->last_send_ns = now_ns;
    return done;
}

static void exon_netpub_resend(exon_network_publication_t *pub, const exon_retransmit_t *r)
{
    int64_t position = exon_log_compute_position(r->term_id, r->term_offset, pub->bits, pub->initial_term_id);
    if (position >= pub->snd_pos || position < pub->snd_pos - pub->term_length || r->length <= 0)
    {
        return;
    }
    int64_t end = position + r->length;
    if (end > pub->snd_pos)
    {
        end = pub->snd_pos;
    }
    uint8_t *term = pub->log->terms[exon_log_index_by_position(position, pub->bits)];
    int32_t offset = r->term_offset;
    int32_t stop = offset + (int32_t)(end - position);
    if (stop > pub->term_length)
    {
        stop = pub->term_length;
    }
    /* the datagrams of the range (at most 64), then one batch send (GSO runs where on) */
    exon_udp_msg_t msgs[EXON_NP_SEND_BATCH];
    int scanned = 0;
    int n = 0;
    while (offset < stop && scanned < EXON_NP_SEND_BATCH)
    {
        int32_t padding = 0;
        int32_t max_length = pub->term_length - offset < pub->mtu ? pub->term_length - offset : pub->mtu;
        int32_t available = exon_netpub_scan(term, offset, max_length, &padding);
        if (available == 0)
        {
            break;
        }
        if (NULL == pub->send_loss || !exon_loss_generator_should_drop(pub->send_loss, term + offset, (size_t)available))
        {
            msgs[n].buffer = term + offset;
            msgs[n].length = available;
            msgs[n].capacity = available;
            msgs[n].truncated = false;
            msgs[n].segment_size = 0;
            msgs[n].addr = pub->destination;
            n++;
        }
        offset += available + padding;
        scanned++;
    }
    int done = 0;
    int64_t bytes = 0;
    while (done < n)
    {
        int rc = exon_netpub_send_batch(pub, msgs + done, n - done);
        if (rc <= 0)
        {
            /* the rest waits for the next NAK, as a lost resend would */
            exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_SHORT_SENDS, 1);
            break;
        }
        for (int i = done; i < done + rc; i++)
        {
            bytes += msgs[i].length;
        }
        done += rc;
    }
    if (bytes > 0)
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_BYTES_SENT, bytes);
    }
    if (scanned > 0)
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_RETRANSMITS_SENT, 1);
    }
}

void exon_network_publication_on_control(
    exon_network_publication_t *pub, const uint8_t *buf, int32_t length, const exon_udp_addr_t *from, int64_t now_ns)
{
    if (length < (int32_t)sizeof(exon_frame_header_t))
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_INVALID_PACKETS, 1);
        return;
    }
    const exon_frame_header_t *fh = (const exon_frame_header_t *)buf;
    if (fh->version != EXON_FRAME_VERSION || fh->frame_length > length)
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_INVALID_PACKETS, 1);
        return;
    }
    switch (fh->type)
    {
        case EXON_HDR_TYPE_SM:
        {
            if (length < EXON_SM_LENGTH || fh->frame_length < EXON_SM_LENGTH)
            {
                break;
            }
            const exon_sm_header_t *sm = (const exon_sm_header_t *)buf;
            if (sm->session_id != pub->session_id || sm->stream_id != pub->stream_id)
            {
                return;
            }
            exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_STATUS_MESSAGES_RECEIVED, 1);
            if (sm->frame_header.flags & EXON_SM_FLAG_SEND_SETUP)
            {
                pub->send_setup = true;
                return;
            }
            if (sm->receiver_window < 0 || sm->consumption_term_offset < 0 ||
                sm->consumption_term_offset > pub->term_length)
            {
                exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_INVALID_PACKETS, 1);
                return;
            }
            int64_t sm_position = exon_compute_position(
                sm->consumption_term_id, sm->consumption_term_offset, pub->bits, pub->initial_term_id);
            int64_t limit = exon_flow_control_on_sm(
                &pub->fc, pub->snd_lmt, sm->receiver_id, sm_position, sm->receiver_window, now_ns);
            pub->snd_lmt = limit;
            exon_counter_set(pub->counters, pub->snd_lmt_id, limit);
            pub->last_sm_ns = now_ns;
            pub->has_sm = true;
            if (!pub->connected)
            {
                pub->connected = true;
                EXON_STORE_REL(&pub->log->meta->is_connected, 1);
            }
            return;
        }
        case EXON_HDR_TYPE_NAK:
        {
            if (length < EXON_NAK_LENGTH)
            {
                break;
            }
            const exon_nak_header_t *nak = (const exon_nak_header_t *)buf;
            if (nak->session_id != pub->session_id || nak->stream_id != pub->stream_id)
            {
                return;
            }
            exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_NAK_MESSAGES_RECEIVED, 1);
            exon_retransmit_t resend;
            if (1 == exon_retransmit_handler_on_nak(&pub->retransmit, nak->term_id, nak->term_offset,
                nak->length, pub->term_length, now_ns, &resend))
            {
                exon_netpub_resend(pub, &resend);
            }
            return;
        }
        case EXON_HDR_TYPE_RTTM:
        {
            if (length < EXON_RTTM_LENGTH)
            {
                break;
            }
            exon_rttm_header_t reply;
            memcpy(&reply, buf, sizeof(reply));
            /* a request (REPLY set) is echoed at once without the flag; the sender never
             * asks, so an answer arriving here is not ours and is ignored */
            if (reply.session_id != pub->session_id || reply.stream_id != pub->stream_id ||
                0 == (reply.frame_header.flags & EXON_RTTM_FLAG_REPLY))
            {
                return;
            }
            reply.frame_header.flags = 0;
            reply.reception_delta = 0;
            exon_netpub_send_one(pub, (const uint8_t *)&reply, EXON_RTTM_LENGTH,
                pub->multicast ? &pub->destination : from);
            return;
        }
        case EXON_HDR_TYPE_ERR:
            return;
        default:
            break;
    }
    exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_INVALID_PACKETS, 1);
}

int exon_network_publication_poll_control(exon_network_publication_t *pub, int64_t now_ns)
{
    exon_udp_msg_t msgs[EXON_NP_BATCH];
    for (int i = 0; i < EXON_NP_BATCH; i++)
    {
        msgs[i].buffer = pub->ctrl_buf[i];
        msgs[i].capacity = (int32_t)sizeof(pub->ctrl_buf[i]);
    }
    int n = exon_udp_channel_recv_batch(&pub->channel, msgs, EXON_NP_BATCH);
    if (n <= 0)
    {
        return 0;
    }
    for (int i = 0; i < n; i++)
    {
        exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_BYTES_RECEIVED, msgs[i].length);
        if (msgs[i].truncated)
        {
            exon_counter_add(pub->counters, EXON_SYSTEM_COUNTER_INVALID_PACKETS, 1);
            continue;
        }
        exon_network_publication_on_control(pub, msgs[i].buffer, msgs[i].length, &msgs[i].addr, now_ns);
    }
    return n;
}

int exon_network_publication_send(exon_network_publication_t *pub, int64_t now_ns)
{
    int work = 0;
    /* closing without a receiver (it never answered, or stopped answering): nobody to
     * drain to, so no SETUP and no heartbeat while it lingers (a stream given up on an
     * address that never answered sent both every 100 ms for the whole linger, 5 s) */
    bool silent = !pub->has_sm && EXON_LOAD_ACQ(&pub->state) != EXON_NP_ACTIVE;
    if ((!pub->has_sm && !silent && now_ns - pub->last_setup_ns >= pub->setup_interval_ns) ||
        pub->send_setup)
    {
        exon_netpub_send_setup(pub, now_ns);
        work++;
    }
    exon_retransmit_t resends[8];
    int due = exon_retransmit_handler_process_timeouts(&pub->retransmit, now_ns, resends, 8);
    for (int i = 0; i < due; i++)
    {
        exon_netpub_resend(pub, &resends[i]);
        work++;
    }
    if (pub->has_sm && pub->fc.strategy == EXON_FC_MIN)
    {
        int64_t limit = exon_flow_control_on_idle(&pub->fc, pub->snd_lmt, now_ns);
        if (limit != pub->snd_lmt)
        {
            pub->snd_lmt = limit;
            exon_counter_set(pub->counters, pub->snd_lmt_id, limit);
        }
    }
    if (pub->has_sm)
    {
        work += exon_netpub_send_data(pub, now_ns);
    }
    if (!silent && now_ns - pub->last_send_ns >= pub->heartbeat_interval_ns)
    {
        exon_netpub_send_heartbeat(pub, now_ns);
        work++;
    }
    if (pub->connected && now_ns - pub->last_sm_ns > pub->connection_timeout_ns)
    {
        pub->connected = false;
        pub->has_sm = false;
        EXON_STORE_REL(&pub->log->meta->is_connected, 0);
        work++;
    }
    return work;
}
