/*
 * exon_publication.h: appending messages to a log buffer (Aeron's Publication and
 * ExclusivePublication, client side).
 *
 * Offer/try_claim return the new stream position (> 0) or one of Aeron's outcome codes
 * below (not errors), or EXON_E_MESSAGE_TOO_LARGE / EXON_E_ARGUMENT (errors, with text via
 * exon_last_error()). A too-large message never touches the log.
 *
 * Commit protocol (per frame): the header is written with frame_length = -length, then the
 * payload, then frame_length = +length with release semantics. Readers stop at a frame
 * length <= 0. A claim that crosses the end of a term writes a PAD frame for the rest of
 * the term and rotates the log (Aeron's rotate: CAS of the next partition's tail, then CAS
 * of active_term_count); the offer then returns EXON_PUBLICATION_ADMIN_ACTION and the
 * caller retries.
 *
 * Flow control: an offer is accepted only while the current position < *position_limit
 * (a counter in shared memory written by the driver: slowest subscriber + term window).
 * The driver must also clean the log (exon_log_clean_to) before raising the limit.
 *
 * Thread safety: a concurrent publication (exclusive = 0) may be offered to from many
 * threads and processes at once (atomic fetch-add on the tail). An exclusive publication
 * (exclusive = 1) has ONE writer thread at a time (plain release stores of the tail).
 * exon_publication_close may be called from any thread; offers after it return CLOSED.
 * After each commit, if meta->exon_waiters > 0 the log's doorbells are rung.
 */
#ifndef EXON_PUBLICATION_H
#define EXON_PUBLICATION_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"
#include "concurrent/exon_logbuffer.h"
#include "concurrent/exon_doorbell.h"

#define EXON_PUBLICATION_NOT_CONNECTED (-1)
#define EXON_PUBLICATION_BACK_PRESSURED (-2)
#define EXON_PUBLICATION_ADMIN_ACTION (-3)
#define EXON_PUBLICATION_CLOSED (-4)
#define EXON_PUBLICATION_MAX_POSITION_EXCEEDED (-5)

typedef struct exon_publication_stct
{
    exon_log_t *log;                   /* not owned: must outlive the publication */
    exon_log_metadata_t *meta;
    uint8_t *terms[EXON_LOG_PARTITION_COUNT];
    int64_t *position_limit;           /* shared counter, written by the driver */
    uint8_t *counters_values;          /* base of the counters values (doorbells); may be NULL */
    exon_agent_ring_fn_t agent_ring;   /* rings driver agents (negative doorbell ids); may be NULL */
    void *agent_ring_ctx;
    int64_t max_possible_position;
    int32_t term_length;
    int32_t position_bits_to_shift;
    int32_t initial_term_id;
    int32_t session_id;
    int32_t stream_id;
    int32_t max_payload_length;        /* mtu - 32 */
    int32_t max_message_length;        /* min(term_length / 8, 16 MiB) */
    int32_t exclusive;
    volatile int32_t closed;
}
exon_publication_t;

/* A claimed frame of `length` payload bytes at `data`; commit or abort it exactly once. */
typedef struct exon_claim_stct
{
    uint8_t *frame;                    /* the frame header in the term */
    uint8_t *data;                     /* frame + 32 */
    int32_t length;                    /* payload length */
    exon_publication_t *pub;
}
exon_claim_t;

/* Initialise `pub` over an open log. position_limit must stay valid while pub is used. */
int exon_publication_init(
    exon_publication_t *pub,
    exon_log_t *log,
    int64_t *position_limit,
    uint8_t *counters_values,
    int32_t exclusive);

/* Append one message (fragmented if longer than max_payload_length). */
int64_t exon_publication_offer(
    exon_publication_t *pub, const char *buf, int32_t length, int64_t reserved_value);

/* Append one message made of two pieces (e.g. a header and a body), without copying them
 * together first. Either piece may be empty. */
int64_t exon_publication_offer2(
    exon_publication_t *pub,
    const char *a,
    int32_t a_length,
    const char *b,
    int32_t b_length,
    int64_t reserved_value);

/* Claim room for one unfragmented message of length <= max_payload_length; on success
 * (return > 0) write claim->data[0..length) and then commit or abort. */
int64_t exon_publication_try_claim(exon_publication_t *pub, int32_t length, exon_claim_t *claim);

/* Publish the claimed frame (release store of its length), then ring doorbells. */
int exon_claim_commit(exon_claim_t *claim);
/* Turn the claimed frame into padding that readers skip. */
int exon_claim_abort(exon_claim_t *claim);
/* Set the reserved value of a claimed frame before commit. */
void exon_claim_set_reserved_value(exon_claim_t *claim, int64_t reserved_value);

/* Current publisher position (from the active tail). */
int64_t exon_publication_position(exon_publication_t *pub);
/* Current *position_limit (acquire). */
int64_t exon_publication_position_limit(exon_publication_t *pub);
/* 1 when meta->is_connected is non-zero. */
int exon_publication_is_connected(exon_publication_t *pub);
/* Mark closed: later offers and claims return EXON_PUBLICATION_CLOSED. */
void exon_publication_close(exon_publication_t *pub);
int exon_publication_is_closed(exon_publication_t *pub);

#endif /* EXON_PUBLICATION_H */
