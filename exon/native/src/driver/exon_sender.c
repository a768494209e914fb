/*
 * exon_sender.c: the sender agent's duty cycle, on its own state (exon_sender.h).
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
#include <string.h>

#include "common/exon_common.h"
#include "driver/exon_driver_conductor.h"
#include "driver/exon_network_publication.h"
#include "driver/exon_sender.h"

int exon_sender_init(exon_sender_t *s, struct exon_driver_conductor_stct *conductor,
    const exon_driver_context_t *config, const int32_t *invokers_in, const int32_t *invokers_parked)
{
    memset(s, 0, sizeof(*s));
    s->commands.wake_fd = -1;
    s->epoll_fd = -1;
    s->conductor = conductor;
    s->invokers_in = invokers_in;
    s->invokers_parked = invokers_parked;
    pthread_mutex_init(&s->lock, NULL);
    int rc = exon_command_queue_init(&s->commands);
    if (rc < 0)
    {
        return rc;
    }
    if ((rc = exon_loss_generator_init(&s->send_loss, config->send_loss_rate, config->send_loss_seed, true)) < 0)
    {
        return rc;
    }
    s->send_loss_enabled = config->send_loss_rate > 0.0;
    return 0;
}

void exon_sender_close(exon_sender_t *s)
{
    exon_command_queue_fini(&s->commands);
    free(s->publications);
    s->publications = NULL;
    s->publication_count = 0;
    s->publication_capacity = 0;
    pthread_mutex_destroy(&s->lock);
}

static void exon_sender_on_command(void *state, const exon_agent_command_t *cmd)
{
    exon_sender_t *s = (exon_sender_t *)state;
    exon_network_publication_t *np = (exon_network_publication_t *)cmd->target;
    if (EXON_AGENT_CMD_ADD_PUBLICATION == cmd->type)
    {
        if (s->publication_count == s->publication_capacity)
        {
            int32_t capacity = s->publication_capacity > 0 ? s->publication_capacity * 2 : 16;
            exon_network_publication_t **grown = realloc(s->publications, sizeof(np) * (size_t)capacity);
            if (NULL == grown)
            {
                exon_driver_conductor_error(s->conductor, "sender: out of memory adding a publication");
                return;
            }
            s->publications = grown;
            s->publication_capacity = capacity;
        }
        s->publications[s->publication_count++] = np;
    }
    else if (EXON_AGENT_CMD_REMOVE_PUBLICATION == cmd->type)
    {
        for (int32_t i = 0; i < s->publication_count; i++)
        {
            if (s->publications[i] == np)
            {
                s->publications[i] = s->publications[--s->publication_count];
                break;
            }
        }
        EXON_STORE_REL(&np->sender_released, 1);
    }
}

/* The agent's duty cycle: under the sender lock, as an INVOKER thread may run it too
 * (uncontended otherwise). */
int exon_sender_do_work(void *state, int64_t now_ns)
{
    exon_sender_t *s = (exon_sender_t *)state;
    if (EXON_LOAD_RLX(s->invokers_in) > EXON_LOAD_RLX(s->invokers_parked))
    {
        /* INVOKER: a client thread is spinning in exon_invoker_wait and sends within
         * microseconds; running here too only contends for the lock. (A parked one does
         * not: offers from other threads and SMs wake this agent, which sends.) */
        return 0;
    }
    pthread_mutex_lock(&s->lock);
    int work = exon_sender_duty_cycle(s, now_ns);
    pthread_mutex_unlock(&s->lock);
    return work;
}

int exon_sender_duty_cycle(exon_sender_t *s, int64_t now_ns)
{
    int work = exon_command_queue_drain(&s->commands, exon_sender_on_command, s, 64);
    for (int32_t i = 0; i < s->publication_count; i++)
    {
        exon_network_publication_t *np = s->publications[i];
        work += exon_network_publication_poll_control(np, now_ns);
        work += exon_network_publication_send(np, now_ns);
    }
    return work;
}
