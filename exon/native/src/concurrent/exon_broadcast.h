/*
 * exon_broadcast.h: one-to-many broadcast buffer (Aeron's BroadcastTransmitter /
 * BroadcastReceiver / CopyBroadcastReceiver).
 *
 * Shared-memory layout of a buffer of `capacity` bytes (a power of two >= 64):
 *
 *   [0, capacity)               records: int32 length (incl. 8-byte header), int32 type,
 *                               payload; 8-byte aligned; EXON_BROADCAST_PADDING_TYPE fills
 *                               the end before a wrap
 *   [capacity, capacity + 128)  trailer: +0 tail intent counter, +8 tail counter,
 *                               +16 latest counter (int64 each)
 *
 * The transmitter never waits for receivers: it stores the tail intent (the tail it is
 * about to reach) before overwriting, so a receiver can tell whether the bytes it read
 * were overwritten (it was "lapped"). A lapped receiver jumps to the latest record and
 * counts the lap in `lapped_count`. Max payload = capacity / 8 - 8.
 *
 * Thread safety: exactly one transmitter (the driver conductor). Any number of receivers,
 * each with its own exon_broadcast_receiver_t used by one thread at a time. Handles are
 * process-local (they hold pointers); only the buffer is shared.
 */
#ifndef EXON_BROADCAST_H
#define EXON_BROADCAST_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"

#define EXON_BROADCAST_TRAILER_LENGTH 128
#define EXON_BROADCAST_RECORD_HEADER_LENGTH 8
#define EXON_BROADCAST_ALIGNMENT 8
#define EXON_BROADCAST_PADDING_TYPE (-1)
#define EXON_BROADCAST_MIN_CAPACITY 64
#define EXON_BROADCAST_TAIL_INTENT_COUNTER_OFFSET 0
#define EXON_BROADCAST_TAIL_COUNTER_OFFSET 8
#define EXON_BROADCAST_LATEST_COUNTER_OFFSET 16

typedef struct exon_broadcast_transmitter_stct
{
    uint8_t *buffer;
    int32_t capacity;
    int32_t max_message_length;
}
exon_broadcast_transmitter_t;

typedef struct exon_broadcast_receiver_stct
{
    uint8_t *buffer;
    int32_t capacity;
    int32_t max_message_length;
    int64_t cursor;        /* position of the current record */
    int64_t next_record;   /* position of the record after it */
    int32_t record_offset; /* buffer offset of the current record's header */
    int32_t pad0;
    int64_t lapped_count;  /* times the transmitter overwrote records before we read them */
}
exon_broadcast_receiver_t;

/* Attach to `length` bytes (capacity + 128). 0 or EXON_E_ARGUMENT. Memory is not touched. */
int exon_broadcast_transmitter_init(exon_broadcast_transmitter_t *tx, void *buffer, int64_t length);
/*
 * Append one message. 0, EXON_E_MESSAGE_TOO_LARGE or EXON_E_ARGUMENT (type must be > 0).
 * Never blocks and never fails for lack of room: old records are overwritten.
 */
int exon_broadcast_transmit(exon_broadcast_transmitter_t *tx, int32_t type, const void *msg, int32_t length);

/*
 * Attach a receiver; it starts at the current tail (it sees only messages transmitted
 * after this call). 0 or EXON_E_ARGUMENT.
 */
int exon_broadcast_receiver_init(exon_broadcast_receiver_t *rx, void *buffer, int64_t length);

/*
 * Copy the next message into dst. Returns 1 (message copied: *type, *length set), 0 (none
 * available), or EXON_E_ARGUMENT if dst_capacity < max_message_length. If the transmitter
 * lapped the receiver (before or during the copy) the receiver counts it in lapped_count,
 * jumps to the latest record and tries again (bounded).
 */
int exon_broadcast_receive(
    exon_broadcast_receiver_t *rx, int32_t *type, uint8_t *dst, int32_t dst_capacity, int32_t *length);

/*
 * Zero-copy level (Aeron's BroadcastReceiver): advance to the next record, 1 or 0.
 * Then read type/offset/length of the current record and copy it out, and call
 * exon_broadcast_receiver_validate: false means the bytes were overwritten meanwhile.
 */
int exon_broadcast_receive_next(exon_broadcast_receiver_t *rx);
int32_t exon_broadcast_receiver_type(const exon_broadcast_receiver_t *rx);
int32_t exon_broadcast_receiver_offset(const exon_broadcast_receiver_t *rx); /* payload offset */
int32_t exon_broadcast_receiver_length(const exon_broadcast_receiver_t *rx); /* payload bytes */
bool exon_broadcast_receiver_validate(const exon_broadcast_receiver_t *rx);
int64_t exon_broadcast_receiver_lapped_count(const exon_broadcast_receiver_t *rx);

#endif /* EXON_BROADCAST_H */
