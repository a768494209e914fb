/* exon_sender_agent.c: network publication duty cycle and the sender agent; see the header. */
#include <string.h>

#include "exon_flow_control.h"
#include "exon_frame_check.h"
#include "exon_sender_agent.h"

#define MS (1000LL * 1000)

void exon_net_publication_default_params(exon_net_publication_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->setup_interval_ns = 100 * MS;
    params->heartbeat_interval_ns = 100 * MS;
    params->connection_timeout_ns = 5000 * MS;
    params->linger_ns = 5000 * MS;
    params->retransmit_delay_ns = 0;
    params->retransmit_linger_ns = 10 * MS;
    params->max_resend = EXON_RETRANSMIT_DEFAULT_MAX_RESEND;
    params->max_datagrams_per_cycle = 4;
    params->send_loss_rate = 0.0;
    params->send_loss_seed = 0;
}

static inline void publish(int64_t *counter, int64_t value)
{
    if (NULL != counter)
    {
        EXON_STORE_REL(counter, value);
    }
}

int exon_net_publication_init(
    exon_net_publication_t *pub,
    exon_log_t *log,
    exon_udp_channel_t *channel,
    const exon_udp_addr_t *destination,
    const exon_net_publication_params_t *params,
    int64_t now_ns)
{
    if (NULL == pub || NULL == log || NULL == channel || NULL == destination)
    {
        return exon_set_error(EXON_E_ARGUMENT, "net publication: NULL argument");
    }
    memset(pub, 0, sizeof(*pub));
    if (NULL == params)
    {
        exon_net_publication_default_params(&pub->params);
    }
    else
    {
        pub->params = *params;
    }
    if (pub->params.max_datagrams_per_cycle < 1 ||
        pub->params.max_datagrams_per_cycle > EXON_SENDER_MAX_DATAGRAMS_PER_CYCLE)
    {
        pub->params.max_datagrams_per_cycle = EXON_SENDER_MAX_DATAGRAMS_PER_CYCLE;
    }
    int rc = exon_retransmit_handler_init(&pub->retransmit, pub->params.retransmit_delay_ns,
        pub->params.retransmit_linger_ns, pub->params.max_resend);
    if (rc < 0)
    {
        return rc;
    }
    if ((rc = exon_loss_generator_init(&pub->send_loss, pub->params.send_loss_rate,
        pub->params.send_loss_seed, true)) < 0)
    {
        return rc;
    }
    pub->log = log;
    pub->channel = channel;
    pub->destination = *destination;
    pub->session_id = log->session_id;
    pub->stream_id = log->stream_id;
    pub->initial_term_id = log->initial_term_id;
    pub->term_length = log->term_length;
    pub->bits = log->position_bits_to_shift;
    pub->mtu = log->mtu;
    pub->sender_position = exon_log_producer_position(log);
    pub->sender_limit = pub->sender_position;
    pub->last_data_ns = now_ns;
    pub->last_setup_ns = now_ns - pub->params.setup_interval_ns; /* first SETUP at once */
    pub->last_sm_ns = now_ns;
    pub->state = EXON_NETPUB_ACTIVE;
    return 0;
}

static int send_bytes(exon_net_publication_t *pub, const uint8_t *data, int32_t length, const exon_udp_addr_t *to)
{
    int rc = exon_udp_channel_send(pub->channel, data, length, to);
    if (rc >= 0 && rc < length)
    {
        pub->stats.short_sends++;
        return 0;
    }
    return rc;
}

