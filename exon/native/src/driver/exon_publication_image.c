/* exon_publication_image.c: receive endpoints and images (UDP receiver side). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/exon_common.h"
#include "driver/exon_term_rebuilder.h"
#include "driver/exon_publication_image.h"
#include "concurrent/exon_doorbell.h"
#include "media/exon_udp_multicast.h"

#define EXON_NAK_DELAY_NS (10LL * 1000)
#define EXON_NAK_RETRY_NS (1LL * 1000 * 1000)
#define EXON_ELICIT_INTERVAL_NS (1LL * 1000 * 1000)

static int exon_ep_prepare(exon_receive_endpoint_t *ep, exon_counters_t *counters, double loss_rate,
    int64_t loss_seed, int64_t receiver_id)
{
    memset(ep, 0, sizeof(*ep));
    ep->channel.fd = -1;
    ep->counters = counters;
    ep->receiver_id = receiver_id;
    ep->last_elicit_ns = INT64_MIN / 2;
    ep->max_term_length = EXON_TERM_MAX_LENGTH;
    ep->max_images = EXON_ENDPOINT_DEFAULT_IMAGES;
    ep->max_unverified_per_source = EXON_ENDPOINT_DEFAULT_UNVERIFIED_PER_SOURCE;
    ep->idle_eviction_ns = EXON_ENDPOINT_DEFAULT_IDLE_EVICTION_NS;
    int rc = exon_loss_generator_init(&ep->loss, loss_rate, loss_seed, true);
    if (rc < 0)
    {
        return rc;
    }
    ep->loss_enabled = loss_rate > 0.0;
    ep->buffers = malloc((size_t)EXON_ENDPOINT_BATCH * EXON_ENDPOINT_BUFFER_LENGTH);
    if (NULL == ep->buffers)
    {
        return exon_set_error(-ENOMEM, "receive endpoint: out of memory");
    }
    return 0;
}

static int exon_ep_opened(exon_receive_endpoint_t *ep, int rc)
{
    if (rc < 0)
    {
        free(ep->buffers);
        ep->buffers = NULL;
        return rc;
    }
    exon_udp_addr_format(&ep->channel.local, ep->bound_text, sizeof(ep->bound_text));
    return 0;
}

int exon_receive_endpoint_open(
    exon_receive_endpoint_t *ep,
    const exon_udp_addr_t *addr,
    exon_counters_t *counters,
    int32_t so_rcvbuf,
    double loss_rate,
    int64_t loss_seed,
    int64_t receiver_id)
{
    int rc = exon_ep_prepare(ep, counters, loss_rate, loss_seed, receiver_id);
    if (rc < 0)
    {
        return rc;
    }
    return exon_ep_opened(ep, exon_udp_channel_open(&ep->channel, addr, so_rcvbuf, 0));
}

int exon_receive_endpoint_open_multicast(
    exon_receive_endpoint_t *ep,
    const exon_udp_addr_t *group,
    const exon_udp_addr_t *iface,
    exon_counters_t *counters,
    int32_t so_rcvbuf,
    double loss_rate,
    int64_t loss_seed,
    int64_t receiver_id)
{
    int rc = exon_ep_prepare(ep, counters, loss_rate, loss_seed, receiver_id);
    if (rc < 0)
    {
        return rc;
    }
    rc = exon_udp_multicast_control_addr(group, &ep->control_group);
    if (rc >= 0)
    {
        rc = exon_udp_channel_open_multicast(&ep->channel, group, iface, 0, so_rcvbuf, 0);
    }
    rc = exon_ep_opened(ep, rc);
    if (rc >= 0)
    {
        ep->multicast = true;
        /* the group, not the wildcard the socket is bound to */
        exon_udp_addr_format(group, ep->bound_text, sizeof(ep->bound_text));
    }
    return rc;
}

void exon_receive_endpoint_close(exon_receive_endpoint_t *ep)
{
    exon_udp_channel_close(&ep->channel);
    free(ep->buffers);
    ep->buffers = NULL;
}

