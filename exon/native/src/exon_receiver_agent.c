/* exon_receiver_agent.c: publication image rebuild/NAK/SM duty cycle and the receiver agent. */
#include <stdlib.h>
#include <string.h>

#include "exon_frame_check.h"
#include "exon_receiver_agent.h"
#include "exon_term_rebuilder.h"

#define MS (1000LL * 1000)

void exon_net_image_default_params(exon_net_image_params_t *params)
{
    params->initial_window_length = EXON_INITIAL_WINDOW_DEFAULT;
    params->sm_timeout_ns = EXON_SM_TIMEOUT_DEFAULT_NS;
    params->liveness_timeout_ns = 10000 * MS;
    params->nak_delay_ns = 1000;
    params->nak_retry_delay_ns = 100 * 1000;
}

int exon_setup_check(const exon_setup_header_t *setup)
{
    int32_t tl = setup->term_length;
    if (tl < EXON_TERM_MIN_LENGTH || tl > EXON_TERM_MAX_LENGTH || (tl & (tl - 1)) ||
        setup->mtu <= EXON_DATA_HEADER_LENGTH || setup->mtu > EXON_MAX_UDP_PAYLOAD_LENGTH ||
        (setup->mtu & (EXON_FRAME_ALIGNMENT - 1)) || setup->mtu > tl ||
        setup->term_offset < 0 || setup->term_offset > tl || (setup->term_offset & (EXON_FRAME_ALIGNMENT - 1)))
    {
        return EXON_E_ARGUMENT;
    }
    int64_t term_count = (int32_t)((uint32_t)setup->active_term_id - (uint32_t)setup->initial_term_id);
    return term_count < 0 ? EXON_E_ARGUMENT : 0;
}

int exon_net_image_init(
    exon_net_image_t *image,
    exon_log_t *log,
    exon_udp_channel_t *channel,
    const exon_udp_addr_t *control,
    const exon_setup_header_t *setup,
    int64_t receiver_id,
    const exon_net_image_params_t *params,
    int64_t now_ns)
{
    if (NULL == image || NULL == log || NULL == channel || NULL == control || NULL == setup)
    {
        return exon_set_error(EXON_E_ARGUMENT, "net image: NULL argument");
    }
    if (exon_setup_check(setup) < 0 || log->term_length != setup->term_length ||
        log->initial_term_id != setup->initial_term_id)
    {
        return exon_set_error(EXON_E_ARGUMENT, "net image: log does not match the SETUP");
    }
    memset(image, 0, sizeof(*image));
    if (NULL == params)
    {
        exon_net_image_default_params(&image->params);
    }
    else
    {
        image->params = *params;
    }
    image->log = log;
    image->channel = channel;
    image->control = *control;
    image->session_id = setup->session_id;
    image->stream_id = setup->stream_id;
    image->initial_term_id = setup->initial_term_id;
    image->term_length = setup->term_length;
    image->bits = exon_log_bits_to_shift(setup->term_length);
    image->window = exon_static_window_length(setup->term_length, image->params.initial_window_length);
    image->receiver_id = receiver_id;
    image->join_position = exon_log_compute_position(
        setup->active_term_id, setup->term_offset, image->bits, setup->initial_term_id);
    image->rebuild_position = image->join_position;
    image->hwm_position = image->join_position;
    image->clean_position = image->join_position;
    image->eos_position = INT64_MAX;
    image->consumer_position_local = image->join_position;
    image->consumer_position = &image->consumer_position_local;
    image->last_packet_ns = now_ns;
    image->state = EXON_NETIMG_ACTIVE;
    exon_loss_detector_init(&image->loss, image->params.nak_delay_ns, image->params.nak_retry_delay_ns);
    exon_sm_scheduler_init(&image->sm, image->params.sm_timeout_ns, now_ns);
    image->sm.last_sm_position = image->join_position;
    EXON_STORE_REL(&log->meta->is_connected, 1);
    return 0;
}

