/*
 * exon_loss_generator.h: deterministic debug loss for tests (like Aeron's debug loss
 * generators). A generator drops a datagram with probability `rate`, drawn from a
 * splitmix64 stream seeded with `seed` (seed -1 = seeded from the clock), so a run with
 * the same seed drops the same datagrams. Only DATA/PAD datagrams (heartbeats included)
 * are candidates when `data_only` is set; control frames always pass.
 *
 * Thread-safety: one generator per endpoint, used by one agent.
 */
#ifndef EXON_LOSS_GENERATOR_H
#define EXON_LOSS_GENERATOR_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/exon_common.h"

typedef struct exon_loss_generator_stct
{
    uint64_t state;
    uint64_t threshold;   /* drop when next() < threshold; 0 = never */
    bool data_only;
    int64_t dropped;
    int64_t seen;
}
exon_loss_generator_t;

/* rate in [0, 1]; EXON_E_ARGUMENT otherwise. */
int exon_loss_generator_init(exon_loss_generator_t *generator, double rate, int64_t seed, bool data_only);

/* The next raw 64-bit draw (exposed for tests). */
uint64_t exon_loss_generator_next(exon_loss_generator_t *generator);

bool exon_loss_generator_should_drop(exon_loss_generator_t *generator, const uint8_t *packet, size_t length);

#endif /* EXON_LOSS_GENERATOR_H */
