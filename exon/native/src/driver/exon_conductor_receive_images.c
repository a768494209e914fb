/*
 * exon_conductor_receive_images.c: the conductor's side of UDP receiving (conductor thread).
 *
 * Receive endpoints (exon_publication_image.h: one bound socket per endpoint, shared by the
 * UDP subscriptions on it, with per-stream reference counts) and the publication images
 * they feed: a SETUP the receiver reports becomes an image log under
 * <dir>/images/<id>.logbuffer with rcv-hwm, rcv-pos and rcv-rtt counters and one sub-pos
 * per subscription (ON_AVAILABLE_IMAGE); an image that is done (inactive, evicted, or
 * drained past its EOS) is reaped (ON_UNAVAILABLE_IMAGE) and unlinked.
 *
 * The conductor never touches the receiver's lists (exon_receiver.c): it opens an
 * endpoint's socket, then hands the endpoint, its streams, images and sub-pos ids over
 * with commands on c->receiver->commands, and drains c->receiver->events every duty cycle.
 * Removal is two-phase: REMOVE_IMAGE / REMOVE_SUBSCRIBER / REMOVE_ENDPOINT go out at once
 * (ON_UNAVAILABLE_IMAGE too), but the image's log and counters, a sub-pos counter, an
 * endpoint's memory are freed only when the receiver reports it let go of them, so nothing
 * the receiver may still write is unmapped or reused. The receiver closes a removed
 * endpoint's socket itself; a subscription that binds a port while an endpoint is still
 * closing first lets the conductor apply the receiver's queued commands itself
 * (exon_receiver_catch_up, under the receiver lock), so the old socket is gone before the
 * bind (no EADDRINUSE on a port reopened in the same batch of commands).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"
#include "concurrent/exon_doorbell.h"
#include "driver/exon_conductor_internal.h"

static void exon_dc_send_unavailable_image(exon_driver_conductor_t *c, exon_dc_image_t *image, exon_dc_subscription_t *sub)
{
    exon_image_message_t *m = (exon_image_message_t *)c->msg;
    m->correlation_id = image->correlation_id;
    m->subscription_registration_id = sub->registration_id;
    m->stream_id = image->img.stream_id;
    m->channel_length = 9;
    memcpy(c->msg + sizeof(*m), "aeron:udp", 9);
    exon_dc_transmit(c, EXON_RSP_ON_UNAVAILABLE_IMAGE, c->msg, (int32_t)sizeof(*m) + 9);
    exon_dc_ring_subscription(c, sub);
}

/* Queue a command for the receiver; an error (out of memory) is logged. */
static int exon_dc_receiver_command(exon_driver_conductor_t *c, int32_t type, int32_t value, void *target)
{
    int rc = exon_command_queue_offer(&c->receiver->commands, type, value, target);
    if (rc < 0)
    {
        exon_driver_conductor_error(c, "receiver command %d: %s", type, exon_last_error());
    }
    return rc;
}

