/*
 * exon_receiver.c: the receiver agent's duty cycle, on its own state (exon_receiver.h).
 *
 * Under the receiver lock (it says who runs the duty cycle: the agent, or an INVOKER client
 * thread; the conductor itself in exon_receiver_catch_up):
 *   1. the conductor's commands (r->commands, EXON_RCV_CMD_*) are applied to what
 *      only this side touches: the receiver's endpoint list, each endpoint's stream list,
 *      image list and queued SETUPs, each image's sub-pos ids. What the conductor waits for
 *      goes back on r->events (EXON_RCV_EVT_*): an endpoint dropped and its socket
 *      closed, an image dropped, a sub-pos counter dropped; the conductor frees them then,
 *      never before (two-phase removal);
 *   2. for every receive endpoint, recvmmsg a batch (with UDP GRO a read may hold several
 *      datagrams, split by exon_udp_msg_split) and dispatch it (DATA into images, SETUP
 *      queued on the endpoint, elicit SETUP for unknown sessions); each SETUP queued in this
 *      batch is reported to the conductor (EXON_RCV_EVT_SETUP), which answers ADD_IMAGE or
 *      SETUP_REFUSED; either takes it off the endpoint's queue;
 *   3. per image: gap scan + NAK, SM, cleaning, EOS, liveness.
 * The runner parks when nothing was done; its epoll set holds every endpoint's socket and
 * the command queue's eventfd (INVOKER: the invoker's set), and the event queue's eventfd
 * sits in the conductor runner's set, so a reported SETUP ends the conductor's park.
 * With neither an endpoint nor a command the cycle is three loads, without the lock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/exon_common.h"
#include "concurrent/exon_agent.h"
#include "driver/exon_driver_conductor.h"
#include "driver/exon_publication_image.h"
#include "driver/exon_receiver.h"

int exon_receiver_init(exon_receiver_t *r, struct exon_driver_conductor_stct *conductor,
    const int32_t *invokers_in)
{
    memset(r, 0, sizeof(*r));
    r->commands.wake_fd = -1;
    r->events.wake_fd = -1;
    r->epoll_fd = -1;
    r->conductor = conductor;
    r->invokers_in = invokers_in;
    pthread_mutex_init(&r->lock, NULL);
    int rc;
    if ((rc = exon_command_queue_init(&r->commands)) < 0 || (rc = exon_command_queue_init(&r->events)) < 0)
    {
        return rc;
    }
    return 0;
}

void exon_receiver_close(exon_receiver_t *r)
{
    exon_command_queue_fini(&r->commands);
    exon_command_queue_fini(&r->events);
    free(r->endpoints);
    r->endpoints = NULL;
    r->endpoint_count = 0;
    r->endpoint_capacity = 0;
    pthread_mutex_destroy(&r->lock);
}

static void exon_receiver_report(exon_receiver_t *r, int32_t type, int32_t value, void *target)
{
    if (exon_command_queue_offer(&r->events, type, value, target) < 0)
    {
        exon_driver_conductor_error(r->conductor, "receiver: out of memory reporting event %d", type);
    }
}

static void exon_receiver_add_endpoint(exon_receiver_t *r, exon_receive_endpoint_t *ep)
{
    if (r->endpoint_count == r->endpoint_capacity)
    {
        int32_t capacity = r->endpoint_capacity > 0 ? r->endpoint_capacity * 2 : 16;
        exon_receive_endpoint_t **grown = realloc(r->endpoints, sizeof(ep) * (size_t)capacity);
        if (NULL == grown)
        {
            exon_driver_conductor_error(r->conductor, "receiver: out of memory adding endpoint %s", ep->bound_text);
            return;
        }
        r->endpoints = grown;
        r->endpoint_capacity = capacity;
    }
    r->endpoints[r->endpoint_count] = ep;
    EXON_STORE_REL(&r->endpoint_count, r->endpoint_count + 1);
}

static void exon_receiver_remove_endpoint(exon_receiver_t *r, exon_receive_endpoint_t *ep)
{
    for (int32_t i = 0; i < r->endpoint_count; i++)
    {
        if (r->endpoints[i] == ep)
        {
            r->endpoints[i] = r->endpoints[r->endpoint_count - 1];
            EXON_STORE_REL(&r->endpoint_count, r->endpoint_count - 1);
            break;
        }
    }
    /* closed here, before the conductor hears of it: a subscription that reopens the port
     * after the release finds it free (the conductor frees the memory) */
    exon_receive_endpoint_close(ep);
    exon_receiver_report(r, EXON_RCV_EVT_ENDPOINT_RELEASED, 0, ep);
}