bool exon_receive_endpoint_has_stream(const exon_receive_endpoint_t *ep, int32_t stream_id)
{
    for (int32_t i = 0; i < ep->stream_count; i++)
    {
        if (ep->stream_ids[i] == stream_id)
        {
            return true;
        }
    }
    return false;
}

void exon_receive_endpoint_unqueue(exon_receive_endpoint_t *ep, int32_t session_id, int32_t stream_id)
{
    for (int32_t i = 0; i < ep->pending_count; i++)
    {
        if (ep->pending[i].session_id == session_id && ep->pending[i].stream_id == stream_id)
        {
            memmove(&ep->pending[i], &ep->pending[i + 1], sizeof(ep->pending[0]) * (size_t)(ep->pending_count - i - 1));
            EXON_STORE_REL(&ep->pending_count, ep->pending_count - 1);
            return;
        }
    }
}

static exon_publication_image_t *exon_ep_find_image(exon_receive_endpoint_t *ep, int32_t session_id, int32_t stream_id)
{
    for (int32_t i = 0; i < ep->image_count; i++)
    {
        exon_publication_image_t *img = ep->images[i];
        if (img->session_id == session_id && img->stream_id == stream_id)
        {
            return img;
        }
    }
    return NULL;
}

static void exon_ep_invalid(exon_receive_endpoint_t *ep)
{
    exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_INVALID_PACKETS, 1);
}

static void exon_ep_send(exon_receive_endpoint_t *ep, const void *data, int32_t length, const exon_udp_addr_t *to)
{
    if (ep->multicast)
    {
        to = &ep->control_group; /* every control frame of a multicast receiver */
    }
    int rc = exon_udp_channel_send(&ep->channel, data, length, to);
    if (rc < length)
    {
        exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_SHORT_SENDS, 1);
    }
    else
    {
        exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_BYTES_SENT, length);
    }
}

static void exon_ep_send_sm(exon_receive_endpoint_t *ep, int32_t session_id, int32_t stream_id, int32_t term_id,
    int32_t term_offset, int32_t window, uint8_t flags, const exon_udp_addr_t *to)
{
    exon_sm_header_t sm;
    memset(&sm, 0, sizeof(sm));
    sm.frame_header.frame_length = EXON_SM_LENGTH;
    sm.frame_header.version = EXON_FRAME_VERSION;
    sm.frame_header.flags = flags;
    sm.frame_header.type = EXON_HDR_TYPE_SM;
    sm.session_id = session_id;
    sm.stream_id = stream_id;
    sm.consumption_term_id = term_id;
    sm.consumption_term_offset = term_offset;
    sm.receiver_window = window;
    sm.receiver_id = ep->receiver_id;
    exon_ep_send(ep, &sm, EXON_SM_LENGTH, to);
    exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_STATUS_MESSAGES_SENT, 1);
}

/* Frames of a DATA datagram: back to back, aligned, the same session/stream/term. */
static bool exon_ep_valid_data(const uint8_t *buf, int32_t length, int32_t term_length)
{
    const exon_data_header_t *first = (const exon_data_header_t *)buf;
    if (first->frame_header.frame_length == 0)
    {
        return length >= EXON_DATA_HEADER_LENGTH;
    }
    if ((length & (EXON_FRAME_ALIGNMENT - 1)) != 0)
    {
        return false;
    }
    int32_t offset = 0;
    while (offset < length)
    {
        if (length - offset < EXON_DATA_HEADER_LENGTH)
        {
            return false;
        }
        const exon_data_header_t *h = (const exon_data_header_t *)(buf + offset);
        int32_t frame_length = h->frame_header.frame_length;
        if (h->frame_header.version != EXON_FRAME_VERSION || frame_length < EXON_DATA_HEADER_LENGTH ||
            h->session_id != first->session_id || h->stream_id != first->stream_id ||
            h->term_id != first->term_id || h->term_offset != first->term_offset + offset)
        {
            return false;
        }
        if (h->frame_header.type == EXON_HDR_TYPE_PAD)
        {
            /* a PAD travels as its header alone but must still end inside the term */
            int64_t end = (int64_t)h->term_offset + EXON_ALIGN((int64_t)frame_length, EXON_FRAME_ALIGNMENT);
            offset += EXON_DATA_HEADER_LENGTH;
            return offset == length && end <= term_length;
        }
        if (h->frame_header.type != EXON_HDR_TYPE_DATA)
        {
            return false;
        }
        int32_t aligned = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
        if (aligned > length - offset)
        {
            return false;
        }
        offset += aligned;
    }
    return true;
}

