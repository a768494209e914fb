/*
 * exon_sender.h: the sender agent and its own state (Aeron's aeron_driver_sender_t).
 *
 * The driver owns one exon_sender_t (exon_driver_t.sender); the conductor reaches it
 * through its `sender` reference, and only to offer commands on `commands` (ADD/REMOVE
 * _PUBLICATION) and to add or drop a publication's socket in `epoll_fd`. Everything else
 * here belongs to the thread that runs the duty cycle, which holds `lock`: the sender's
 * agent, or an INVOKER client thread (exon_invoker.c).
 *
 * Thread-safety: init/close on the driver's owner thread while no runner runs.
 */
#ifndef EXON_SENDER_H
#define EXON_SENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>

#include "common/exon_common.h"
#include "concurrent/exon_command_queue.h"
#include "media/exon_loss_generator.h"
#include "driver/exon_driver_context.h"

struct exon_driver_conductor_stct;
struct exon_network_publication_stct;

typedef struct exon_sender_stct
{
    exon_command_queue_t commands;    /* conductor -> sender: ADD/REMOVE_PUBLICATION */
    struct exon_network_publication_stct **publications; /* the duty cycle's thread only */
    int32_t publication_count;
    int32_t publication_capacity;
    pthread_mutex_t lock;             /* who runs the duty cycle: the agent, or an invoker */
    int epoll_fd;                     /* the runner's epoll set (not owned; -1 when closed) */
    exon_loss_generator_t send_loss;  /* debug loss on send, for every publication */
    bool send_loss_enabled;
    const int32_t *invokers_in;       /* the driver's INVOKER counts (exon_driver_t) */
    const int32_t *invokers_parked;
    struct exon_driver_conductor_stct *conductor; /* its error log only */
}
exon_sender_t;

/* Commands queue, lock and loss generator; `conductor` records the sender's errors and
 * `invokers_in`/`invokers_parked` are the driver's INVOKER counts. */
int exon_sender_init(exon_sender_t *sender, struct exon_driver_conductor_stct *conductor,
    const exon_driver_context_t *config, const int32_t *invokers_in, const int32_t *invokers_parked);

/* Free the queue and the list (the publications are the conductor's). The agents are stopped. */
void exon_sender_close(exon_sender_t *sender);

/* The agent's do_work (`state` is the exon_sender_t): the duty cycle under `lock`. */
int exon_sender_do_work(void *state, int64_t now_ns);

/* One duty cycle; the caller holds sender->lock. */
int exon_sender_duty_cycle(exon_sender_t *sender, int64_t now_ns);

#endif /* EXON_SENDER_H */
