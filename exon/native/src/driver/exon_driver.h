/*
 * exon_driver.h: the media driver: context (settings), directory, cnc.dat, agent threads.
 *
 * exon_driver_launch: checks the directory (a live driver there -> refused with "driver
 * already active in DIR"; a stale one -> cleaned), creates cnc.dat with its system
 * counters, then starts the agent runners for the threading mode:
 *   DEDICATED       3 threads: conductor, sender, receiver
 *   SHARED_NETWORK  2 threads: conductor, sender + receiver
 *   SHARED          1 thread: conductor + sender + receiver
 * exon_driver_close: stops and joins the agents, frees every log (unlinked), zeroes the
 * driver heartbeat so clients learn at once that the driver is gone, unmaps cnc.dat and,
 * when asked, deletes the directory.
 *
 * Thread-safety: launch/close from one owner thread. exon_driver_terminate_requested and
 * the getters may be called from any thread.
 */
#ifndef EXON_DRIVER_H
#define EXON_DRIVER_H

#include <stdint.h>
#include <pthread.h>

#include "common/exon_common.h"
#include "common/exon_cnc.h"
#include "common/exon_cnc_file.h"
#include "concurrent/exon_agent.h"
#include "driver/exon_driver_context.h"
#include "driver/exon_driver_conductor.h"
#include "driver/exon_receiver.h"
#include "driver/exon_sender.h"

typedef struct exon_driver_stct
{
    exon_driver_context_t context;
    exon_cnc_t cnc;
    exon_driver_conductor_t conductor; /* each agent's own state; the conductor holds */
    exon_sender_t sender;              /* references to the other two */
    exon_receiver_t receiver;
    exon_agent_runner_t runners[EXON_AGENT_COUNT];
    int32_t runner_count;
    int32_t closed;
    int64_t instance_id;
    int invoker_epoll_fd;         /* INVOKER: the receive endpoints' sockets + invoker_wake_fd */
    int invoker_wake_fd;          /* INVOKER: eventfd, written when a bridged doorbell rings */
    int32_t invokers_in;          /* INVOKER: client threads inside exon_invoker_wait now */
    int32_t invokers_parked;      /* INVOKER: of those, the ones parked in ppoll */
}
exon_driver_t;

/* Aeron's defaults (DEDICATED, backoff 10/20/1us/1ms, 64 MiB IPC terms, 10 s liveness...). */
void exon_driver_context_defaults(exon_driver_context_t *ctx);

/* Launch a driver; *driver is heap-allocated and owned by the caller until close. */
int exon_driver_launch(exon_driver_t **driver, const exon_driver_context_t *ctx);

/* Stop, join, clean, free. Safe with NULL. */
int exon_driver_close(exon_driver_t *driver);

/* 1 once a client sent TERMINATE_DRIVER. */
int exon_driver_terminate_requested(exon_driver_t *driver);

const char *exon_driver_dir(exon_driver_t *driver);
int32_t exon_driver_runner_count(exon_driver_t *driver);

/* Remove everything under `dir` and the dir itself (0, or -errno). */
int exon_driver_delete_dir(const char *dir);

#endif /* EXON_DRIVER_H */
