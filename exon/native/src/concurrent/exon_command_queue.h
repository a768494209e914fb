/*
 * exon_command_queue.h: a bounded single-producer single-consumer command queue between the
 * driver conductor and one of its agents, with a wake-up: conductor -> sender, conductor ->
 * receiver, and receiver -> conductor (the receiver's events: SETUPs seen, releases).
 *
 * A command is a small fixed-size record { type, value, target }. The conductor offers;
 * the agent drains at the start of each duty cycle. When the ring is full the command goes
 * to a conductor-side backlog (growable, never lost, order kept) that the conductor flushes
 * into the ring at its next offer or exon_command_queue_flush, so the conductor never blocks
 * on an agent (in SHARED mode they share one thread). Each offer writes the queue's eventfd;
 * the agent's runner has that fd in its epoll set, so a parked agent wakes at once.
 *
 * Thread-safety: one producer at a time (offer, flush, backlog) and one consumer at a time
 * (drain, pending). The receiver's side of its two queues is used by whichever thread runs
 * the receiver's duty cycle (its agent, an INVOKER client thread, or the conductor helping
 * it), always under the receiver's lock, which orders them. init/fini while neither
 * runs.
 */
#ifndef EXON_COMMAND_QUEUE_H
#define EXON_COMMAND_QUEUE_H

#include <stdint.h>

#include "common/exon_common.h"

#define EXON_COMMAND_QUEUE_CAPACITY 256  /* power of two */

#define EXON_AGENT_CMD_ADD_PUBLICATION 1       /* sender: target = exon_network_publication_t* */
#define EXON_AGENT_CMD_REMOVE_PUBLICATION 2    /* sender: drop it, then set its sender_released */

/* conductor -> receiver (exon_receiver.c); each entity's commands keep their order */
#define EXON_RCV_CMD_ADD_ENDPOINT 10           /* target = exon_receive_endpoint_t* (socket open) */
#define EXON_RCV_CMD_REMOVE_ENDPOINT 11        /* drop it, close its socket, ENDPOINT_RELEASED */
#define EXON_RCV_CMD_ADD_STREAM 12             /* target = endpoint, value = stream id (+1 ref) */
#define EXON_RCV_CMD_REMOVE_STREAM 13          /* target = endpoint, value = stream id (-1 ref) */
#define EXON_RCV_CMD_ADD_IMAGE 14              /* target = exon_publication_image_t*: its queued
                                                * SETUP is taken off, the image goes in */
#define EXON_RCV_CMD_REMOVE_IMAGE 15           /* drop it, IMAGE_RELEASED */
#define EXON_RCV_CMD_ADD_SUBSCRIBER 16         /* target = image, value = sub-pos counter id */
#define EXON_RCV_CMD_REMOVE_SUBSCRIBER 17      /* target = image, value = counter id; COUNTER_RELEASED */
#define EXON_RCV_CMD_SETUP_REFUSED 18          /* target = the SETUP event's exon_receiver_setup_t*:
                                                * taken off the endpoint's queue, then freed */

/* receiver -> conductor (exon_conductor_receive_images.c) */
#define EXON_RCV_EVT_SETUP 30                  /* target = malloc'd exon_receiver_setup_t* */
#define EXON_RCV_EVT_IMAGE_RELEASED 31         /* target = the image: the receiver is done with it */
#define EXON_RCV_EVT_ENDPOINT_RELEASED 32      /* target = the endpoint: dropped, socket closed */
#define EXON_RCV_EVT_COUNTER_RELEASED 33       /* value = a sub-pos counter id the receiver dropped */

typedef struct exon_agent_command_stct
{
    int32_t type;
    int32_t value;
    void *target;
}
exon_agent_command_t;

typedef struct exon_command_queue_stct
{
    exon_agent_command_t slots[EXON_COMMAND_QUEUE_CAPACITY];
    volatile int64_t head;            /* next slot to drain (consumer) */
    int8_t pad0[56];
    volatile int64_t tail;            /* next slot to fill (producer) */
    int8_t pad1[56];
    exon_agent_command_t *backlog;    /* producer only */
    int32_t backlog_length;
    int32_t backlog_capacity;
    int64_t backlogged;               /* commands that waited in the backlog (producer) */
    volatile int32_t wake_pending;    /* 1 from a wake-up write until the consumer read it */
    int wake_fd;                      /* eventfd, -1 when none */
}
exon_command_queue_t;

/* 0, or -errno when the eventfd cannot be made. */
int exon_command_queue_init(exon_command_queue_t *q);
void exon_command_queue_fini(exon_command_queue_t *q);

/* Queue one command and wake the consumer: 1 in the ring, 0 in the backlog, -ENOMEM. */
int exon_command_queue_offer(exon_command_queue_t *q, int32_t type, int32_t value, void *target);

/* Move backlogged commands into the ring (and wake the consumer when any moved); returns
 * how many are still waiting. */
int32_t exon_command_queue_flush(exon_command_queue_t *q);

typedef void (*exon_command_handler_fn)(void *state, const exon_agent_command_t *cmd);

/* Consumer: true when neither a command nor an unread wake-up waits (three loads): a drain
 * would do nothing, not even read the eventfd (which would keep a parked runner awake). */
static inline bool exon_command_queue_idle(const exon_command_queue_t *q)
{
    return EXON_LOAD_RLX(&q->head) == EXON_LOAD_ACQ(&q->tail) && 0 == EXON_LOAD_RLX(&q->wake_pending);
}

/* Consumer: clear the wake-up, then hand up to `limit` commands to handler; returns count. */
int exon_command_queue_drain(exon_command_queue_t *q, exon_command_handler_fn handler, void *state, int limit);

#endif /* EXON_COMMAND_QUEUE_H */
