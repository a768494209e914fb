/*
 * exon_common.h: atomics, clocks, error codes and the thread-local last-error text
 * shared by every C file in exon/native/src.
 *
 * Convention: functions return >= 0 on success or a negative code: -errno for system
 * errors, or one of the EXON_E* codes below. They never touch Python objects. The one
 * Python function exon.native.check() turns a negative code into a typed exception,
 * using exon_last_error() for the detail text.
 *
 * Publication offer/try_claim are the exception: they return Aeron's codes -1..-5 (see
 * exon_publication.h) which are outcomes, not errors.
 */
#ifndef EXON_COMMON_H
#define EXON_COMMON_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <time.h>

/* ---- error codes (negative, below the errno range) ---- */
#define EXON_E_BASE              (-1000)
#define EXON_E_GENERIC           (-1000) /* see exon_last_error() */
#define EXON_E_DRIVER_TIMEOUT    (-1001) /* driver heartbeat stale or driver process gone */
#define EXON_E_CLIENT_CLOSED     (-1002) /* client (or object) already closed */
#define EXON_E_CNC_VERSION       (-1003) /* CnC file from another version */
#define EXON_E_CNC_CORRUPT       (-1004) /* CnC file truncated or inconsistent */
#define EXON_E_LOG_CORRUPT       (-1005) /* log buffer file truncated or inconsistent */
#define EXON_E_MESSAGE_TOO_LARGE (-1006)
#define EXON_E_URI               (-1007) /* malformed channel URI */
#define EXON_E_DRIVER_ERROR      (-1008) /* the driver answered a command with an error */
#define EXON_E_TIMEOUT           (-1009)
#define EXON_E_ARGUMENT          (-1010) /* invalid argument */
#define EXON_E_STATE             (-1011) /* call not valid in the object's current state */
#define EXON_E_FULL              (-1012) /* bounded queue/ring full */
#define EXON_E_NO_SPACE          (-1013) /* table exhausted (counters, doorbells, links...) */
#define EXON_E_UNAVAILABLE       (-1014) /* a library loaded at run time is missing (libcrypto) */

/* Record a formatted error text for the calling thread and return `code`. */
int exon_set_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last error text recorded on this thread ("" if none). */
const char *exon_last_error(void);
int exon_last_error_code(void);

/* ---- atomics (C11 builtins) ---- */
#define EXON_LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define EXON_LOAD_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define EXON_STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define EXON_STORE_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define EXON_FETCH_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define EXON_CAS(p, expected_ptr, desired) \
    __atomic_compare_exchange_n((p), (expected_ptr), (desired), false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#define EXON_FENCE_SEQ() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#if defined(__x86_64__) || defined(__i386__)
#define EXON_CPU_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define EXON_CPU_PAUSE() __asm__ volatile("yield")
#else
#define EXON_CPU_PAUSE() do { } while (0)
#endif

#define EXON_LIKELY(x) __builtin_expect(!!(x), 1)
#define EXON_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- clocks ---- */
static inline int64_t exon_nano_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t exon_nano_clock_ns(void); /* exported twin for Python */

static inline int64_t exon_epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

#endif /* EXON_COMMON_H */
