/* exon_feedback_delay.c: randomised multicast NAK delay (see the header). */
#include <math.h>
#include <string.h>

#include "driver/exon_feedback_delay.h"

void exon_feedback_delay_init(exon_feedback_delay_t *generator, int64_t max_backoff_ns, int32_t group_size,
    uint64_t seed)
{
    memset(generator, 0, sizeof(*generator));
    generator->max_backoff_ns = max_backoff_ns > 0 ? max_backoff_ns : 0;
    generator->lambda = log(group_size > 1 ? (double)group_size : 1.0) + 1.0;
    generator->scale = exp(generator->lambda) - 1.0;
    generator->state = seed;
}

static uint64_t exon_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

int64_t exon_feedback_delay_next(exon_feedback_delay_t *generator)
{
    if (generator->max_backoff_ns <= 0)
    {
        return 0;
    }
    double u = (double)(exon_splitmix64(&generator->state) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    double delay = ((double)generator->max_backoff_ns / generator->lambda) * log1p(u * generator->scale);
    int64_t ns = (int64_t)delay;
    return ns < generator->max_backoff_ns ? ns : generator->max_backoff_ns - 1;
}