/* Link an image to a subscription: a sub-pos counter at the image's rebuild position. */
static void exon_dc_image_link(exon_driver_conductor_t *c, exon_dc_image_t *image, exon_dc_subscription_t *sub)
{
    if (image->sub_count >= EXON_IMAGE_MAX_SUBSCRIBERS)
    {
        exon_driver_conductor_error(c, "image %lld: too many subscriptions", (long long)image->correlation_id);
        return;
    }
    int64_t join = exon_counter_get(&c->counters, image->img.rcv_pos_id);
    char label[200];
    int n = snprintf(label, sizeof(label), "sub-pos: %lld %d %d aeron:udp?endpoint=%s @%lld",
        (long long)sub->registration_id, image->img.session_id, image->img.stream_id,
        image->img.endpoint->bound_text, (long long)join);
    int32_t counter_id = exon_counters_allocate(&c->counters, EXON_COUNTER_TYPE_SUBSCRIBER_POSITION, NULL, 0, label,
        n, sub->registration_id, sub->client_id, exon_epoch_ms());
    if (counter_id < 0)
    {
        exon_driver_conductor_error(c, "no counter for sub-pos of subscription %lld", (long long)sub->registration_id);
        return;
    }
    exon_counter_set(&c->counters, counter_id, join);
    if (image->handed_over)
    {
        if (exon_dc_receiver_command(c, EXON_RCV_CMD_ADD_SUBSCRIBER, counter_id, &image->img) < 0)
        {
            exon_counters_free(&c->counters, counter_id, exon_epoch_ms());
            return;
        }
    }
    else
    {
        image->img.sub_pos_ids[image->sub_count] = counter_id;
        image->img.sub_pos_count = image->sub_count + 1;
    }
    if (sub->doorbell_id >= 0)
    {
        exon_log_add_doorbell(image->log.meta, sub->doorbell_id);
    }
    image->subs[image->sub_count] = sub;
    image->sub_pos_ids[image->sub_count] = counter_id;
    image->sub_count++;

    exon_image_ready_t *m = (exon_image_ready_t *)c->msg;
    int32_t log_length = (int32_t)strlen(image->log.path);
    m->correlation_id = image->correlation_id;
    m->subscription_registration_id = sub->registration_id;
    m->session_id = image->img.session_id;
    m->stream_id = image->img.stream_id;
    m->subscriber_position_counter_id = counter_id;
    m->log_file_length = log_length;
    uint8_t *p = c->msg + sizeof(*m);
    memcpy(p, image->log.path, (size_t)log_length);
    p += log_length;
    int32_t source_length = (int32_t)strlen(image->source);
    memcpy(p, &source_length, sizeof(source_length));
    p += sizeof(source_length);
    memcpy(p, image->source, (size_t)source_length);
    p += source_length;
    exon_dc_transmit(c, EXON_RSP_ON_AVAILABLE_IMAGE, c->msg, (int32_t)(p - c->msg));
    exon_dc_ring_subscription(c, sub);
}

void exon_dc_link_images(exon_driver_conductor_t *c, exon_dc_subscription_t *sub)
{
    for (int32_t i = 0; i < c->images.length; i++)
    {
        exon_dc_image_t *image = c->images.items[i];
        if (!image->removing && image->img.endpoint == sub->endpoint && image->img.stream_id == sub->stream_id &&
            EXON_LOAD_ACQ(&image->img.state) == EXON_IMAGE_ACTIVE)
        {
            exon_dc_image_link(c, image, sub);
        }
    }
}

/* Second phase: the receiver let go of the image (or never had it, or the agents are
 * stopped): its counters go (sub-pos ids included) and its log is unmapped and unlinked. */
static void exon_dc_free_image(exon_driver_conductor_t *c, exon_dc_image_t *image)
{
    int64_t now_ms = exon_epoch_ms();
    for (int32_t i = 0; i < image->sub_count; i++)
    {
        exon_counters_free(&c->counters, image->sub_pos_ids[i], now_ms);
    }
    exon_counters_free(&c->counters, image->img.rcv_hwm_id, now_ms);
    exon_counters_free(&c->counters, image->img.rcv_pos_id, now_ms);
    if (image->img.rtt_id >= 0)
    {
        exon_counters_free(&c->counters, image->img.rtt_id, now_ms);
    }
    if (image->img.heard_id >= 0)
    {
        exon_counters_free(&c->counters, image->img.heard_id, now_ms);
    }
    char path[EXON_LOG_PATH_MAX];
    snprintf(path, sizeof(path), "%s", image->log.path);
    exon_log_close(&image->log);
    exon_log_unlink(path);
    exon_dc_array_remove(&c->images, image);
    free(image);
}

/* First phase of removing an image: subscriptions told (when notify), the receiver asked to
 * drop it; exon_dc_free_image follows its IMAGE_RELEASED. */
static void exon_dc_remove_image(exon_driver_conductor_t *c, exon_dc_image_t *image, bool notify)
{
    if (image->removing)
    {
        return;
    }
    image->removing = true;
    for (int32_t i = 0; notify && i < image->sub_count; i++)
    {
        exon_dc_send_unavailable_image(c, image, image->subs[i]);
    }
    if (!image->handed_over)
    {
        exon_dc_free_image(c, image);
        return;
    }
    /* out of memory: kept (and counted as an error) rather than freed under the receiver */
    (void)exon_dc_receiver_command(c, EXON_RCV_CMD_REMOVE_IMAGE, 0, &image->img);
}

#define EXON_DC_NAK_RETRY_RATIO_DEFAULT 100
#define EXON_DC_NAK_RETRY_FALLBACK_NS (1000LL * 1000LL)

/*
 * The `nak-delay` for a new image on `ep` and `stream_id`: that of the oldest (lowest
 * registration id) subscription still open there, or -1 (the driver's) when it set none.
 * Later subscriptions that disagree do not change it, nor images already made.
 */
