/*
 * exon_sender.c: the sender agent's duty cycle. `state` is the exon_driver_t.
 *
 * Under the sender lock: for every network publication, read its control socket
 * (SM/NAK/RTTM) and send what is due (SETUP, DATA within the window, retransmits,
 * heartbeats). Publications in CLOSED state are skipped (the conductor frees them).
 * The runner parks when nothing was done; its epoll set holds every publication's socket,
 * and a commit to a network publication's log rings the sender's agent doorbell.
 */
#include <pthread.h>

#include "exon_common.h"
#include "exon_driver.h"
#include "exon_network_publication.h"


int exon_sender_do_work(void *state, int64_t now_ns)
{
    exon_driver_t *d = (exon_driver_t *)state;
    exon_driver_conductor_t *c = &d->conductor;
    int work = 0;
    if (0 == EXON_LOAD_RLX(&c->net_publications.length))
    {
        return 0;
    }
    pthread_mutex_lock(&c->sender_lock);
    for (int32_t i = 0; i < c->net_publications.length; i++)
    {
        exon_network_publication_t *np = exon_driver_conductor_net_publication(c, i);
        work += exon_network_publication_poll_control(np, now_ns);
        work += exon_network_publication_send(np, now_ns);
    }
    pthread_mutex_unlock(&c->sender_lock);
    return work;
}
