/* exon_loss_generator.c: seeded random datagram loss for tests. */
#include <string.h>

#include "common/exon_layout.h"
#include "media/exon_loss_generator.h"

int exon_loss_generator_init(exon_loss_generator_t *generator, double rate, int64_t seed, bool data_only)
{
    if (NULL == generator || !(rate >= 0.0 && rate <= 1.0))
    {
        return exon_set_error(EXON_E_ARGUMENT, "loss generator: rate %f outside [0, 1]", rate);
    }
    memset(generator, 0, sizeof(*generator));
    generator->state = seed == -1 ? (uint64_t)exon_nano_clock() : (uint64_t)seed;
    /* rate 1.0 must drop everything: saturate instead of overflowing 2^64 */
    generator->threshold = rate >= 1.0 ? UINT64_MAX : (uint64_t)(rate * 18446744073709551616.0);
    generator->data_only = data_only;
    return 0;
}

uint64_t exon_loss_generator_next(exon_loss_generator_t *generator)
{
    uint64_t z = (generator->state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

bool exon_loss_generator_should_drop(exon_loss_generator_t *generator, const uint8_t *packet, size_t length)
{
    if (generator->data_only)
    {
        if (length < sizeof(exon_frame_header_t))
        {
            return false;
        }
        int16_t type = ((const exon_frame_header_t *)packet)->type;
        if (type != EXON_HDR_TYPE_DATA && type != EXON_HDR_TYPE_PAD)
        {
            return false;
        }
    }
    generator->seen++;
    if (generator->threshold == 0)
    {
        return false;
    }
    bool drop = generator->threshold == UINT64_MAX || exon_loss_generator_next(generator) < generator->threshold;
    if (drop)
    {
        generator->dropped++;
    }
    return drop;
}