static int64_t exon_dc_image_nak_delay(exon_driver_conductor_t *c, const exon_receive_endpoint_t *ep, int32_t stream_id)
{
    const exon_dc_subscription_t *first = NULL;
    for (int32_t i = 0; i < c->subscriptions.length; i++)
    {
        const exon_dc_subscription_t *sub = c->subscriptions.items[i];
        if (sub->udp && sub->endpoint == ep && sub->stream_id == stream_id &&
            (NULL == first || sub->registration_id < first->registration_id))
        {
            first = sub;
        }
    }
    return NULL != first ? first->nak_delay_ns : -1;
}

static bool exon_dc_create_image(exon_driver_conductor_t *c, exon_receive_endpoint_t *ep, const exon_pending_setup_t *setup,
    int64_t now_ns)
{
    /*
     * The receiver may report this session's SETUP again while an earlier one is turned into
     * an image (the sender repeats SETUP until an SM, and DATA of an unknown session elicits
     * one). The conductor alone creates images and adds them to c->images first, so an image
     * already here means this SETUP is a repeat: a second image would show the subscription
     * one publication twice. An old image of the session on its way out (EOS, inactive,
     * removed but not yet released) also wins: once it is gone, the next DATA elicits a
     * fresh SETUP.
     */
    for (int32_t i = 0; i < c->images.length; i++)
    {
        const exon_dc_image_t *existing = c->images.items[i];
        if (existing->img.endpoint == ep && existing->img.session_id == setup->session_id &&
            existing->img.stream_id == setup->stream_id)
        {
            return false;
        }
    }
    bool subscribed = false;
    for (int32_t i = 0; i < c->subscriptions.length; i++)
    {
        exon_dc_subscription_t *sub = c->subscriptions.items[i];
        if (sub->udp && sub->endpoint == ep && sub->stream_id == setup->stream_id)
        {
            subscribed = true;
        }
    }
    if (!subscribed)
    {
        return false;
    }
    exon_dc_image_t *image = calloc(1, sizeof(*image));
    if (NULL == image)
    {
        return false;
    }
    image->correlation_id = (int64_t)(exon_dc_random(c) & 0x3FFFFFFFFFFFFFFFULL);
    exon_udp_addr_format(&setup->source, image->source, sizeof(image->source));
    char path[EXON_LOG_PATH_MAX];
    if (exon_log_path_format(path, sizeof(path), c->config.dir, "images", image->correlation_id) < 0)
    {
        exon_driver_conductor_error(c, "cannot create image log: %s", exon_last_error());
        free(image);
        return false;
    }
    exon_log_params_t params;
    memset(&params, 0, sizeof(params));
    params.term_length = setup->term_length;
    params.mtu = setup->mtu;
    params.page_size = c->config.file_page_size;
    params.initial_term_id = setup->initial_term_id;
    params.session_id = setup->session_id;
    params.stream_id = setup->stream_id;
    params.correlation_id = image->correlation_id;
    params.type = EXON_LOG_TYPE_IMAGE;
    params.is_connected = 1;
    /* a SETUP alone makes an image: its log is reserved up front only within this driver's
     * own term length, so a stranger cannot make the driver reserve more than
     * max_images_per_endpoint x 3 x term_buffer_length by announcing long terms (up to
     * max_image_term_length); a longer image is a sparse file, its pages taken as data
     * really arrives */
    params.sparse = c->config.term_buffer_sparse_file || setup->term_length > c->config.term_buffer_length;
    params.file_mode = c->config.dir_mode;
    if (exon_log_create(&image->log, path, &params) < 0)
    {
        exon_driver_conductor_error(c, "cannot create image log %s: %s", path, exon_last_error());
        free(image);
        return false;
    }
    char label[EXON_UDP_ADDR_TEXT_MAX * 2 + 16];
    snprintf(label, sizeof(label), "%s from %s", ep->bound_text, image->source);
    int32_t hwm_id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_RECEIVER_HWM, "rcv-hwm", image->correlation_id,
        setup->session_id, setup->stream_id, label);
    int32_t pos_id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_RECEIVER_POSITION, "rcv-pos", image->correlation_id,
        setup->session_id, setup->stream_id, label);
    if (hwm_id < 0 || pos_id < 0 || exon_dc_array_add(&c->images, image) < 0)
    {
        int64_t now_ms = exon_epoch_ms();
        if (hwm_id >= 0) exon_counters_free(&c->counters, hwm_id, now_ms);
        if (pos_id >= 0) exon_counters_free(&c->counters, pos_id, now_ms);
        exon_log_close(&image->log);
        exon_log_unlink(path);
        free(image);
        return false;
    }
    int32_t window = exon_receiver_window_length(setup->term_length,
        c->config.initial_window_length > 0 ? c->config.initial_window_length : EXON_INITIAL_WINDOW_DEFAULT,
        ep->channel.so_rcvbuf);
    exon_publication_image_init(&image->img, &image->log, &c->counters, ep, setup, hwm_id, pos_id, window,
        c->config.image_liveness_timeout_ns,
        c->config.status_message_timeout_ns > 0 ? c->config.status_message_timeout_ns : EXON_SM_TIMEOUT_DEFAULT_NS,
        now_ns);
    image->img.rtt_id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_RECEIVER_RTT, "rcv-rtt",
        image->correlation_id, setup->session_id, setup->stream_id, label);
    int64_t nak_delay_ns = exon_dc_image_nak_delay(c, ep, setup->stream_id);
    if (nak_delay_ns >= 0)
    {
        /* Aeron: the channel's delay, and the retry delay scaled by the driver's ratio (at
         * most 1 h); nak-delay=0 keeps the driver's retry delay (no NAK every duty cycle) */
        int64_t ratio = (c->config.nak_delay_ns > 0 && c->config.nak_retry_delay_ns > 0) ?
            c->config.nak_retry_delay_ns / c->config.nak_delay_ns : EXON_DC_NAK_RETRY_RATIO_DEFAULT;
        ratio = ratio > 0 ? ratio : 1;
        int64_t retry_ns = nak_delay_ns > EXON_DC_CHANNEL_DURATION_MAX_NS / ratio ?
            EXON_DC_CHANNEL_DURATION_MAX_NS : nak_delay_ns * ratio;
        if (0 == nak_delay_ns)
        {
            retry_ns = c->config.nak_retry_delay_ns > 0 ? c->config.nak_retry_delay_ns : EXON_DC_NAK_RETRY_FALLBACK_NS;
        }
        exon_loss_detector_init(&image->img.loss, nak_delay_ns, retry_ns);
    }
    else if (c->config.nak_delay_ns > 0 && c->config.nak_retry_delay_ns > 0)
    {
        exon_loss_detector_init(&image->img.loss, c->config.nak_delay_ns, c->config.nak_retry_delay_ns);
    }
    if (ep->multicast && nak_delay_ns < 0)
    {
        /* multicast: a random delay per gap lets one receiver's NAK serve the group */
        exon_feedback_delay_init(&image->img.nak_delay, EXON_NAK_MULTICAST_MAX_BACKOFF_NS,
            EXON_NAK_MULTICAST_GROUP_SIZE, exon_dc_random(c));
        image->img.loss.delay_ns = exon_feedback_delay_next(&image->img.nak_delay);
    }
    /* issue 13: no NAK before the source proves real, backoff on a repeated gap, a cap */
    exon_loss_detector_set_policy(&image->img.loss, c->config.nak_retry_max_delay_ns, c->config.nak_rate_window_ns,
        c->config.nak_rate_max_per_window, false);
    for (int32_t i = 0; i < c->subscriptions.length; i++)
    {
        exon_dc_subscription_t *sub = c->subscriptions.items[i];
        if (sub->udp && sub->endpoint == ep && sub->stream_id == setup->stream_id)
        {
            exon_dc_image_link(c, image, sub);
        }
    }
    /* the receiver takes the image in place of its queued SETUP, in one step */
    if (exon_dc_receiver_command(c, EXON_RCV_CMD_ADD_IMAGE, 0, &image->img) < 0)
    {
        exon_dc_remove_image(c, image, true);
        return false;
    }
    image->handed_over = true;
    return true;
}