static void exon_ep_on_data(exon_receive_endpoint_t *ep, const uint8_t *buf, int32_t length,
    const exon_udp_addr_t *from, int64_t now_ns)
{
    if (length < EXON_DATA_HEADER_LENGTH)
    {
        exon_ep_invalid(ep);
        return;
    }
    const exon_data_header_t *h = (const exon_data_header_t *)buf;
    exon_publication_image_t *img = exon_ep_find_image(ep, h->session_id, h->stream_id);
    if (NULL == img)
    {
        if (exon_receive_endpoint_has_stream(ep, h->stream_id))
        {
            bool pending = false;
            for (int32_t i = 0; i < ep->pending_count; i++)
            {
                if (ep->pending[i].session_id == h->session_id && ep->pending[i].stream_id == h->stream_id)
                {
                    pending = true;
                }
            }
            if (!pending && now_ns - ep->last_elicit_ns >= EXON_ELICIT_INTERVAL_NS &&
                h->term_offset >= 0 && (h->term_offset & (EXON_FRAME_ALIGNMENT - 1)) == 0)
            {
                ep->last_elicit_ns = now_ns;
                exon_ep_send_sm(ep, h->session_id, h->stream_id, h->term_id, h->term_offset, 0,
                    EXON_SM_FLAG_SEND_SETUP, from);
            }
        }
        else
        {
            exon_ep_invalid(ep); /* data for a stream nobody subscribes to here */
        }
        return;
    }
    if (EXON_LOAD_RLX(&img->state) != EXON_IMAGE_ACTIVE)
    {
        return;
    }
    if (!exon_udp_addr_equal(from, &img->control_addr))
    {
        /* a unicast image takes data only from the address its SETUP came from */
        exon_ep_invalid(ep);
        return;
    }
    int32_t term_offset = h->term_offset;
    if (term_offset < 0 || (term_offset & (EXON_FRAME_ALIGNMENT - 1)) != 0 ||
        term_offset > img->term_length - EXON_DATA_HEADER_LENGTH || !exon_ep_valid_data(buf, length, img->term_length))
    {
        exon_ep_invalid(ep);
        return;
    }
    bool heartbeat = h->frame_header.frame_length == 0;
    int32_t data_length = heartbeat ? 0 : length;
    if (term_offset + data_length > img->term_length)
    {
        exon_ep_invalid(ep);
        return;
    }
    int64_t position = exon_log_compute_position(h->term_id, term_offset, img->bits, img->initial_term_id);
    int64_t proposed = position + data_length;
    int check = exon_flow_control_receiver_check(img->sm.last_sm_position, img->window, position, proposed);
    img->last_packet_ns = now_ns;
    int32_t heard_id = EXON_LOAD_ACQ(&img->heard_id); /* set by the conductor once verified */
    if (heard_id >= 0 && now_ns - img->heard_ns >= EXON_HEARD_STEP_NS)
    {
        /* a live sender heartbeats every 100 ms: a node reads how long an image has been
         * quiet (a peer node restarted at the same address, docs/protocol.md 2.7) */
        img->heard_ns = now_ns;
        exon_counter_set(img->counters, heard_id, exon_epoch_ms());
    }
    if (heartbeat)
    {
        exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_HEARTBEATS_RECEIVED, 1);
        if (check == EXON_FLOW_OK)
        {
            if (proposed > img->hwm)
            {
                img->hwm = proposed;
                exon_counter_set(ep->counters, img->rcv_hwm_id, proposed);
            }
            if (h->frame_header.flags & EXON_DATA_FLAG_EOS)
            {
                img->eos_position = position;
                img->eos_seen = true;
            }
        }
        else if (check == EXON_FLOW_OVER_RUN)
        {
            /*
             * The sender's position passes the window's end by the padding that closes a
             * term (a PAD travels as its header alone; the sender steps over the rest). If
             * the last frames before that PAD were lost, this heartbeat is the only news
             * of them: ignoring it left the hwm at the last frame received, no gap to NAK,
             * no SM to move the window, a stalled stream. The sender sends contiguously, so
             * a position past the window's end proves everything up to that end was sent:
             * the hwm goes there and the loss detector NAKs what is missing.
             */
            int64_t window_end = img->sm.last_sm_position + img->window;
            if (window_end > img->hwm)
            {
                img->hwm = window_end;
                exon_counter_set(ep->counters, img->rcv_hwm_id, window_end);
            }
        }
        return;
    }
    if (check == EXON_FLOW_UNDER_RUN)
    {
        exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_FLOW_CONTROL_UNDER_RUNS, 1);
        return;
    }
    if (check == EXON_FLOW_OVER_RUN)
    {
        exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_FLOW_CONTROL_OVER_RUNS, 1);
        return;
    }
    uint8_t *term = img->log->terms[exon_log_index_by_position(position, img->bits)];
    int rc = exon_term_rebuilder_insert(term, img->term_length, term_offset, buf, length);
    if (rc < 0)
    {
        exon_ep_invalid(ep);
        return;
    }
    img->wake_readers = true;
    if (proposed > img->hwm)
    {
        img->hwm = proposed;
        exon_counter_set(ep->counters, img->rcv_hwm_id, proposed);
    }
}