static void exon_receiver_stream(exon_receive_endpoint_t *ep, int32_t stream_id, int32_t delta)
{
    int32_t slot = -1;
    for (int32_t i = 0; i < ep->stream_count; i++)
    {
        if (ep->stream_ids[i] == stream_id)
        {
            slot = i;
        }
    }
    if (delta > 0 && slot < 0 && ep->stream_count < EXON_ENDPOINT_MAX_STREAMS)
    {
        slot = ep->stream_count++;
        ep->stream_ids[slot] = stream_id;
        ep->stream_refs[slot] = 0;
    }
    if (slot < 0)
    {
        return;
    }
    ep->stream_refs[slot] += delta;
    if (ep->stream_refs[slot] <= 0)
    {
        ep->stream_count--;
        ep->stream_ids[slot] = ep->stream_ids[ep->stream_count];
        ep->stream_refs[slot] = ep->stream_refs[ep->stream_count];
    }
}

static void exon_receiver_add_image(exon_publication_image_t *img)
{
    exon_receive_endpoint_t *ep = img->endpoint;
    /* the image replaces its queued SETUP in one step: the per-source and table limits
     * always count it once */
    exon_receive_endpoint_unqueue(ep, img->session_id, img->stream_id);
    if (ep->image_count < EXON_ENDPOINT_MAX_IMAGES)
    {
        ep->images[ep->image_count++] = img;
    }
    else
    {
        EXON_STORE_REL(&img->state, EXON_IMAGE_INACTIVE); /* the conductor removes it */
    }
}

static void exon_receiver_remove_image(exon_receiver_t *r, exon_publication_image_t *img)
{
    exon_receive_endpoint_t *ep = img->endpoint;
    for (int32_t i = 0; i < ep->image_count; i++)
    {
        if (ep->images[i] == img)
        {
            ep->images[i] = ep->images[ep->image_count - 1];
            ep->image_count--;
            break;
        }
    }
    exon_receiver_report(r, EXON_RCV_EVT_IMAGE_RELEASED, 0, img);
}

static void exon_receiver_subscriber(exon_receiver_t *r, exon_publication_image_t *img, int32_t counter_id,
    bool add)
{
    if (add)
    {
        if (img->sub_pos_count < EXON_IMAGE_MAX_SUBSCRIBERS)
        {
            img->sub_pos_ids[img->sub_pos_count++] = counter_id;
        }
        return;
    }
    for (int32_t i = 0; i < img->sub_pos_count; i++)
    {
        if (img->sub_pos_ids[i] == counter_id)
        {
            img->sub_pos_count--;
            img->sub_pos_ids[i] = img->sub_pos_ids[img->sub_pos_count];
            break;
        }
    }
    exon_receiver_report(r, EXON_RCV_EVT_COUNTER_RELEASED, counter_id, NULL);
}

static void exon_receiver_on_command(void *state, const exon_agent_command_t *cmd)
{
    exon_receiver_t *r = (exon_receiver_t *)state;
    switch (cmd->type)
    {
        case EXON_RCV_CMD_ADD_ENDPOINT:
            exon_receiver_add_endpoint(r, (exon_receive_endpoint_t *)cmd->target);
            break;
        case EXON_RCV_CMD_REMOVE_ENDPOINT:
            exon_receiver_remove_endpoint(r, (exon_receive_endpoint_t *)cmd->target);
            break;
        case EXON_RCV_CMD_ADD_STREAM:
            exon_receiver_stream((exon_receive_endpoint_t *)cmd->target, cmd->value, 1);
            break;
        case EXON_RCV_CMD_REMOVE_STREAM:
            exon_receiver_stream((exon_receive_endpoint_t *)cmd->target, cmd->value, -1);
            break;
        case EXON_RCV_CMD_ADD_IMAGE:
            exon_receiver_add_image((exon_publication_image_t *)cmd->target);
            break;
        case EXON_RCV_CMD_REMOVE_IMAGE:
            exon_receiver_remove_image(r, (exon_publication_image_t *)cmd->target);
            break;
        case EXON_RCV_CMD_ADD_SUBSCRIBER:
            exon_receiver_subscriber(r, (exon_publication_image_t *)cmd->target, cmd->value, true);
            break;
        case EXON_RCV_CMD_REMOVE_SUBSCRIBER:
            exon_receiver_subscriber(r, (exon_publication_image_t *)cmd->target, cmd->value, false);
            break;
        case EXON_RCV_CMD_SETUP_REFUSED:
        {
            exon_receiver_setup_t *s = (exon_receiver_setup_t *)cmd->target;
            exon_receive_endpoint_unqueue(s->endpoint, s->setup.session_id, s->setup.stream_id);
            free(s);
            break;
        }
        default:
            exon_driver_conductor_error(r->conductor, "receiver: unknown command %d", cmd->type);
            break;
    }
}