/* Second phase: the receiver dropped the endpoint and closed its socket (or the agents are
 * stopped): its memory goes. */
static void exon_dc_free_endpoint(exon_driver_conductor_t *c, exon_receive_endpoint_t *ep)
{
    exon_dc_array_remove(&c->endpoints, ep);
    exon_receive_endpoint_close(ep); /* already closed unless the receiver never ran */
    free(ep);
}

/* First phase of closing an endpoint (its last subscription left): its images go, the
 * receiver drops it and closes its socket; exon_dc_free_endpoint follows its release. */
static void exon_dc_close_endpoint(exon_driver_conductor_t *c, exon_receive_endpoint_t *ep)
{
    for (int32_t i = c->images.length - 1; i >= 0; i--)
    {
        exon_dc_image_t *image = c->images.items[i];
        if (image->img.endpoint == ep && !image->removing)
        {
            exon_dc_remove_image(c, image, false);
            i = c->images.length;
        }
    }
    ep->closing = true;
    exon_dc_epoll_del(c->receiver->epoll_fd, ep->channel.fd);
    /* out of memory: it stays closing (and counted as an error); the socket stays open */
    (void)exon_dc_receiver_command(c, EXON_RCV_CMD_REMOVE_ENDPOINT, 0, ep);
}

/* 0, -1 (the endpoint cannot open: `why` says why) or -2 (a multicast rule broken: `why`). */
int exon_dc_setup_udp_subscription(
    exon_driver_conductor_t *c, exon_dc_subscription_t *sub, const exon_uri_t *uri, char *why, size_t why_length)
{
    exon_udp_addr_t addr;
    if (exon_udp_addr_resolve(&addr, uri->endpoint.host, uri->endpoint.port) < 0)
    {
        snprintf(why, why_length, "cannot resolve endpoint '%s': %s", uri->endpoint.host, exon_last_error());
        return -1;
    }
    exon_udp_addr_t mc_control, mc_iface;
    int multicast = exon_dc_multicast_check(uri, &addr, &mc_control, &mc_iface, why, why_length);
    if (multicast < 0)
    {
        return -2;
    }
    char key[EXON_UDP_ADDR_TEXT_MAX];
    exon_udp_addr_format(&addr, key, sizeof(key));
    exon_receive_endpoint_t *ep = NULL;
    bool any_closing = false;
    if (uri->endpoint.port != 0)
    {
        for (int32_t i = 0; i < c->endpoints.length; i++)
        {
            exon_receive_endpoint_t *candidate = c->endpoints.items[i];
            any_closing = any_closing || candidate->closing;
            if (!candidate->closing && 0 == strcmp(candidate->bind_text, key))
            {
                ep = candidate;
                break;
            }
        }
    }
    if (NULL == ep && any_closing)
    {
        /* a closing endpoint may still hold this port: its socket closes now */
        exon_receiver_catch_up(c->receiver);
    }
    if (NULL == ep)
    {
        ep = calloc(1, sizeof(*ep));
        if (NULL == ep)
        {
            snprintf(why, why_length, "out of memory");
            return -1;
        }
        int opened = multicast ?
            exon_receive_endpoint_open_multicast(ep, &addr, &mc_iface, &c->counters, c->config.socket_rcvbuf_length,
                c->config.receive_loss_rate, c->config.receive_loss_seed, c->receiver_id) :
            exon_receive_endpoint_open(ep, &addr, &c->counters, c->config.socket_rcvbuf_length,
                c->config.receive_loss_rate, c->config.receive_loss_seed, c->receiver_id);
        if (opened < 0)
        {
            snprintf(why, why_length, "cannot bind endpoint %s: %s", key, exon_last_error());
            free(ep);
            return -1;
        }
        if (c->config.udp_gro)
        {
            exon_udp_channel_enable_gro(&ep->channel); /* left off where the kernel has none */
        }
        snprintf(ep->bind_text, sizeof(ep->bind_text), "%s", uri->endpoint.port != 0 ? key : ep->bound_text);
        if (c->config.max_image_term_length > 0)
        {
            ep->max_term_length = c->config.max_image_term_length;
        }
        if (c->config.max_images_per_endpoint > 0)
        {
            ep->max_images = c->config.max_images_per_endpoint < EXON_ENDPOINT_MAX_IMAGES ?
                c->config.max_images_per_endpoint : EXON_ENDPOINT_MAX_IMAGES;
        }
        if (c->config.max_unverified_images_per_source > 0)
        {
            ep->max_unverified_per_source = c->config.max_unverified_images_per_source;
        }
        if (c->config.image_idle_eviction_timeout_ns > 0)
        {
            ep->idle_eviction_ns = c->config.image_idle_eviction_timeout_ns;
        }
        if (exon_dc_array_add(&c->endpoints, ep) < 0)
        {
            exon_receive_endpoint_close(ep);
            free(ep);
            snprintf(why, why_length, "out of memory");
            return -1;
        }
        if (exon_dc_receiver_command(c, EXON_RCV_CMD_ADD_ENDPOINT, 0, ep) < 0)
        {
            exon_dc_array_remove(&c->endpoints, ep);
            exon_receive_endpoint_close(ep);
            free(ep);
            snprintf(why, why_length, "out of memory");
            return -1;
        }
        exon_dc_epoll_add(c->receiver->epoll_fd, ep->channel.fd);
    }
    if (exon_dc_receiver_command(c, EXON_RCV_CMD_ADD_STREAM, sub->stream_id, ep) < 0)
    {
        /* out of memory: the endpoint is the receiver's already; it goes as it would when
         * its last subscription leaves */
        if (ep->refcount <= 0)
        {
            exon_dc_close_endpoint(c, ep);
        }
        snprintf(why, why_length, "out of memory");
        return -1;
    }
    ep->refcount++;
    sub->udp = true;
    sub->endpoint = ep;
    return 0;
}

