/*
 * exon_command_queue.h: a bounded single-producer single-consumer command queue from the
 * driver conductor to one of its agents (the sender, the receiver), with a wake-up.
 *
 * A command is a small fixed-size record { type, value, target }. The conductor offers;
 * the agent drains at the start of each duty cycle. When the ring is full the command goes
 * to a conductor-side backlog (growable, never lost, order kept) that the conductor flushes
 * into the ring at its next offer or exon_command_queue_flush, so the conductor never blocks
 * on an agent (in SHARED mode they share one thread). Each offer writes the queue's eventfd;
 * the agent's runner has that fd in its epoll set, so a parked agent wakes at once.
 *
 * Thread-safety: exactly one producer thread (offer, flush, backlog) and one consumer
 * thread (drain). init/fini while neither runs.
 */
#ifndef EXON_COMMAND_QUEUE_H
#define EXON_COMMAND_QUEUE_H

#include <stdint.h>

#include "exon_common.h"

#define EXON_COMMAND_QUEUE_CAPACITY 256  /* power of two */

#define EXON_AGENT_CMD_ADD_PUBLICATION 1       /* sender: target = exon_network_publication_t* */
#define EXON_AGENT_CMD_REMOVE_PUBLICATION 2    /* sender: drop it, then set its sender_released */

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

/* Move backlogged commands into the ring; returns how many are still waiting. */
int32_t exon_command_queue_flush(exon_command_queue_t *q);

typedef void (*exon_command_handler_fn)(void *state, const exon_agent_command_t *cmd);

/* Consumer: clear the wake-up, then hand up to `limit` commands to handler; returns count. */
int exon_command_queue_drain(exon_command_queue_t *q, exon_command_handler_fn handler, void *state, int limit);

#endif /* EXON_COMMAND_QUEUE_H */