/* Frames of one term, back to back, same ids; a PAD must close the term. */
static bool packet_consistent(const exon_net_image_t *image, const uint8_t *packet, int32_t length)
{
    exon_data_header_t first;
    memcpy(&first, packet, sizeof(first));
    if (first.term_offset < 0 || (first.term_offset & (EXON_FRAME_ALIGNMENT - 1)) ||
        (int64_t)first.term_offset + length > image->term_length)
    {
        return false;
    }
    int32_t pos = 0;
    while (pos < length)
    {
        exon_data_header_t h;
        memcpy(&h, packet + pos, sizeof(h));
        if (h.session_id != first.session_id || h.stream_id != first.stream_id || h.term_id != first.term_id ||
            h.term_offset != first.term_offset + pos)
        {
            return false;
        }
        int32_t wire;
        if (h.frame_header.type == EXON_HDR_TYPE_PAD)
        {
            if ((int64_t)h.term_offset + h.frame_header.frame_length != image->term_length)
            {
                return false;
            }
            wire = EXON_DATA_HEADER_LENGTH;
        }
        else
        {
            wire = h.frame_header.frame_length == 0 ? EXON_DATA_HEADER_LENGTH :
                EXON_ALIGN(h.frame_header.frame_length, EXON_FRAME_ALIGNMENT);
        }
        pos += wire;
    }
    return true;
}

int exon_net_image_on_data(exon_net_image_t *image, const uint8_t *packet, int32_t length, int64_t now_ns)
{
    image->stats.packets++;
    if (!packet_consistent(image, packet, length))
    {
        image->stats.bad_packets++;
        return 0;
    }
    exon_data_header_t h;
    memcpy(&h, packet, sizeof(h));
    const bool heartbeat = h.frame_header.frame_length == 0 && h.frame_header.type == EXON_HDR_TYPE_DATA;
    const int64_t packet_position = exon_log_compute_position(h.term_id, h.term_offset, image->bits, image->initial_term_id);
    const int64_t proposed = heartbeat ? packet_position : packet_position + length;
    const int flow = exon_flow_control_receiver_check(image->sm.last_sm_position, image->window, packet_position, proposed);
    if (flow == EXON_FLOW_UNDER_RUN)
    {
        image->stats.under_runs++;
        return 0;
    }
    if (flow == EXON_FLOW_OVER_RUN)
    {
        image->stats.over_runs++;
        return 0;
    }
    int inserted = 0;
    if (heartbeat)
    {
        image->stats.heartbeats_received++;
        if ((h.frame_header.flags & EXON_DATA_FLAG_EOS) && image->eos_position == INT64_MAX)
        {
            image->eos_position = packet_position;
            exon_log_set_end_of_stream(image->log, packet_position);
        }
    }
    else
    {
        uint8_t *term = image->log->terms[exon_log_index_by_position(packet_position, image->bits)];
        inserted = exon_term_rebuilder_insert(term, image->term_length, h.term_offset, packet, length);
        if (inserted < 0)
        {
            image->stats.bad_packets++;
            return 0;
        }
        image->stats.frames_inserted += inserted;
    }
    image->last_packet_ns = now_ns;
    if (proposed > image->hwm_position)
    {
        image->hwm_position = proposed;
    }
    return inserted;
}

static int send_sm(exon_net_image_t *image, int64_t position, int32_t window, uint8_t flags)
{
    exon_sm_header_t sm;
    memset(&sm, 0, sizeof(sm));
    sm.frame_header.frame_length = EXON_SM_LENGTH;
    sm.frame_header.type = EXON_HDR_TYPE_SM;
    sm.frame_header.flags = flags;
    sm.session_id = image->session_id;
    sm.stream_id = image->stream_id;
    sm.consumption_term_id = exon_log_term_id_by_position(position, image->bits, image->initial_term_id);
    sm.consumption_term_offset = exon_log_term_offset_by_position(position, image->term_length);
    sm.receiver_window = window;
    sm.receiver_id = image->receiver_id;
    int rc = exon_udp_channel_send(image->channel, (const uint8_t *)&sm, sizeof(sm), &image->control);
    if (rc > 0)
    {
        image->stats.sms_sent++;
    }
    return rc < 0 ? rc : 1;
}

int exon_net_image_send_eos(exon_net_image_t *image)
{
    return send_sm(image, EXON_LOAD_ACQ(image->consumer_position), 0, EXON_SM_FLAG_EOS);
}