void exon_dc_remove_udp_subscription(exon_driver_conductor_t *c, exon_dc_subscription_t *sub)
{
    exon_receive_endpoint_t *ep = sub->endpoint;
    for (int32_t i = 0; i < c->images.length; i++)
    {
        exon_dc_image_t *image = c->images.items[i];
        if (image->removing)
        {
            continue; /* its sub-pos counters go when the receiver releases it */
        }
        for (int32_t j = 0; j < image->sub_count; j++)
        {
            if (image->subs[j] == sub)
            {
                /* the counter is freed when the receiver reports it no longer reads it: a
                 * counter reused at once must not steer the receiver's cleaning */
                (void)exon_dc_receiver_command(c, EXON_RCV_CMD_REMOVE_SUBSCRIBER, image->sub_pos_ids[j],
                    &image->img);
                image->sub_count--;
                image->subs[j] = image->subs[image->sub_count];
                image->sub_pos_ids[j] = image->sub_pos_ids[image->sub_count];
                break;
            }
        }
        if (sub->doorbell_id >= 0)
        {
            bool still = false;
            for (int32_t j = 0; j < image->sub_count; j++)
            {
                still = still || image->subs[j]->doorbell_id == sub->doorbell_id;
            }
            if (!still)
            {
                exon_log_remove_doorbell(image->log.meta, sub->doorbell_id);
            }
        }
    }
    (void)exon_dc_receiver_command(c, EXON_RCV_CMD_REMOVE_STREAM, sub->stream_id, ep);
    /* images of a stream nobody subscribes to any more go away */
    for (int32_t i = c->images.length - 1; i >= 0; i--)
    {
        exon_dc_image_t *image = c->images.items[i];
        if (image->img.endpoint == ep && image->sub_count == 0 && !image->removing)
        {
            exon_dc_remove_image(c, image, false);
            i = c->images.length; /* an image never handed over is freed at once */
        }
    }
    sub->endpoint = NULL;
    if (--ep->refcount <= 0)
    {
        exon_dc_close_endpoint(c, ep);
    }
}