static int send_setup(exon_net_publication_t *pub, int64_t now_ns)
{
    exon_setup_header_t setup;
    memset(&setup, 0, sizeof(setup));
    setup.frame_header.frame_length = EXON_SETUP_LENGTH;
    setup.frame_header.type = EXON_HDR_TYPE_SETUP;
    setup.term_offset = exon_log_term_offset_by_position(pub->sender_position, pub->term_length);
    setup.session_id = pub->session_id;
    setup.stream_id = pub->stream_id;
    setup.initial_term_id = pub->initial_term_id;
    setup.active_term_id = exon_log_term_id_by_position(pub->sender_position, pub->bits, pub->initial_term_id);
    setup.term_length = pub->term_length;
    setup.mtu = pub->mtu;
    setup.ttl = 0;
    pub->last_setup_ns = now_ns;
    pub->should_send_setup = false;
    int rc = send_bytes(pub, (const uint8_t *)&setup, sizeof(setup), &pub->destination);
    if (rc > 0)
    {
        pub->stats.setups_sent++;
    }
    return rc < 0 ? rc : 1;
}

static int send_heartbeat(exon_net_publication_t *pub, int64_t now_ns, bool eos)
{
    exon_data_header_t hb;
    memset(&hb, 0, sizeof(hb));
    hb.frame_header.frame_length = 0;
    hb.frame_header.flags = EXON_DATA_FLAG_UNFRAGMENTED | (eos ? EXON_DATA_FLAG_EOS : 0);
    hb.frame_header.type = EXON_HDR_TYPE_DATA;
    hb.term_offset = exon_log_term_offset_by_position(pub->sender_position, pub->term_length);
    hb.session_id = pub->session_id;
    hb.stream_id = pub->stream_id;
    hb.term_id = exon_log_term_id_by_position(pub->sender_position, pub->bits, pub->initial_term_id);
    pub->last_data_ns = now_ns;
    int rc = send_bytes(pub, (const uint8_t *)&hb, sizeof(hb), &pub->destination);
    if (rc > 0)
    {
        pub->stats.heartbeats_sent++;
        if (eos)
        {
            pub->stats.eos_heartbeats_sent++;
        }
    }
    return rc < 0 ? rc : 1;
}

/*
 * Committed bytes from `offset` that fit in max_length, whole frames only; a PAD frame
 * contributes its header and ends the scan (*padding = the rest of it).
 */
static int32_t scan_available(const uint8_t *term, int32_t term_length, int32_t offset, int32_t max_length,
    int32_t *padding)
{
    int32_t available = 0;
    *padding = 0;
    while (offset + available < term_length)
    {
        const uint8_t *frame = term + offset + available;
        int32_t frame_length = EXON_LOAD_ACQ((const int32_t *)frame);
        if (frame_length <= 0)
        {
            break;
        }
        int32_t aligned = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
        if (((const exon_frame_header_t *)frame)->type == EXON_HDR_TYPE_PAD)
        {
            if (available + EXON_DATA_HEADER_LENGTH <= max_length)
            {
                available += EXON_DATA_HEADER_LENGTH;
                *padding = aligned - EXON_DATA_HEADER_LENGTH;
            }
            break;
        }
        if (available + aligned > max_length)
        {
            break;
        }
        available += aligned;
    }
    return available;
}