static bool exon_ep_valid_setup(const exon_setup_header_t *s)
{
    int32_t tl = s->term_length;
    /* the active term must not precede the initial one (term ids wrap): a negative join
     * position would index the log's terms with a negative partition */
    int32_t term_count = (int32_t)((uint32_t)s->active_term_id - (uint32_t)s->initial_term_id);
    return term_count >= 0 && tl >= EXON_TERM_MIN_LENGTH && tl <= EXON_TERM_MAX_LENGTH && (tl & (tl - 1)) == 0 &&
        s->mtu >= 64 && s->mtu <= EXON_MAX_UDP_PAYLOAD_LENGTH && (s->mtu & (EXON_FRAME_ALIGNMENT - 1)) == 0 &&
        s->mtu <= tl && s->term_offset >= 0 && s->term_offset < tl &&
        (s->term_offset & (EXON_FRAME_ALIGNMENT - 1)) == 0;
}

static void exon_ep_evict(exon_receive_endpoint_t *ep, exon_publication_image_t *img)
{
    img->evicted = true;
    EXON_STORE_REL(&img->state, EXON_IMAGE_INACTIVE);
    exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_IMAGES_EVICTED, 1);
}

/*
 * Room for one more queued SETUP from `from` (the header's rules): per source at most
 * max_unverified_per_source unverified entries, at most max_images live entries in all;
 * evicts what may go (oldest unverified first, then a verified image quiet past
 * idle_eviction_ns). False: the SETUP must be dropped. Receiver thread, under its lock.
 */
