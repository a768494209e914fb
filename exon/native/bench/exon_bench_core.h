/*
 * exon_bench_core.h: the C core's functions the benchmark loops call, reached through
 * pointers into the library's own module (exon.native._exon), bound once at import by
 * exon/native/bench_loops.py (ffi.addressof, as the fast door is bound). So _bench links
 * no core code: the loops run the very functions the library runs, and errors land in the
 * library's thread-local error text (exon.native.check reads it). The core's headers are
 * included for their layouts and inline helpers only.
 *
 * Thread safety: exon_bench_bind before any loop runs (bench_loops.py does it at import).
 */
#ifndef EXON_BENCH_CORE_H
#define EXON_BENCH_CORE_H

#include <stdint.h>

#include "client/exon_publication.h"
#include "client/exon_image.h"
#include "concurrent/exon_logbuffer.h"

typedef struct exon_bench_core_stct
{
    int64_t (*publication_offer)(exon_publication_t *pub, const char *buf, int32_t length, int64_t reserved_value);
    int (*image_poll)(exon_image_t *img, exon_fragment_t *out, int32_t max_messages, int32_t fragment_limit,
        uint8_t *copy_buf, int32_t copy_cap, int32_t *copy_used);
    int (*image_poll_count)(exon_image_t *img, int32_t fragment_limit, int64_t *bytes);
    int64_t (*log_clean_to)(exon_log_t *log, int64_t *clean_position, int64_t position);
    int (*set_error)(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
}
exon_bench_core_t;

/* The bound functions (exon_bench_bind; all NULL before). */
extern exon_bench_core_t exon_bench_core;

/* Bind the core's functions: the addresses of exon_publication_offer, exon_image_poll,
 * exon_image_poll_count, exon_log_clean_to and exon_set_error in exon.native._exon. */
void exon_bench_bind(uintptr_t publication_offer, uintptr_t image_poll, uintptr_t image_poll_count,
    uintptr_t log_clean_to, uintptr_t set_error);

#endif /* EXON_BENCH_CORE_H */