static int send_data(exon_net_publication_t *pub, int64_t now_ns)
{
    exon_udp_msg_t msgs[EXON_SENDER_MAX_DATAGRAMS_PER_CYCLE];
    int64_t ends[EXON_SENDER_MAX_DATAGRAMS_PER_CYCLE];
    int32_t count = 0;
    int64_t position = pub->sender_position;
    int64_t dropped_end = position;
    while (count < pub->params.max_datagrams_per_cycle)
    {
        int64_t window = pub->sender_limit - position;
        if (window <= 0)
        {
            break;
        }
        int32_t max_length = window < pub->mtu ? (int32_t)window : pub->mtu;
        int32_t offset = exon_log_term_offset_by_position(position, pub->term_length);
        uint8_t *term = pub->log->terms[exon_log_index_by_position(position, pub->bits)];
        int32_t padding = 0;
        int32_t available = scan_available(term, pub->term_length, offset, max_length, &padding);
        if (available <= 0)
        {
            break;
        }
        position += available + padding;
        if (exon_loss_generator_should_drop(&pub->send_loss, term + offset, (size_t)available))
        {
            pub->stats.send_loss_drops++;
            dropped_end = position;
            if (count == 0)
            {
                pub->sender_position = position;
            }
            continue;
        }
        msgs[count].buffer = term + offset;
        msgs[count].length = available;
        msgs[count].addr = pub->destination;
        ends[count] = position;
        count++;
    }
    if (count == 0)
    {
        if (dropped_end <= pub->sender_position)
        {
            return 0;
        }
        pub->sender_position = dropped_end; /* dropped by the debug loss generator: as if sent */
        publish(pub->snd_pos_counter, pub->sender_position);
        return 1;
    }
    int sent = exon_udp_channel_send_batch(pub->channel, msgs, count);
    if (sent < 0)
    {
        return sent;
    }
    if (sent < count)
    {
        pub->stats.short_sends++;
    }
    if (sent > 0)
    {
        for (int i = 0; i < sent; i++)
        {
            pub->stats.data_bytes += msgs[i].length;
        }
        pub->stats.data_datagrams += sent;
        /* datagrams dropped by the loss generator after the last one sent count as sent */
        pub->sender_position = (sent == count && dropped_end > ends[sent - 1]) ? dropped_end : ends[sent - 1];
        pub->last_data_ns = now_ns;
        publish(pub->snd_pos_counter, pub->sender_position);
    }
    return sent;
}

static void resend(exon_net_publication_t *pub, const exon_retransmit_t *r)
{
    int64_t resend_position = exon_log_compute_position(r->term_id, r->term_offset, pub->bits, pub->initial_term_id);
    /*
     * Data in [snd-pos - term_length, snd-pos) is still in the log: publishers stay within
     * snd-pos + term window (<= term / 2) and the log is cleaned only below snd-pos - term.
     * (A PAD jump may put snd-pos beyond SM position + window, so half a term is too tight.)
     */
    int64_t bottom = pub->sender_position - pub->term_length;
    if (resend_position < bottom || resend_position >= pub->sender_position)
    {
        return;
    }
    int32_t remaining = exon_flow_control_max_retransmit_length(
        r->term_offset, r->length, pub->term_length, pub->receiver_window > 0 ? pub->receiver_window : pub->mtu);
    if (resend_position + remaining > pub->sender_position)
    {
        remaining = (int32_t)(pub->sender_position - resend_position);
    }
    uint8_t *term = pub->log->terms[exon_log_index_by_position(resend_position, pub->bits)];
    int32_t offset = r->term_offset;
    while (remaining > 0)
    {
        int32_t padding = 0;
        int32_t max_length = remaining < pub->mtu ? remaining : pub->mtu;
        int32_t available = scan_available(term, pub->term_length, offset, max_length, &padding);
        if (available <= 0)
        {
            break;
        }
        if (exon_loss_generator_should_drop(&pub->send_loss, term + offset, (size_t)available))
        {
            pub->stats.send_loss_drops++;
        }
        else if (send_bytes(pub, term + offset, available, &pub->destination) > 0)
        {
            pub->stats.retransmitted_bytes += available;
        }
        offset += available + padding;
        remaining -= available + padding;
    }
    pub->stats.retransmits++;
}

