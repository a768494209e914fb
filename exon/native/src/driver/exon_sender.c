/*
 * exon_sender.c: the sender agent's duty cycle. `state` is the exon_driver_t.
 *
 * First the conductor's commands (exon_command_queue: ADD_PUBLICATION, REMOVE_PUBLICATION)
 * are drained into the sender's own list, then for every network publication it reads the
 * control socket (SM/NAK/RTTM) and sends what is due (SETUP, DATA within the window,
 * retransmits, heartbeats, RTTM replies). The list belongs to the sender thread alone: no
 * lock. A removed publication is marked sender_released and the conductor frees it later.
 * The runner parks when nothing was done; its epoll set holds every publication's socket
 * and the command queue's eventfd, and a commit to a network publication's log rings the
 * sender's agent doorbell.
 */
#include <pthread.h>
#include <stdlib.h>

#include "common/exon_common.h"
#include "driver/exon_driver.h"
#include "driver/exon_network_publication.h"

static void exon_sender_on_command(void *state, const exon_agent_command_t *cmd)
{
    exon_driver_conductor_t *c = (exon_driver_conductor_t *)state;
    exon_network_publication_t *np = (exon_network_publication_t *)cmd->target;
    if (EXON_AGENT_CMD_ADD_PUBLICATION == cmd->type)
    {
        if (c->sender_pub_count == c->sender_pub_capacity)
        {
            int32_t capacity = c->sender_pub_capacity > 0 ? c->sender_pub_capacity * 2 : 16;
            exon_network_publication_t **grown = realloc(c->sender_pubs, sizeof(np) * (size_t)capacity);
            if (NULL == grown)
            {
                exon_driver_conductor_error(c, "sender: out of memory adding a publication");
                return;
            }
            c->sender_pubs = grown;
            c->sender_pub_capacity = capacity;
        }
        c->sender_pubs[c->sender_pub_count++] = np;
    }
    else if (EXON_AGENT_CMD_REMOVE_PUBLICATION == cmd->type)
    {
        for (int32_t i = 0; i < c->sender_pub_count; i++)
        {
            if (c->sender_pubs[i] == np)
            {
                c->sender_pubs[i] = c->sender_pubs[--c->sender_pub_count];
                break;
            }
        }
        EXON_STORE_REL(&np->sender_released, 1);
    }
}

int exon_sender_duty_cycle(exon_driver_t *d, int64_t now_ns);

/* The agent's duty cycle: under the sender lock, as an INVOKER thread may run it too
 * (uncontended otherwise). */
int exon_sender_do_work(void *state, int64_t now_ns)
{
    exon_driver_t *d = (exon_driver_t *)state;
    if (EXON_LOAD_RLX(&d->invokers_in) > EXON_LOAD_RLX(&d->invokers_parked))
    {
        /* INVOKER: a client thread is spinning in exon_invoker_wait and sends within
         * microseconds; running here too only contends for the lock. (A parked one does
         * not: offers from other threads and SMs wake this agent, which sends.) */
        return 0;
    }
    pthread_mutex_lock(&d->sender_lock);
    int work = exon_sender_duty_cycle(d, now_ns);
    pthread_mutex_unlock(&d->sender_lock);
    return work;
}

/* One duty cycle; the caller holds d->sender_lock. */
int exon_sender_duty_cycle(exon_driver_t *d, int64_t now_ns)
{
    exon_driver_conductor_t *c = &d->conductor;
    int work = exon_command_queue_drain(&c->sender_commands, exon_sender_on_command, c, 64);
    for (int32_t i = 0; i < c->sender_pub_count; i++)
    {
        exon_network_publication_t *np = c->sender_pubs[i];
        work += exon_network_publication_poll_control(np, now_ns);
        work += exon_network_publication_send(np, now_ns);
    }
    return work;
}
