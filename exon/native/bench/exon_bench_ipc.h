/*
 * exon_bench_ipc.h: native IPC throughput loop (publisher thread + subscriber thread over
 * one log), the exon side of `exon bench transport` (peer: Aeron's EmbeddedIpcThroughput).
 *
 * Standalone (window >= 0), the subscriber thread also plays the driver: after each poll
 * it cleans the log behind the subscriber and sets *pub->position_limit = subscriber
 * position + window. Under a media driver pass EXON_BENCH_DRIVER_MANAGED: the driver's
 * conductor owns the limit and the cleaning (two cleaners working from different views of
 * the subscriber position would zero live frames).
 * Thread safety: runs its own two threads; the caller must not use pub/img meanwhile.
 */
#ifndef EXON_BENCH_IPC_H
#define EXON_BENCH_IPC_H

#include <stdint.h>

#include "client/exon_publication.h"
#include "client/exon_image.h"

typedef struct exon_bench_result_stct
{
    int64_t messages;                  /* messages received */
    int64_t bytes;                     /* payload bytes received */
    int64_t elapsed_ns;
    int64_t back_pressured;            /* offers that returned BACK_PRESSURED/ADMIN_ACTION */
    double messages_per_second;
}
exon_bench_result_t;

#define EXON_BENCH_DRIVER_MANAGED (-1)

/* Run for duration_ns with messages of msg_len bytes; window 0 -> term_length / 2,
 * EXON_BENCH_DRIVER_MANAGED -> the driver keeps the limit and cleans the log.
 * Returns 0 or a negative code; figures in *result. */
int exon_bench_ipc_throughput(
    exon_publication_t *pub,
    exon_image_t *img,
    int32_t msg_len,
    int64_t duration_ns,
    int32_t window,
    exon_bench_result_t *result);

/* Shared by the benches (not part of the cffi API). Start sub_main then pub_main on two
 * threads over `state`, sleep duration_ns, clear *running and join both. Returns the elapsed
 * ns (first start to last join), or a negative code when a thread could not start. */
int64_t exon_bench_run_threads(
    void *(*sub_main)(void *), void *(*pub_main)(void *), void *state, volatile int32_t *running,
    int64_t duration_ns);

/* Fill *result from a run's counts; returns 0, or the publisher's negative rc (error set). */
int exon_bench_fill_result(
    exon_bench_result_t *result, int64_t messages, int64_t bytes, int64_t back_pressured, int64_t elapsed_ns,
    int rc);

#endif /* EXON_BENCH_IPC_H */