int exon_net_publication_send(exon_net_publication_t *pub, int64_t now_ns)
{
    int work = 0;
    int rc;
    if (pub->state == EXON_NETPUB_DONE)
    {
        return 0;
    }
    exon_retransmit_t due[EXON_RETRANSMIT_MAX_ACTIONS];
    int n = exon_retransmit_handler_process_timeouts(&pub->retransmit, now_ns, due, EXON_RETRANSMIT_MAX_ACTIONS);
    for (int i = 0; i < n; i++)
    {
        resend(pub, &due[i]);
        work++;
    }
    if (pub->connected && now_ns - pub->last_sm_ns > pub->params.connection_timeout_ns)
    {
        pub->connected = false;
        EXON_STORE_REL(&pub->log->meta->is_connected, 0);
    }
    if ((!pub->connected && now_ns - pub->last_setup_ns >= pub->params.setup_interval_ns) ||
        pub->should_send_setup)
    {
        if ((rc = send_setup(pub, now_ns)) < 0)
        {
            return rc;
        }
        work += rc;
    }
    if (pub->connected)
    {
        if ((rc = send_data(pub, now_ns)) < 0)
        {
            return rc;
        }
        work += rc;
    }
    bool drained = pub->sender_position >= exon_log_producer_position(pub->log);
    if (pub->connected && now_ns - pub->last_data_ns >= pub->params.heartbeat_interval_ns)
    {
        bool eos = pub->state == EXON_NETPUB_DRAINING && drained;
        if ((rc = send_heartbeat(pub, now_ns, eos)) < 0)
        {
            return rc;
        }
        work += rc;
    }
    if (pub->state == EXON_NETPUB_DRAINING)
    {
        if (pub->linger_deadline_ns == 0 && (drained || !pub->connected))
        {
            pub->linger_deadline_ns = now_ns + pub->params.linger_ns;
            if (pub->connected)
            {
                pub->last_data_ns = now_ns - pub->params.heartbeat_interval_ns; /* EOS at once next cycle */
            }
        }
        if (pub->linger_deadline_ns != 0 && now_ns >= pub->linger_deadline_ns)
        {
            pub->state = EXON_NETPUB_DONE;
            work++;
        }
    }
    return work;
}

int exon_net_publication_on_control(
    exon_net_publication_t *pub, const uint8_t *frame, int32_t length,
    const exon_udp_addr_t *source, int64_t now_ns)
{
    const exon_frame_header_t *hdr = (const exon_frame_header_t *)frame;
    switch (hdr->type)
    {
        case EXON_HDR_TYPE_SM:
        {
            exon_sm_header_t sm;
            memcpy(&sm, frame, sizeof(sm));
            pub->stats.sms_received++;
            pub->last_sm_ns = now_ns;
            if (sm.frame_header.flags & EXON_SM_FLAG_SEND_SETUP)
            {
                pub->should_send_setup = true;
                return 1;
            }
            if (sm.frame_header.flags & EXON_SM_FLAG_EOS)
            {
                if (pub->connected)
                {
                    pub->connected = false;
                    EXON_STORE_REL(&pub->log->meta->is_connected, 0);
                }
                return 1;
            }
            pub->receiver_window = sm.receiver_window;
            pub->receiver_id = sm.receiver_id;
            pub->sender_limit = exon_flow_control_unicast_on_sm(pub->sender_limit, sm.consumption_term_id,
                sm.consumption_term_offset, sm.receiver_window, pub->initial_term_id, pub->bits);
            publish(pub->snd_lmt_counter, pub->sender_limit);
            if (!pub->connected)
            {
                pub->connected = true;
                EXON_STORE_REL(&pub->log->meta->is_connected, 1);
            }
            return 1;
        }
        case EXON_HDR_TYPE_NAK:
        {
            exon_nak_header_t nak;
            memcpy(&nak, frame, sizeof(nak));
            pub->stats.naks_received++;
            exon_retransmit_t r;
            if (1 == exon_retransmit_handler_on_nak(&pub->retransmit, nak.term_id, nak.term_offset, nak.length,
                pub->term_length, now_ns, &r))
            {
                resend(pub, &r);
            }
            return 1;
        }
        case EXON_HDR_TYPE_RTTM:
        {
            exon_rttm_header_t rttm;
            memcpy(&rttm, frame, sizeof(rttm));
            if (rttm.frame_header.flags & EXON_RTTM_FLAG_REPLY)
            {
                rttm.frame_header.flags = 0;
                rttm.reception_delta = 0;
                if (send_bytes(pub, (const uint8_t *)&rttm, sizeof(rttm), source) > 0)
                {
                    pub->stats.rttm_replies++;
                }
                return 1;
            }
            return 0;
        }
        default:
            return 0;
    }
}

