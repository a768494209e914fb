/*
 * exon_ring.h: many-to-one ring buffer (Aeron's ManyToOneRingBuffer record format).
 *
 * Shared-memory layout of a ring of `capacity` bytes (a power of two >= 64):
 *
 *   [0, capacity)                      records
 *   [capacity, capacity + 768)         trailer (exon_ring_trailer_t)
 *
 * Record: int32 length (header included; negative while being written), int32 type,
 * payload; records start on 8-byte boundaries. A record of type EXON_RING_PADDING_TYPE
 * fills the end of the buffer when a record does not fit before the wrap. The maximum
 * payload is capacity / 8 - 8 bytes.
 *
 * Trailer (each field on its own 128 bytes, after 128 bytes of padding):
 *   +128 tail position (int64: bytes ever claimed)
 *   +256 head cache position (int64: writers' cached copy of head)
 *   +384 head position (int64: bytes ever consumed)
 *   +512 correlation counter (int64: next_correlation_id)
 *   +640 consumer heartbeat (int64: epoch ms, stamped by the consumer; the driver heartbeat)
 *
 * Thread safety: any number of writers (threads and processes) may call try_claim /
 * commit / abort / write / next_correlation_id concurrently. Exactly one consumer (the
 * driver conductor) calls read_* / unblock / check_unblock / set_consumer_heartbeat.
 *
 * exon_ring_t is a process-local handle (it holds pointers); only the buffer it points to
 * is shared. Each process attaches its own handle to its own mapping with exon_ring_init.
 */
#ifndef EXON_RING_H
#define EXON_RING_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"

#define EXON_RING_TRAILER_LENGTH 768
#define EXON_RING_RECORD_HEADER_LENGTH 8
#define EXON_RING_ALIGNMENT 8
#define EXON_RING_PADDING_TYPE (-1)
#define EXON_RING_MIN_CAPACITY 64

#define EXON_RING_TAIL_POSITION_OFFSET 128
#define EXON_RING_HEAD_CACHE_POSITION_OFFSET 256
#define EXON_RING_HEAD_POSITION_OFFSET 384
#define EXON_RING_CORRELATION_COUNTER_OFFSET 512
#define EXON_RING_CONSUMER_HEARTBEAT_OFFSET 640

typedef struct exon_ring_stct
{
    uint8_t *buffer;        /* start of the records; the trailer follows at buffer + capacity */
    int32_t capacity;
    int32_t max_message_length; /* max payload bytes */
    /* consumer-local state for check_unblock (not shared) */
    int64_t unblock_last_head;
    int64_t unblock_last_change_ns;
}
exon_ring_t;

/*
 * Attach `ring` to `length` bytes at `buffer` (records + trailer). length - 768 must be a
 * power of two >= 64 and buffer 8-byte aligned. Does not modify the memory (a fresh
 * zero-filled mapping is a valid empty ring). Returns 0 or EXON_E_ARGUMENT.
 */
int exon_ring_init(exon_ring_t *ring, void *buffer, int64_t length);

/*
 * Claim room for a record of `length` payload bytes and type `type` (> 0). Returns the
 * offset (from ring->buffer) where the payload goes, or EXON_E_FULL (no room now),
 * EXON_E_MESSAGE_TOO_LARGE, EXON_E_ARGUMENT (bad type/length). The record stays invisible
 * to the consumer (negative length) until exon_ring_commit or exon_ring_abort.
 */
int32_t exon_ring_try_claim(exon_ring_t *ring, int32_t type, int32_t length);
/* Publish the claimed record whose payload is at `offset`. 0 or EXON_E_ARGUMENT. */
int exon_ring_commit(exon_ring_t *ring, int32_t offset);
/* Turn the claimed record into padding the consumer skips. 0 or EXON_E_ARGUMENT. */
int exon_ring_abort(exon_ring_t *ring, int32_t offset);
/* try_claim + copy + commit. 0, EXON_E_FULL, EXON_E_MESSAGE_TOO_LARGE or EXON_E_ARGUMENT. */
int exon_ring_write(exon_ring_t *ring, int32_t type, const void *src, int32_t length);
/* Pointer to a payload offset returned by try_claim. */
uint8_t *exon_ring_payload(exon_ring_t *ring, int32_t offset);

/* A unique id across every writer of this ring (atomic increment of the counter). */
int64_t exon_ring_next_correlation_id(exon_ring_t *ring);

/*
 * Consumer, callback-free batch:
 *   exon_ring_batch_t b; exon_ring_read_begin(ring, &b, limit);
 *   while (exon_ring_read_next(ring, &b, &type, &offset, &length) == 1) { use buffer+offset }
 *   exon_ring_read_end(ring, &b);        (zeroes the consumed bytes, releases head)
 * A batch never wraps: it stops at the buffer end (the next batch continues at 0).
 * Padding records are skipped silently; `limit` bounds the records returned (<= 0: no limit).
 */
typedef struct exon_ring_batch_stct
{
    int64_t head;
    int32_t head_index;
    int32_t bytes_read;
    int32_t max_bytes;   /* contiguous bytes from head_index to the buffer end */
    int32_t records;
    int32_t limit;
}
exon_ring_batch_t;

int exon_ring_read_begin(exon_ring_t *ring, exon_ring_batch_t *batch, int32_t limit);
/* 1 with type/payload offset/payload length set, or 0 when the batch has no more records. */
int exon_ring_read_next(
    exon_ring_t *ring, exon_ring_batch_t *batch, int32_t *type, int32_t *offset, int32_t *length);
/* Returns the bytes consumed (records and padding). */
int32_t exon_ring_read_end(exon_ring_t *ring, exon_ring_batch_t *batch);

/*
 * Consumer, copy-out: read up to `limit` records (<= 0: no limit) and copy them to `dst`
 * in the ring's own record format (int32 length incl. 8-byte header, int32 type, payload,
 * each record padded to 8 bytes), padding records omitted. Stops before a record that does
 * not fit in dst_capacity. Returns the bytes written to dst (0: nothing to read).
 */
int32_t exon_ring_read_copy(exon_ring_t *ring, uint8_t *dst, int32_t dst_capacity, int32_t limit);

/*
 * Consumer: if the record at head is stuck in progress (a writer claimed it and died),
 * turn the stuck region into padding. Returns 1 if unblocked, else 0. Call only when the
 * head has not moved for a while (see check_unblock).
 */
int exon_ring_unblock(exon_ring_t *ring);
/*
 * Consumer, sans-IO: call from the duty cycle with the current time. If there are unread
 * bytes and the head has not moved for `timeout_ns`, calls exon_ring_unblock. Returns 1 if
 * a stuck record was unblocked, else 0.
 */
int exon_ring_check_unblock(exon_ring_t *ring, int64_t now_ns, int64_t timeout_ns);

int64_t exon_ring_producer_position(const exon_ring_t *ring);
int64_t exon_ring_consumer_position(const exon_ring_t *ring);
/* Bytes claimed but not consumed yet. */
int64_t exon_ring_size(const exon_ring_t *ring);

/* The consumer heartbeat (epoch ms): the driver's heartbeat when this is the to-driver ring. */
int64_t exon_ring_consumer_heartbeat_time(const exon_ring_t *ring);
void exon_ring_set_consumer_heartbeat_time(exon_ring_t *ring, int64_t now_ms);

#endif /* EXON_RING_H */