static bool exon_ep_make_room(exon_receive_endpoint_t *ep, const exon_udp_addr_t *from, int64_t now_ns)
{
    if (ep->pending_count >= EXON_ENDPOINT_MAX_PENDING)
    {
        return false;
    }
    int32_t live = ep->pending_count;
    int32_t from_source = 0;
    for (int32_t i = 0; i < ep->pending_count; i++)
    {
        from_source += exon_udp_addr_equal(&ep->pending[i].source, from) ? 1 : 0;
    }
    exon_publication_image_t *oldest_of_source = NULL;
    exon_publication_image_t *oldest_unverified = NULL;
    exon_publication_image_t *quietest = NULL;
    for (int32_t i = 0; i < ep->image_count; i++)
    {
        exon_publication_image_t *img = ep->images[i];
        if (EXON_LOAD_RLX(&img->state) == EXON_IMAGE_INACTIVE)
        {
            continue; /* on its way out: the conductor removes it before it queues SETUPs */
        }
        live++;
        if (exon_publication_image_verified(img))
        {
            if (NULL == quietest || img->last_packet_ns < quietest->last_packet_ns)
            {
                quietest = img;
            }
            continue;
        }
        if (NULL == oldest_unverified || img->created_ns < oldest_unverified->created_ns)
        {
            oldest_unverified = img;
        }
        if (exon_udp_addr_equal(&img->control_addr, from))
        {
            from_source++;
            if (NULL == oldest_of_source || img->created_ns < oldest_of_source->created_ns)
            {
                oldest_of_source = img;
            }
        }
    }
    if (from_source >= ep->max_unverified_per_source)
    {
        if (NULL == oldest_of_source)
        {
            return false;
        }
        exon_ep_evict(ep, oldest_of_source);
        return true; /* live went down by one: room for this source's SETUP */
    }
    if (live < ep->max_images)
    {
        return true;
    }
    if (NULL != oldest_unverified)
    {
        exon_ep_evict(ep, oldest_unverified);
        return true;
    }
    if (NULL != quietest && now_ns - quietest->last_packet_ns > ep->idle_eviction_ns)
    {
        exon_ep_evict(ep, quietest);
        return true;
    }
    return false;
}

static void exon_ep_on_setup(exon_receive_endpoint_t *ep, const uint8_t *buf, int32_t length,
    const exon_udp_addr_t *from, int64_t now_ns)
{
    if (length < EXON_SETUP_LENGTH)
    {
        exon_ep_invalid(ep);
        return;
    }
    exon_setup_header_t s;
    memcpy(&s, buf, sizeof(s));
    if (!exon_ep_valid_setup(&s) || s.term_length > ep->max_term_length)
    {
        exon_ep_invalid(ep);
        return;
    }
    if (!exon_receive_endpoint_has_stream(ep, s.stream_id))
    {
        return;
    }
    exon_publication_image_t *img = exon_ep_find_image(ep, s.session_id, s.stream_id);
    if (NULL != img)
    {
        return;
    }
    for (int32_t i = 0; i < ep->pending_count; i++)
    {
        if (ep->pending[i].session_id == s.session_id && ep->pending[i].stream_id == s.stream_id)
        {
            return;
        }
    }
    if (!exon_ep_make_room(ep, from, now_ns))
    {
        /* counted, not silent: the publisher keeps sending SETUPs and gets an image once
         * a slot frees */
        exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_SETUPS_DROPPED, 1);
        return;
    }
    exon_pending_setup_t *p = &ep->pending[ep->pending_count++];
    p->session_id = s.session_id;
    p->stream_id = s.stream_id;
    p->initial_term_id = s.initial_term_id;
    p->active_term_id = s.active_term_id;
    p->term_offset = s.term_offset;
    p->term_length = s.term_length;
    p->mtu = s.mtu;
    p->source = *from;
}

static void exon_ep_send_rttm(exon_receive_endpoint_t *ep, int32_t session_id, int32_t stream_id, uint8_t flags,
    int64_t echo_timestamp, const exon_udp_addr_t *to)
{
    exon_rttm_header_t r;
    memset(&r, 0, sizeof(r));
    r.frame_header.frame_length = EXON_RTTM_LENGTH;
    r.frame_header.version = EXON_FRAME_VERSION;
    r.frame_header.flags = flags;
    r.frame_header.type = EXON_HDR_TYPE_RTTM;
    r.session_id = session_id;
    r.stream_id = stream_id;
    r.echo_timestamp = echo_timestamp;
    r.reception_delta = 0;
    r.receiver_id = ep->receiver_id;
    exon_ep_send(ep, &r, EXON_RTTM_LENGTH, to);
}

/* RTTM with REPLY is a request: echo it at once without the flag. Without REPLY it answers
 * one of our images' requests: rtt = now - echo_timestamp - reception_delta. */
