/* exon_fast_mutex.h: the NodeLock's mutex, one int and a futex (Linux).
 *
 * States: 0 free, 1 held, 2 held and someone may be waiting (the three-state mutex of
 * Drepper's "Futexes Are Tricky"). Taking a free lock is one compare-and-swap and giving
 * back an uncontended one is one exchange: no clock read and no semaphore, which is what
 * CPython's PyThread lock costs on every acquire (it computes a deadline even for a
 * non-blocking try; about 20 ns a call on the reference VM, on every door call).
 *
 * Any thread may give the lock back (threading.Lock's rule; threading.Condition relies on
 * it only through acquire/release). The waiting side is the caller's business: it drops
 * the GIL around exon_mutex_wait and runs signal handlers when that returns EINTR. */

#ifndef EXON_FAST_MUTEX_H
#define EXON_FAST_MUTEX_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline int exon_mutex_try(int *state)
{
    int expected = 0;
    return __atomic_compare_exchange_n(state, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void exon_mutex_give(int *state)
{
    if (__atomic_exchange_n(state, 0, __ATOMIC_RELEASE) == 2)
    {
        syscall(SYS_futex, state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

/* Wait for the lock for at most wait_us microseconds (< 0: no limit). 1: taken (held as
 * state 2, so the giver wakes the next waiter); 0: not taken yet (timed out, woken for
 * another, or the lock moved before the wait): the caller checks its deadline and calls
 * again; -EINTR: a signal arrived (the caller runs its handlers first). */
static inline int exon_mutex_wait(int *state, int64_t wait_us)
{
    if (__atomic_exchange_n(state, 2, __ATOMIC_ACQUIRE) == 0)
    {
        return 1;
    }
    struct timespec ts;
    struct timespec *limit = NULL;
    if (wait_us >= 0)
    {
        ts.tv_sec = (time_t)(wait_us / 1000000);
        ts.tv_nsec = (long)(wait_us % 1000000) * 1000;
        limit = &ts;
    }
    /* a relative timeout: the caller recomputes what is left from its own deadline */
    long r = syscall(SYS_futex, state, FUTEX_WAIT_PRIVATE, 2, limit, NULL, 0);
    int err = r < 0 ? errno : 0;
    if (__atomic_exchange_n(state, 2, __ATOMIC_ACQUIRE) == 0)
    {
        return 1;
    }
    return err == EINTR ? -EINTR : 0;
}

#endif