/* Report the SETUPs `ep` queued from index `from` on (a batch only appends to the queue). */
static void exon_receiver_report_setups(exon_receiver_t *r, exon_receive_endpoint_t *ep, int32_t from)
{
    int32_t i = from;
    while (i < ep->pending_count)
    {
        exon_receiver_setup_t *s = malloc(sizeof(*s));
        if (NULL == s)
        {
            /* dropped as if never queued: the publisher repeats its SETUP */
            exon_receive_endpoint_unqueue(ep, ep->pending[i].session_id, ep->pending[i].stream_id);
            exon_counter_add(ep->counters, EXON_SYSTEM_COUNTER_SETUPS_DROPPED, 1);
            continue;
        }
        s->endpoint = ep;
        s->setup = ep->pending[i];
        exon_receiver_report(r, EXON_RCV_EVT_SETUP, 0, s);
        i++;
    }
}

/* Apply up to `limit` of the conductor's commands; the caller holds r->lock. */
static int exon_receiver_apply_commands(exon_receiver_t *r, int limit)
{
    return exon_command_queue_drain(&r->commands, exon_receiver_on_command, r, limit);
}

void exon_receiver_catch_up(exon_receiver_t *r)
{
    pthread_mutex_lock(&r->lock);
    do
    {
        while (exon_receiver_apply_commands(r, EXON_COMMAND_QUEUE_CAPACITY) > 0)
        {
        }
    }
    while (exon_command_queue_flush(&r->commands) > 0);
    while (exon_receiver_apply_commands(r, EXON_COMMAND_QUEUE_CAPACITY) > 0)
    {
    }
    pthread_mutex_unlock(&r->lock);
}

int exon_receiver_do_work(void *state, int64_t now_ns)
{
    exon_receiver_t *r = (exon_receiver_t *)state;
    if (EXON_LOAD_RLX(r->invokers_in) > 0)
    {
        return 0; /* INVOKER: a client thread waits on the receive sockets; it receives */
    }
    return exon_receiver_duty_cycle(r, now_ns);
}

static int exon_receiver_duty_cycle_locked(exon_receiver_t *r, int64_t now_ns);

/* One duty cycle, from the agent or an INVOKER thread (the receiver lock serializes them). */
int exon_receiver_duty_cycle(exon_receiver_t *r, int64_t now_ns)
{
    if (0 == EXON_LOAD_RLX(&r->endpoint_count) && exon_command_queue_idle(&r->commands))
    {
        return 0;
    }
    pthread_mutex_lock(&r->lock);
    return exon_receiver_duty_cycle_locked(r, now_ns);
}

int exon_receiver_try_duty_cycle(exon_receiver_t *r, int64_t now_ns)
{
    if (0 == EXON_LOAD_RLX(&r->endpoint_count) && exon_command_queue_idle(&r->commands))
    {
        return 0;
    }
    if (pthread_mutex_trylock(&r->lock) != 0)
    {
        return 0;
    }
    return exon_receiver_duty_cycle_locked(r, now_ns);
}

/* The duty cycle's body; entered with r->lock held, returns with it released. */
static int exon_receiver_duty_cycle_locked(exon_receiver_t *r, int64_t now_ns)
{
    int work = exon_receiver_apply_commands(r, 64);
    for (int32_t i = 0; i < r->endpoint_count; i++)
    {
        exon_receive_endpoint_t *ep = r->endpoints[i];
        int32_t pending_before = ep->pending_count;
        for (int round = 0; round < 4; round++)
        {
            int n = exon_receive_endpoint_poll(ep, now_ns);
            work += n;
            if (n < EXON_ENDPOINT_BATCH)
            {
                break;
            }
        }
        if (ep->pending_count > pending_before)
        {
            exon_receiver_report_setups(r, ep, pending_before);
        }
        for (int32_t j = 0; j < ep->image_count; j++)
        {
            work += exon_publication_image_do_work(ep->images[j], now_ns);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return work;
}