static void exon_ep_on_rttm(
    exon_receive_endpoint_t *ep, const uint8_t *buf, int32_t length, const exon_udp_addr_t *from, int64_t now_ns)
{
    if (length < EXON_RTTM_LENGTH)
    {
        exon_ep_invalid(ep);
        return;
    }
    exon_rttm_header_t r;
    memcpy(&r, buf, sizeof(r));
    if (r.frame_header.flags & EXON_RTTM_FLAG_REPLY)
    {
        exon_ep_send_rttm(ep, r.session_id, r.stream_id, 0, r.echo_timestamp, from);
        return;
    }
    exon_publication_image_t *img = exon_ep_find_image(ep, r.session_id, r.stream_id);
    int64_t rtt = now_ns - r.echo_timestamp - r.reception_delta;
    if (ep->multicast && r.receiver_id != ep->receiver_id)
    {
        return; /* another receiver's answer: the sender sends them to the whole group */
    }
    if (NULL == img || r.receiver_id != ep->receiver_id || rtt < 0 || r.echo_timestamp > now_ns)
    {
        exon_ep_invalid(ep);
        return;
    }
    img->rtt_ns = rtt;
    if (!exon_publication_image_verified(img) && r.echo_timestamp == img->last_rttm_ns &&
        exon_udp_addr_equal(from, &img->control_addr))
    {
        /* only the image's source saw the request: it is real */
        exon_loss_detector_verify(&img->loss, now_ns);
    }
    if (img->rtt_id >= 0)
    {
        exon_counter_set(img->counters, img->rtt_id, rtt);
    }
}

void exon_receive_endpoint_on_datagram(
    exon_receive_endpoint_t *ep, const uint8_t *buf, int32_t length, const exon_udp_addr_t *from, int64_t now_ns)
{
    if (length < (int32_t)sizeof(exon_frame_header_t))
    {
        exon_ep_invalid(ep);
        return;
    }
    const exon_frame_header_t *fh = (const exon_frame_header_t *)buf;
    if (fh->version != EXON_FRAME_VERSION)
    {
        exon_ep_invalid(ep);
        return;
    }
    switch (fh->type)
    {
        case EXON_HDR_TYPE_DATA:
        case EXON_HDR_TYPE_PAD:
            exon_ep_on_data(ep, buf, length, from, now_ns);
            return;
        case EXON_HDR_TYPE_SETUP:
            exon_ep_on_setup(ep, buf, length, from, now_ns);
            return;
        case EXON_HDR_TYPE_RTTM:
            exon_ep_on_rttm(ep, buf, length, from, now_ns);
            return;
        default:
            exon_ep_invalid(ep);
            return;
    }
}

/* After a batch: ring the doorbells of the readers asleep on each image that got frames
 * (docs/internals.md, "Waking up without spinning"), as an IPC publisher does after its
 * commit. Without it a subscriber parked on a UDP image only saw new data at the end of
 * its wait slice. */
static void exon_ep_wake_readers(exon_receive_endpoint_t *ep)
{
    bool fenced = false;
    for (int32_t i = 0; i < ep->image_count; i++)
    {
        exon_publication_image_t *img = ep->images[i];
        if (NULL == img || !img->wake_readers)
        {
            continue;
        }
        img->wake_readers = false;
        if (!fenced)
        {
            /* the frames' stores before the load of exon_waiters (a reader increments
             * it, then re-checks for data) */
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            fenced = true;
        }
        if (EXON_LOAD_RLX(&img->log->meta->exon_waiters) > 0)
        {
            exon_log_ring_doorbells(img->log->meta, img->counters->values, NULL, NULL);
        }
    }
}

