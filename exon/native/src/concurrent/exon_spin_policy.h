/*
 * exon_spin_policy.h: how long a waiting client thread spins before it parks (sans-IO).
 *
 * A request/reply wait spins first (PAUSE, no syscall), so an answer that comes within the
 * spin costs neither side a wake-up. That pays when the peer runs on another core. When
 * the two ends of a round trip share one core (a loaded host), the spinner holds the core
 * while the peer that has the answer waits to run: every spin runs out, and a round trip
 * costs two whole spins (UDP req/rep pinned to one core: p50 about 145 us against 40 for
 * pyzmq). Yielding inside the spin is no cure: beside CPU-bound processes a yield gives
 * the core away for a whole time slice (p50 1.1 ms was measured).
 *
 * So the policy backs off, per thread: once `patience` spins in a row have run out, each
 * spin that runs out makes the next `backoff` waits park at once (backoff doubles, up to
 * EXON_SPIN_BACKOFF_MAX); a spin that gets its answer halves it and ends the run. A thread
 * whose spins pay keeps spinning; one whose spins never pay spins about once in
 * EXON_SPIN_BACKOFF_MAX waits.
 *
 * The patience matters between two processes on free cores: a spin there runs out now and
 * then (the peer was descheduled), and with no patience the waits it parks make the peer's
 * spins run out in turn, the two lock into parking, and a UDP round trip's p50 sat at
 * 50-70 us instead of 26 in 2 runs of 5. A patience of 3 kept every run at 26-27 us and the
 * shared-core case at 50-52 us (3 runs each); the native waits use it.
 *
 * Thread-safety: plain data; one instance per thread (exon_spin_policy_of_thread).
 */
#ifndef EXON_SPIN_POLICY_H
#define EXON_SPIN_POLICY_H

#include <stdint.h>
#include <stdbool.h>

#define EXON_SPIN_BACKOFF_MAX 64
#define EXON_SPIN_PATIENCE_WAITS 3 /* the native waits' (exon_spin_policy_of_thread) */

typedef struct exon_spin_policy_stct
{
    int32_t skip;     /* waits left that park without spinning */
    int32_t backoff;  /* waits to skip after the next spin that runs out */
    int32_t misses;   /* spins that ran out in a row */
    int32_t patience; /* spins that must run out in a row before waits skip (0 or 1: one) */
}
exon_spin_policy_t;

/* The spin budget of the next wait: spin_ns, or 0 while backing off (counts the wait). */
int64_t exon_spin_policy_budget(exon_spin_policy_t *policy, int64_t spin_ns);

/* What the spin of a wait given a budget > 0 came to: answered (the wait ended during
 * the spin) or not (it ran out and the thread parked). */
void exon_spin_policy_outcome(exon_spin_policy_t *policy, bool answered);

/* This thread's policy (thread-local). */
exon_spin_policy_t *exon_spin_policy_of_thread(void);

#endif
