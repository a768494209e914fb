/*
 * exon_receiver.h: the receiver agent and its own state (Aeron's aeron_driver_receiver_t).
 *
 * The driver owns one exon_receiver_t (exon_driver_t.receiver); the conductor reaches it
 * through its `receiver` reference: it offers commands on `commands` (EXON_RCV_CMD_*),
 * drains the receiver's answers from `events` (EXON_RCV_EVT_*), adds or drops an
 * endpoint's socket in `epoll_fd`, and catches the receiver up under `lock`
 * (exon_receiver_catch_up). The endpoint list (and each endpoint's images, streams and
 * queued SETUPs) belongs to the thread that runs the duty cycle, which holds `lock`: the
 * receiver's agent, or an INVOKER client thread (exon_invoker.c).
 *
 * Thread-safety: init/close on the driver's owner thread while no runner runs.
 */
#ifndef EXON_RECEIVER_H
#define EXON_RECEIVER_H

#include <stdint.h>
#include <pthread.h>

#include "common/exon_common.h"
#include "concurrent/exon_command_queue.h"

struct exon_driver_conductor_stct;
struct exon_receive_endpoint_stct;

typedef struct exon_receiver_stct
{
    pthread_mutex_t lock;             /* who runs the duty cycle */
    exon_command_queue_t commands;    /* conductor -> receiver */
    exon_command_queue_t events;      /* receiver -> conductor: SETUPs, releases */
    struct exon_receive_endpoint_stct **endpoints; /* the duty cycle's thread only */
    int32_t endpoint_count;           /* receiver writes; read unlocked for the idle check */
    int32_t endpoint_capacity;
    int epoll_fd;                     /* the runner's (INVOKER: the invoker's) epoll set, not
                                       * owned; -1 when closed */
    const int32_t *invokers_in;       /* the driver's INVOKER count (exon_driver_t) */
    struct exon_driver_conductor_stct *conductor; /* its error log only */
}
exon_receiver_t;

/* Queues and lock; `conductor` records the receiver's errors, `invokers_in` is the
 * driver's count of INVOKER client threads waiting. */
int exon_receiver_init(exon_receiver_t *receiver, struct exon_driver_conductor_stct *conductor,
    const int32_t *invokers_in);

/* Free the queues and the list (the endpoints are the conductor's). The agents are stopped
 * and the conductor has closed (it drains `events` while it closes). */
void exon_receiver_close(exon_receiver_t *receiver);

/* The agent's do_work (`state` is the exon_receiver_t). */
int exon_receiver_do_work(void *state, int64_t now_ns);

/* One duty cycle, from the agent or an INVOKER thread (it takes the lock itself). */
int exon_receiver_duty_cycle(exon_receiver_t *receiver, int64_t now_ns);

/* The same, from an INVOKER client thread: 0 at once when the lock is taken (the agent is
 * in its duty cycle: what it receives rings the doorbells, bridged to the invoker set),
 * never waiting behind an agent thread that the scheduler may have preempted. */
int exon_receiver_try_duty_cycle(exon_receiver_t *receiver, int64_t now_ns);

/* The conductor applies every command it queued for the receiver itself, under the lock as
 * the receiver's duty cycle would: when it returns, the sockets of the endpoints it closed
 * are closed (a port can be bound again). */
void exon_receiver_catch_up(exon_receiver_t *receiver);

#endif /* EXON_RECEIVER_H */