int exon_receive_endpoint_poll(exon_receive_endpoint_t *ep, int64_t now_ns)
{
    exon_udp_msg_t msgs[EXON_ENDPOINT_BATCH];
    for (int i = 0; i < EXON_ENDPOINT_BATCH; i++)
    {
        msgs[i].buffer = ep->buffers + (size_t)i * EXON_ENDPOINT_BUFFER_LENGTH;
        msgs[i].capacity = EXON_ENDPOINT_BUFFER_LENGTH;
    }
    int n = exon_udp_channel_recv_batch(&ep->channel, msgs, EXON_ENDPOINT_BATCH);
    if (n <= 0)
    {
        return 0;
    }
    for (int i = 0; i < n; i++)
    {
        exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_BYTES_RECEIVED, msgs[i].length);
        /* with GRO one buffer may hold several datagrams: each is dispatched on its own */
        exon_udp_segments_t segments;
        exon_udp_msg_split(&msgs[i], &segments);
        if (segments.dropped)
        {
            exon_ep_invalid(ep);
        }
        for (int32_t k = 0; k < segments.count; k++)
        {
            const uint8_t *datagram = msgs[i].buffer + (size_t)k * (size_t)segments.segment_size;
            int32_t length = k + 1 == segments.count ? segments.last_length : segments.segment_size;
            if (ep->loss_enabled && exon_loss_generator_should_drop(&ep->loss, datagram, (size_t)length))
            {
                continue;
            }
            exon_receive_endpoint_on_datagram(ep, datagram, length, &msgs[i].addr, now_ns);
        }
    }
    exon_ep_wake_readers(ep);
    return n;
}

void exon_publication_image_init(
    exon_publication_image_t *img,
    exon_log_t *log,
    exon_counters_t *counters,
    exon_receive_endpoint_t *ep,
    const exon_pending_setup_t *setup,
    int32_t rcv_hwm_id,
    int32_t rcv_pos_id,
    int32_t window,
    int64_t liveness_timeout_ns,
    int64_t sm_timeout_ns,
    int64_t now_ns)
{
    memset(img, 0, sizeof(*img));
    img->log = log;
    img->counters = counters;
    img->endpoint = ep;
    img->session_id = setup->session_id;
    img->stream_id = setup->stream_id;
    img->initial_term_id = setup->initial_term_id;
    img->term_length = setup->term_length;
    img->bits = exon_log_bits_to_shift(setup->term_length);
    img->window = window;
    img->rcv_hwm_id = rcv_hwm_id;
    img->rcv_pos_id = rcv_pos_id;
    img->join_position = exon_log_compute_position(
        setup->active_term_id, setup->term_offset, img->bits, setup->initial_term_id);
    img->hwm = img->join_position;
    img->rcv_pos = img->join_position;
    img->clean_position = img->join_position;
    img->last_consumed = img->join_position;
    img->last_packet_ns = now_ns;
    img->liveness_timeout_ns = liveness_timeout_ns;
    img->eos_position = INT64_MAX;
    img->state = EXON_IMAGE_ACTIVE;
    img->control_addr = setup->source;
    img->last_rttm_ns = now_ns - EXON_RTTM_INTERVAL_NS;
    img->created_ns = now_ns;
    img->evicted = false;
    img->rtt_ns = 0;
    img->rtt_id = -1;
    img->heard_id = -1;
    exon_loss_detector_init(&img->loss, EXON_NAK_DELAY_NS, EXON_NAK_RETRY_NS);
    exon_loss_detector_set_policy(&img->loss, EXON_NAK_RETRY_NS, 0, 0, false);
    exon_sm_scheduler_init(&img->sm, sm_timeout_ns, now_ns);
    img->sm.last_sm_position = img->join_position;
    img->sm.last_sm_window = window;
    exon_counter_set(counters, rcv_hwm_id, img->join_position);
    exon_counter_set(counters, rcv_pos_id, img->join_position);
}

int64_t exon_publication_image_min_sub_pos(exon_publication_image_t *img)
{
    int64_t min = INT64_MAX;
    for (int32_t i = 0; i < img->sub_pos_count; i++)
    {
        int64_t p = exon_counter_get(img->counters, img->sub_pos_ids[i]);
        if (p < min)
        {
            min = p;
        }
    }
    return min == INT64_MAX ? img->rcv_pos : min;
}

