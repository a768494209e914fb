/*
 * exon_receiver.c: the receiver agent's duty cycle. `state` is the exon_driver_t.
 *
 * Under the receiver lock: for every receive endpoint, recvmmsg a batch (with UDP GRO a
 * read may hold several datagrams, split by exon_udp_msg_split) and dispatch it
 * (DATA into images, SETUP queued for the conductor, elicit SETUP for unknown sessions),
 * then per image: gap scan + NAK, SM, cleaning, EOS, liveness. The runner parks when
 * nothing was done; its epoll set holds every endpoint's socket. When a batch queued a new
 * SETUP and the conductor runs on another thread, the conductor's agent doorbell is rung
 * (only if it is parked), so the image is created now rather than at the end of its park.
 */
#include <pthread.h>

#include "exon_common.h"
#include "exon_agent.h"
#include "exon_driver.h"
#include "exon_publication_image.h"

int exon_receiver_duty_cycle(exon_driver_t *d, int64_t now_ns);

int exon_receiver_do_work(void *state, int64_t now_ns)
{
    exon_driver_t *d = (exon_driver_t *)state;
    if (EXON_LOAD_RLX(&d->invokers_in) > 0)
    {
        return 0; /* INVOKER: a client thread waits on the receive sockets; it receives */
    }
    return exon_receiver_duty_cycle(d, now_ns);
}

/* One duty cycle, from the agent or an INVOKER thread (the receiver lock serializes them). */
int exon_receiver_duty_cycle(exon_driver_t *d, int64_t now_ns)
{
    exon_driver_conductor_t *c = &d->conductor;
    int work = 0;
    bool setup_queued = false;
    if (0 == EXON_LOAD_RLX(&c->endpoints.length))
    {
        return 0;
    }
    pthread_mutex_lock(&c->receiver_lock);
    for (int32_t i = 0; i < c->endpoints.length; i++)
    {
        exon_receive_endpoint_t *ep = c->endpoints.items[i];
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
        setup_queued |= ep->pending_count > pending_before;
        for (int32_t j = 0; j < ep->image_count; j++)
        {
            work += exon_publication_image_do_work(ep->images[j], now_ns);
        }
    }
    pthread_mutex_unlock(&c->receiver_lock);
    exon_cnc_header_t *header = d->cnc.header;
    int32_t conductor_index = header->agent_thread_index[EXON_AGENT_CONDUCTOR];
    if (setup_queued && conductor_index != header->agent_thread_index[EXON_AGENT_RECEIVER])
    {
        exon_agent_doorbell_ring(d->instance_id, conductor_index, &header->agent_state[conductor_index].sleeping);
    }
    return work;
}