void exon_net_publication_close(exon_net_publication_t *pub, int64_t now_ns)
{
    if (pub->state == EXON_NETPUB_ACTIVE)
    {
        pub->state = EXON_NETPUB_DRAINING;
        pub->linger_deadline_ns = 0;
    }
}

bool exon_net_publication_is_done(const exon_net_publication_t *pub)
{
    return pub->state == EXON_NETPUB_DONE;
}

/* ---- the agent ---- */

void exon_sender_agent_init(exon_sender_agent_t *agent)
{
    memset(agent, 0, sizeof(*agent));
    for (int i = 0; i < EXON_SENDER_RX_BATCH; i++)
    {
        agent->rx[i].buffer = agent->rx_buffers[i];
        agent->rx[i].capacity = EXON_SENDER_RX_BUFFER;
    }
}

int exon_sender_agent_add(exon_sender_agent_t *agent, exon_net_publication_t *pub)
{
    if (agent->publication_count >= EXON_SENDER_MAX_PUBLICATIONS)
    {
        return exon_set_error(EXON_E_NO_SPACE, "sender agent: %d publications already", agent->publication_count);
    }
    agent->publications[agent->publication_count++] = pub;
    return 0;
}

int exon_sender_agent_remove(exon_sender_agent_t *agent, exon_net_publication_t *pub)
{
    for (int32_t i = 0; i < agent->publication_count; i++)
    {
        if (agent->publications[i] == pub)
        {
            agent->publications[i] = agent->publications[--agent->publication_count];
            return 0;
        }
    }
    return exon_set_error(EXON_E_ARGUMENT, "sender agent: unknown publication");
}

static int poll_channel(exon_sender_agent_t *agent, exon_udp_channel_t *channel, int64_t now_ns)
{
    int n = exon_udp_channel_recv_batch(channel, agent->rx, EXON_SENDER_RX_BATCH);
    if (n <= 0)
    {
        return n;
    }
    for (int i = 0; i < n; i++)
    {
        exon_udp_msg_t *m = &agent->rx[i];
        exon_datagram_info_t info;
        if (m->truncated || exon_datagram_check(m->buffer, m->length, &info) < 0 ||
            (info.type != EXON_HDR_TYPE_SM && info.type != EXON_HDR_TYPE_NAK && info.type != EXON_HDR_TYPE_RTTM))
        {
            agent->invalid_packets++;
            continue;
        }
        int32_t ids[2];
        memcpy(ids, m->buffer + 8, sizeof(ids)); /* session_id, stream_id at 8 and 12 in SM, NAK, RTTM */
        bool found = false;
        for (int32_t p = 0; p < agent->publication_count; p++)
        {
            exon_net_publication_t *pub = agent->publications[p];
            if (pub->channel == channel && pub->session_id == ids[0] && pub->stream_id == ids[1])
            {
                exon_net_publication_on_control(pub, m->buffer, m->length, &m->addr, now_ns);
                found = true;
                break;
            }
        }
        if (!found)
        {
            agent->unknown_session_packets++;
        }
    }
    return n;
}

int exon_sender_agent_do_work(exon_sender_agent_t *agent, int64_t now_ns)
{
    int work = 0;
    for (int32_t i = 0; i < agent->publication_count; i++)
    {
        exon_udp_channel_t *channel = agent->publications[i]->channel;
        bool seen = false;
        for (int32_t j = 0; j < i; j++)
        {
            seen = seen || agent->publications[j]->channel == channel;
        }
        if (!seen)
        {
            int rc = poll_channel(agent, channel, now_ns);
            if (rc < 0)
            {
                return rc;
            }
            work += rc;
        }
    }
    for (int32_t i = 0; i < agent->publication_count; i++)
    {
        int rc = exon_net_publication_send(agent->publications[i], now_ns);
        if (rc < 0)
        {
            return rc;
        }
        work += rc;
    }
    return work;
}