int exon_publication_image_do_work(exon_publication_image_t *img, int64_t now_ns)
{
    int32_t state = EXON_LOAD_RLX(&img->state);
    if (state == EXON_IMAGE_INACTIVE)
    {
        return 0;
    }
    int work = 0;
    exon_receive_endpoint_t *ep = img->endpoint;
    if (img->hwm > img->rcv_pos)
    {
        const uint8_t *term = img->log->terms[exon_log_index_by_position(img->rcv_pos, img->bits)];
        exon_loss_detector_result_t result;
        work += exon_loss_detector_scan(&img->loss, term, img->rcv_pos, img->hwm, now_ns, img->term_length,
            img->initial_term_id, &result);
        if (result.rebuild_position > img->rcv_pos)
        {
            img->rcv_pos = result.rebuild_position;
            exon_counter_set(img->counters, img->rcv_pos_id, img->rcv_pos);
            if (!img->loss.verified)
            {
                /* data contiguous from the join: more than a SETUP made this image */
                exon_loss_detector_verify(&img->loss, now_ns);
            }
        }
        if (result.loss_found && img->nak_delay.max_backoff_ns > 0)
        {
            /* the next new gap waits a fresh random delay (this one keeps its timer) */
            img->loss.delay_ns = exon_feedback_delay_next(&img->nak_delay);
        }
        if (result.nak_suppressed)
        {
            exon_counter_add(img->counters, EXON_SYSTEM_COUNTER_NAKS_SUPPRESSED, 1);
        }
        if (result.send_nak)
        {
            exon_nak_header_t nak;
            memset(&nak, 0, sizeof(nak));
            nak.frame_header.frame_length = EXON_NAK_LENGTH;
            nak.frame_header.version = EXON_FRAME_VERSION;
            nak.frame_header.type = EXON_HDR_TYPE_NAK;
            nak.session_id = img->session_id;
            nak.stream_id = img->stream_id;
            nak.term_id = result.nak_term_id;
            nak.term_offset = result.nak_term_offset;
            nak.length = result.nak_length;
            exon_ep_send(ep, &nak, EXON_NAK_LENGTH, &img->control_addr);
            exon_counter_add(img->counters, EXON_SYSTEM_COUNTER_NAK_MESSAGES_SENT, 1);
        }
    }
    int64_t consumed = exon_publication_image_min_sub_pos(img);
    if (consumed > img->rcv_pos)
    {
        consumed = img->rcv_pos;
    }
    if (consumed != img->last_consumed)
    {
        /* subscribers are reading: stay awake so the next SM goes out without a park's
         * delay (nothing else wakes the receiver while the sender waits for the window) */
        img->last_consumed = consumed;
        work++;
    }
    if (state == EXON_IMAGE_ACTIVE && exon_sm_scheduler_check(&img->sm, consumed, img->window, now_ns))
    {
        exon_ep_send_sm(ep, img->session_id, img->stream_id,
            exon_log_term_id_by_position(consumed, img->bits, img->initial_term_id),
            exon_log_term_offset_by_position(consumed, img->term_length), img->window, 0, &img->control_addr);
        work++;
    }
    if (state == EXON_IMAGE_ACTIVE && now_ns - img->last_rttm_ns >=
        (img->loss.verified ? EXON_RTTM_INTERVAL_NS : EXON_RTTM_UNVERIFIED_INTERVAL_NS))
    {
        exon_ep_send_rttm(ep, img->session_id, img->stream_id, EXON_RTTM_FLAG_REPLY, now_ns, &img->control_addr);
        img->last_rttm_ns = now_ns;
        work++;
    }
    int64_t clean_to = consumed - img->term_length;
    if (clean_to > img->clean_position)
    {
        exon_log_clean_to(img->log, &img->clean_position, clean_to);
    }
    if (state == EXON_IMAGE_ACTIVE && img->eos_seen && img->rcv_pos >= img->eos_position)
    {
        exon_log_set_end_of_stream(img->log, img->eos_position);
        EXON_STORE_REL(&img->state, EXON_IMAGE_EOS);
        work++;
    }
    if (now_ns - img->last_packet_ns > img->liveness_timeout_ns)
    {
        EXON_STORE_REL(&img->state, EXON_IMAGE_INACTIVE);
        work++;
    }
    return work;
}