int exon_net_image_do_work(exon_net_image_t *image, int64_t now_ns)
{
    if (image->state != EXON_NETIMG_ACTIVE)
    {
        return 0;
    }
    int work = 0;
    int rc;
    const int64_t consumed = EXON_LOAD_ACQ(image->consumer_position);
    const int64_t clean_target = consumed - image->term_length;
    if (clean_target > image->clean_position)
    {
        exon_log_clean_to(image->log, &image->clean_position, clean_target);
    }
    exon_loss_detector_result_t result;
    const uint8_t *term = image->log->terms[exon_log_index_by_position(image->rebuild_position, image->bits)];
    work += exon_loss_detector_scan(&image->loss, term, image->rebuild_position, image->hwm_position, now_ns,
        image->term_length, image->initial_term_id, &result);
    if (result.rebuild_position > image->rebuild_position)
    {
        image->rebuild_position = result.rebuild_position;
    }
    if (result.send_nak)
    {
        exon_nak_header_t nak;
        memset(&nak, 0, sizeof(nak));
        nak.frame_header.frame_length = EXON_NAK_LENGTH;
        nak.frame_header.type = EXON_HDR_TYPE_NAK;
        nak.session_id = image->session_id;
        nak.stream_id = image->stream_id;
        nak.term_id = result.nak_term_id;
        nak.term_offset = result.nak_term_offset;
        nak.length = result.nak_length;
        if ((rc = exon_udp_channel_send(image->channel, (const uint8_t *)&nak, sizeof(nak), &image->control)) < 0)
        {
            return rc;
        }
        if (rc > 0)
        {
            image->stats.naks_sent++;
        }
    }
    if (exon_sm_scheduler_check(&image->sm, consumed, image->window, now_ns))
    {
        if ((rc = send_sm(image, consumed, image->window, 0)) < 0)
        {
            return rc;
        }
        work += rc;
    }
    if (image->eos_position != INT64_MAX && consumed >= image->eos_position)
    {
        image->state = EXON_NETIMG_DONE_EOS;
        work++;
    }
    else if (now_ns - image->last_packet_ns > image->params.liveness_timeout_ns)
    {
        image->state = EXON_NETIMG_DONE_TIMEOUT;
        EXON_STORE_REL(&image->log->meta->is_connected, 0);
        work++;
    }
    return work;
}

/* ---- the agent ---- */

int exon_receiver_agent_init(
    exon_receiver_agent_t *agent, exon_udp_channel_t *channel, double receive_loss_rate, int64_t receive_loss_seed)
{
    memset(agent, 0, sizeof(*agent));
    int rc = exon_loss_generator_init(&agent->receive_loss, receive_loss_rate, receive_loss_seed, true);
    if (rc < 0)
    {
        return rc;
    }
    agent->rx_memory = malloc((size_t)EXON_RECEIVER_RX_BATCH * EXON_RECEIVER_RX_BUFFER);
    if (NULL == agent->rx_memory)
    {
        return exon_set_error(-ENOMEM, "receiver agent: no memory for receive buffers");
    }
    for (int i = 0; i < EXON_RECEIVER_RX_BATCH; i++)
    {
        agent->rx[i].buffer = agent->rx_memory + (size_t)i * EXON_RECEIVER_RX_BUFFER;
        agent->rx[i].capacity = EXON_RECEIVER_RX_BUFFER;
    }
    agent->channel = channel;
    agent->setup_elicit_interval_ns = 100 * MS;
    agent->image_cool_down_ns = 1000 * MS;
    agent->max_setup_term_length = EXON_TERM_MAX_LENGTH;
    return 0;
}

void exon_receiver_agent_fini(exon_receiver_agent_t *agent)
{
    free(agent->rx_memory);
    agent->rx_memory = NULL;
}

static bool subscribed(const exon_receiver_agent_t *agent, int32_t stream_id)
{
    for (int32_t i = 0; i < agent->stream_count; i++)
    {
        if (agent->streams[i] == stream_id)
        {
            return true;
        }
    }
    return false;
}