/* Remove the images that are done (inactive, evicted, or drained past their EOS). */
static int exon_dc_reap_images(exon_driver_conductor_t *c, int64_t now_ns)
{
    int work = 0;
    for (int32_t i = c->images.length - 1; i >= 0; i--)
    {
        exon_dc_image_t *image = c->images.items[i];
        if (image->removing)
        {
            continue;
        }
        int32_t state = EXON_LOAD_ACQ(&image->img.state);
        bool remove = state == EXON_IMAGE_INACTIVE;
        if (!image->heard_tried && EXON_LOAD_RLX(&image->img.loss.verified))
        {
            /* rcv-heard only for an image whose source proved real (a flood of SETUPs for
             * made-up sessions takes no more counters than before) */
            image->heard_tried = true;
            char label[EXON_UDP_ADDR_TEXT_MAX * 2 + 16];
            snprintf(label, sizeof(label), "%s from %s", image->img.endpoint->bound_text, image->source);
            int32_t id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_RECEIVER_HEARD, "rcv-heard",
                image->correlation_id, image->img.session_id, image->img.stream_id, label);
            if (id >= 0)
            {
                exon_counter_set(&c->counters, id, exon_epoch_ms());
                EXON_STORE_REL(&image->img.heard_id, id);
                work++;
            }
        }
        if (state == EXON_IMAGE_EOS)
        {
            int64_t eos = image->img.eos_position;
            bool all = true;
            for (int32_t j = 0; j < image->sub_count; j++)
            {
                all = all && exon_counter_get(&c->counters, image->sub_pos_ids[j]) >= eos;
            }
            remove = all || now_ns - image->img.last_packet_ns > image->img.liveness_timeout_ns;
            if (!image->img.eos_seen)
            {
                remove = true;
            }
        }
        if (remove)
        {
            exon_dc_remove_image(c, image, true);
            i = c->images.length;
            work++;
        }
    }
    return work;
}

