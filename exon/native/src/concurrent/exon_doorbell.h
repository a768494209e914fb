/*
 * exon_doorbell.h: reader doorbells, 32-bit futex words in shared memory (see
 * docs/internals.md, "Waking up without spinning").
 *
 * A doorbell word is the low int32 of a counter value record in the counters values
 * region: word = (int32_t *)(counters_values + counter_id * EXON_DOORBELL_RECORD_LENGTH).
 * The futex calls are NOT private (FUTEX_WAIT / FUTEX_WAKE), so they work across processes.
 *
 * Thread safety: every function is safe to call from any thread or process at any time.
 */
#ifndef EXON_DOORBELL_H
#define EXON_DOORBELL_H

#include <stdint.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"

/* Length of one counter value record (the doorbell word sits at offset 0 of it). */
#define EXON_DOORBELL_RECORD_LENGTH 128

/* First timeout of a reader going to sleep: closes the writer commit / waiters-load race. */
#define EXON_DOORBELL_FIRST_WAIT_NS 50000LL
/* Later timeouts while nothing arrives grow from NEXT to MAX (x4 each time), bounded by
 * the caller's timeout; they only cover a ring missed while a doorbell table changes. */
#define EXON_DOORBELL_NEXT_WAIT_NS 1000000LL
#define EXON_DOORBELL_MAX_WAIT_NS 100000000LL

static inline int32_t *exon_doorbell_word(uint8_t *counters_values, int32_t counter_id)
{
    return (int32_t *)(counters_values + (int64_t)counter_id * EXON_DOORBELL_RECORD_LENGTH);
}

/*
 * Sleep while *word == expected, at most timeout_ns (< 0: no limit). Returns 0 when woken,
 * when *word != expected already (EAGAIN), or on a signal (EINTR: the caller re-checks);
 * EXON_E_TIMEOUT when the timeout passed. Releases nothing itself (cffi drops the GIL).
 */
int exon_doorbell_wait(int32_t *word, int32_t expected, int64_t timeout_ns);

/* Bump the word (release) and wake every waiter. Returns the number woken or -errno.
 * A word bridged in this process (exon_doorbell_bridge_add) also gets its eventfd written. */
int exon_doorbell_ring(int32_t *word);

/* Process-wide bridges from a doorbell word to an eventfd (the INVOKER mode parks in ppoll,
 * not on the futex). 0, or EXON_E_NO_SPACE when all EXON_DOORBELL_BRIDGES are taken; remove
 * returns -ENOENT for an unknown pair. */
#define EXON_DOORBELL_BRIDGES 64
int exon_doorbell_bridge_add(int32_t *word, int fd);
int exon_doorbell_bridge_remove(int32_t *word, int fd);

/*
 * The armed flag of a reader doorbell: the int32 after the word (the high half of the
 * DOORBELL counter's value). A reader going to sleep on a log's doorbell arms it (after
 * reading the word, before counting itself in exon_waiters); a commit rings only a doorbell
 * it finds armed, and disarms it. So the commits made while a reader wakes cost one
 * FUTEX_WAKE, not one each (a futex wake on shared memory costs about a microsecond).
 */
static inline void exon_doorbell_arm(int32_t *word)
{
    __atomic_store_n(word + 1, 1, __ATOMIC_RELEASE);
}

/* Ring `word` if armed (clearing the flag): 1 rung, 0 not armed. */
int exon_doorbell_ring_armed(int32_t *word);

/* Current value of the word (acquire); read it before re-checking for data, then wait. */
int32_t exon_doorbell_read(const int32_t *word);

/*
 * Writer side, after a commit: if meta->exon_waiters > 0, ring every armed doorbell listed in
 * meta->exon_doorbell_ids whose id is >= 0 (counter ids into counters_values). Negative
 * ids (EXON_DOORBELL_SENDER) name driver agents and are passed to `agent_ring` when it is
 * not NULL. counters_values may be NULL (then only agents are rung). Returns the number of
 * doorbells rung.
 */
typedef void (*exon_agent_ring_fn_t)(void *ctx, int32_t doorbell_id);
int exon_log_ring_doorbells(
    exon_log_metadata_t *meta, uint8_t *counters_values, exon_agent_ring_fn_t agent_ring, void *ctx);

/* Register a doorbell id in a log's table (driver conductor). -EEXIST if present,
 * EXON_E_NO_SPACE if full. Not thread-safe with itself (one conductor). */
int exon_log_add_doorbell(exon_log_metadata_t *meta, int32_t doorbell_id);
/* Remove a doorbell id from a log's table; -ENOENT if absent. */
int exon_log_remove_doorbell(exon_log_metadata_t *meta, int32_t doorbell_id);

#endif /* EXON_DOORBELL_H */
