/*
 * exon_feedback_delay.h: Aeron's "optimal multicast" feedback delay (sans-IO).
 *
 * A multicast receiver that finds a gap waits a random delay before it NAKs, so that in a
 * group of receivers that all lost the same datagram one NAK (the earliest timer) usually
 * suffices: the retransmit reaches the others before their timers fire and fills their gap
 * (Aeron's OptimalMulticastDelayGenerator, after Nonnenmacher and Biersack's timer-based
 * feedback suppression). With T the maximum backoff, N the group size estimate,
 * lambda = ln(N) + 1 and u uniform in [0, 1):
 *
 *     delay = (T / lambda) * ln(1 + u * (e^lambda - 1))        in [0, T)
 *
 * which puts most delays near T and few near 0. Aeron's defaults: T = 10 ms, N = 10.
 * The random source is splitmix64 from a seed, so a sequence can be replayed.
 *
 * Thread-safety: plain data; one generator per image, used by the receiver agent.
 */
#ifndef EXON_FEEDBACK_DELAY_H
#define EXON_FEEDBACK_DELAY_H

#include <stdint.h>

#include "common/exon_common.h"

#define EXON_NAK_MULTICAST_MAX_BACKOFF_NS (10LL * 1000 * 1000)
#define EXON_NAK_MULTICAST_GROUP_SIZE 10

typedef struct exon_feedback_delay_stct
{
    int64_t max_backoff_ns;  /* 0: not in use */
    double lambda;
    double scale;            /* e^lambda - 1 */
    uint64_t state;
}
exon_feedback_delay_t;

void exon_feedback_delay_init(exon_feedback_delay_t *generator, int64_t max_backoff_ns, int32_t group_size,
    uint64_t seed);

/* The next delay in [0, max_backoff_ns). */
int64_t exon_feedback_delay_next(exon_feedback_delay_t *generator);

#endif /* EXON_FEEDBACK_DELAY_H */