int exon_receiver_agent_subscribe(exon_receiver_agent_t *agent, int32_t stream_id)
{
    if (subscribed(agent, stream_id))
    {
        return 0;
    }
    if (agent->stream_count >= EXON_RECEIVER_MAX_STREAMS)
    {
        return exon_set_error(EXON_E_NO_SPACE, "receiver agent: too many streams");
    }
    agent->streams[agent->stream_count++] = stream_id;
    return 0;
}

int exon_receiver_agent_unsubscribe(exon_receiver_agent_t *agent, int32_t stream_id)
{
    for (int32_t i = 0; i < agent->stream_count; i++)
    {
        if (agent->streams[i] == stream_id)
        {
            agent->streams[i] = agent->streams[--agent->stream_count];
            return 0;
        }
    }
    return 0;
}

int exon_receiver_agent_take_setup(exon_receiver_agent_t *agent, exon_setup_request_t *out)
{
    if (agent->pending_count == 0)
    {
        return 0;
    }
    *out = agent->pending[0];
    memmove(&agent->pending[0], &agent->pending[1], sizeof(agent->pending[0]) * (size_t)(agent->pending_count - 1));
    agent->pending_count--;
    return 1;
}

int exon_receiver_agent_add_image(exon_receiver_agent_t *agent, exon_net_image_t *image)
{
    if (agent->image_count >= EXON_RECEIVER_MAX_IMAGES)
    {
        return exon_set_error(EXON_E_NO_SPACE, "receiver agent: too many images");
    }
    agent->images[agent->image_count++] = image;
    return 0;
}

int exon_receiver_agent_take_removed(exon_receiver_agent_t *agent, exon_net_image_t **out)
{
    if (agent->removed_count == 0)
    {
        return 0;
    }
    *out = agent->removed[--agent->removed_count];
    return 1;
}

static exon_net_image_t *find_image(exon_receiver_agent_t *agent, int32_t session_id, int32_t stream_id)
{
    for (int32_t i = 0; i < agent->image_count; i++)
    {
        exon_net_image_t *image = agent->images[i];
        if (image->session_id == session_id && image->stream_id == stream_id)
        {
            return image;
        }
    }
    return NULL;
}

static void elicit_setup(exon_receiver_agent_t *agent, int32_t session_id, int32_t stream_id,
    const exon_udp_addr_t *source, int64_t now_ns)
{
    for (int i = 0; i < EXON_RECEIVER_MAX_PENDING; i++)
    {
        if (agent->elicited[i].session_id == session_id && agent->elicited[i].stream_id == stream_id &&
            agent->elicited[i].at_ns != 0 && now_ns - agent->elicited[i].at_ns < agent->setup_elicit_interval_ns)
        {
            return;
        }
    }
    int slot = agent->elicit_next;
    agent->elicit_next = (agent->elicit_next + 1) % EXON_RECEIVER_MAX_PENDING;
    agent->elicited[slot].session_id = session_id;
    agent->elicited[slot].stream_id = stream_id;
    agent->elicited[slot].at_ns = now_ns == 0 ? 1 : now_ns;
    exon_sm_header_t sm;
    memset(&sm, 0, sizeof(sm));
    sm.frame_header.frame_length = EXON_SM_LENGTH;
    sm.frame_header.type = EXON_HDR_TYPE_SM;
    sm.frame_header.flags = EXON_SM_FLAG_SEND_SETUP;
    sm.session_id = session_id;
    sm.stream_id = stream_id;
    if (exon_udp_channel_send(agent->channel, (const uint8_t *)&sm, sizeof(sm), source) > 0)
    {
        agent->setups_elicited++;
    }
}

/* True (and the cool-down extended) when (session, stream) belongs to a retired image. */
static bool cooling_down(exon_receiver_agent_t *agent, int32_t session_id, int32_t stream_id, int64_t now_ns)
{
    for (int i = 0; i < EXON_RECEIVER_MAX_IMAGES; i++)
    {
        if (agent->cool_down[i].until_ns > now_ns && agent->cool_down[i].session_id == session_id &&
            agent->cool_down[i].stream_id == stream_id)
        {
            agent->cool_down[i].until_ns = now_ns + agent->image_cool_down_ns;
            agent->cool_down_packets++;
            return true;
        }
    }
    return false;
}