typedef struct exon_dc_event_context_stct
{
    exon_driver_conductor_t *conductor;
    int64_t now_ns;
    bool closing;                     /* the agents are stopped: SETUPs are only freed */
}
exon_dc_event_context_t;

static void exon_dc_on_receiver_event(void *state, const exon_agent_command_t *event)
{
    exon_dc_event_context_t *context = (exon_dc_event_context_t *)state;
    exon_driver_conductor_t *c = context->conductor;
    switch (event->type)
    {
        case EXON_RCV_EVT_SETUP:
        {
            exon_receiver_setup_t *s = (exon_receiver_setup_t *)event->target;
            /* a closing endpoint's queued SETUPs go with it (its release follows this event) */
            if (context->closing || s->endpoint->closing ||
                exon_dc_create_image(c, s->endpoint, &s->setup, context->now_ns))
            {
                free(s);
            }
            else if (exon_dc_receiver_command(c, EXON_RCV_CMD_SETUP_REFUSED, 0, s) < 0)
            {
                free(s); /* out of memory: the SETUP stays queued on the endpoint */
            }
            break;
        }
        case EXON_RCV_EVT_IMAGE_RELEASED:
        {
            exon_dc_image_t *image = (exon_dc_image_t *)(void *)((uint8_t *)event->target -
                offsetof(exon_dc_image_t, img));
            exon_dc_free_image(c, image);
            break;
        }
        case EXON_RCV_EVT_ENDPOINT_RELEASED:
            exon_dc_free_endpoint(c, (exon_receive_endpoint_t *)event->target);
            break;
        case EXON_RCV_EVT_COUNTER_RELEASED:
            exon_counters_free(&c->counters, event->value, exon_epoch_ms());
            break;
        default:
            exon_driver_conductor_error(c, "receiver event %d unknown", event->type);
            break;
    }
}

int exon_dc_update_images(exon_driver_conductor_t *c, int64_t now_ns)
{
    /* first the images that are done: an image the receiver evicted for a SETUP it reported
     * leaves its slot (REMOVE_IMAGE) before that SETUP becomes an image (ADD_IMAGE) */
    int work = exon_dc_reap_images(c, now_ns);
    exon_dc_event_context_t context = { .conductor = c, .now_ns = now_ns, .closing = false };
    work += exon_command_queue_drain(&c->receiver->events, exon_dc_on_receiver_event, &context, 256);
    if (c->receiver->commands.backlog_length > 0)
    {
        exon_command_queue_flush(&c->receiver->commands);
    }
    return work;
}

void exon_dc_close_receive_endpoints(exon_driver_conductor_t *c)
{
    /* the agents are stopped: the receiver's commands are applied here, its events drained,
     * and whatever is left (an offer that found no memory) is freed */
    for (int32_t i = c->endpoints.length - 1; i >= 0; i--)
    {
        exon_receive_endpoint_t *ep = c->endpoints.items[i];
        if (!ep->closing)
        {
            exon_dc_close_endpoint(c, ep);
        }
    }
    exon_receiver_catch_up(c->receiver);
    exon_dc_event_context_t context = { .conductor = c, .now_ns = exon_nano_clock(), .closing = true };
    do
    {
        while (exon_command_queue_drain(&c->receiver->events, exon_dc_on_receiver_event, &context, 256) > 0)
        {
        }
    }
    while (exon_command_queue_flush(&c->receiver->events) > 0 ||
        EXON_LOAD_ACQ(&c->receiver->events.tail) != c->receiver->events.head);
    while (c->images.length > 0)
    {
        exon_dc_free_image(c, c->images.items[0]);
    }
    while (c->endpoints.length > 0)
    {
        exon_dc_free_endpoint(c, c->endpoints.items[0]);
    }
    free(c->endpoints.items);
    free(c->images.items);
    memset(&c->endpoints, 0, sizeof(c->endpoints));
    memset(&c->images, 0, sizeof(c->images));
}