static void start_cool_down(exon_receiver_agent_t *agent, const exon_net_image_t *image, int64_t now_ns)
{
    int slot = 0;
    for (int i = 0; i < EXON_RECEIVER_MAX_IMAGES; i++)
    {
        if (agent->cool_down[i].until_ns < agent->cool_down[slot].until_ns)
        {
            slot = i;
        }
    }
    agent->cool_down[slot].session_id = image->session_id;
    agent->cool_down[slot].stream_id = image->stream_id;
    agent->cool_down[slot].until_ns = now_ns + agent->image_cool_down_ns;
}

static void on_setup(exon_receiver_agent_t *agent, const uint8_t *frame, const exon_udp_addr_t *source, int64_t now_ns)
{
    exon_setup_header_t setup;
    memcpy(&setup, frame, sizeof(setup));
    if (!subscribed(agent, setup.stream_id))
    {
        agent->unknown_stream_packets++;
        return;
    }
    exon_net_image_t *image = find_image(agent, setup.session_id, setup.stream_id);
    if (NULL != image)
    {
        image->last_packet_ns = now_ns;
        return;
    }
    if (cooling_down(agent, setup.session_id, setup.stream_id, now_ns))
    {
        return;
    }
    if (exon_setup_check(&setup) < 0 || setup.term_length > agent->max_setup_term_length)
    {
        agent->invalid_packets++;
        return;
    }
    for (int32_t i = 0; i < agent->pending_count; i++)
    {
        if (agent->pending[i].setup.session_id == setup.session_id &&
            agent->pending[i].setup.stream_id == setup.stream_id)
        {
            return;
        }
    }
    if (agent->pending_count < EXON_RECEIVER_MAX_PENDING)
    {
        exon_setup_request_t *req = &agent->pending[agent->pending_count++];
        req->setup = setup;
        req->source = *source;
        req->channel = agent->channel;
    }
}

int exon_receiver_agent_do_work(exon_receiver_agent_t *agent, int64_t now_ns)
{
    int work = 0;
    int n = exon_udp_channel_recv_batch(agent->channel, agent->rx, EXON_RECEIVER_RX_BATCH);
    if (n < 0)
    {
        return n;
    }
    for (int i = 0; i < n; i++)
    {
        exon_udp_msg_t *m = &agent->rx[i];
        exon_datagram_info_t info;
        if (m->truncated || exon_datagram_check(m->buffer, m->length, &info) < 0)
        {
            agent->invalid_packets++;
            continue;
        }
        if (exon_loss_generator_should_drop(&agent->receive_loss, m->buffer, (size_t)m->length))
        {
            agent->receive_loss_drops++;
            continue;
        }
        work++;
        if (info.type == EXON_HDR_TYPE_DATA || info.type == EXON_HDR_TYPE_PAD)
        {
            exon_data_header_t h;
            memcpy(&h, m->buffer, sizeof(h));
            exon_net_image_t *image = find_image(agent, h.session_id, h.stream_id);
            if (NULL != image)
            {
                exon_net_image_on_data(image, m->buffer, m->length, now_ns);
            }
            else if (subscribed(agent, h.stream_id))
            {
                bool eos = h.frame_header.frame_length == 0 && (h.frame_header.flags & EXON_DATA_FLAG_EOS);
                if (!cooling_down(agent, h.session_id, h.stream_id, now_ns) && !eos)
                {
                    elicit_setup(agent, h.session_id, h.stream_id, &m->addr, now_ns);
                }
            }
            else
            {
                agent->unknown_stream_packets++;
            }
        }
        else if (info.type == EXON_HDR_TYPE_SETUP)
        {
            on_setup(agent, m->buffer, &m->addr, now_ns);
        }
    }
    for (int32_t i = 0; i < agent->image_count;)
    {
        exon_net_image_t *image = agent->images[i];
        int rc = exon_net_image_do_work(image, now_ns);
        if (rc < 0)
        {
            return rc;
        }
        work += rc;
        if (image->state != EXON_NETIMG_ACTIVE && agent->removed_count < EXON_RECEIVER_MAX_IMAGES)
        {
            agent->images[i] = agent->images[--agent->image_count];
            agent->removed[agent->removed_count++] = image;
            start_cool_down(agent, image, now_ns);
            continue;
        }
        i++;
    }
    return work;
}
