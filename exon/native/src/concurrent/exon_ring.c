/* exon_ring.c: many-to-one ring buffer. Layout and thread-safety contract in exon_ring.h. */
#include <string.h>

#include "concurrent/exon_ring.h"

#define EXON_RING_ALIGN(v) (((v) + (EXON_RING_ALIGNMENT - 1)) & ~(EXON_RING_ALIGNMENT - 1))

static inline int64_t *ring_field(const exon_ring_t *ring, int32_t offset)
{
    return (int64_t *)(ring->buffer + ring->capacity + offset);
}

static inline int32_t *record_length_at(const exon_ring_t *ring, int64_t index)
{
    return (int32_t *)(ring->buffer + index);
}

static inline int32_t *record_type_at(const exon_ring_t *ring, int64_t index)
{
    return (int32_t *)(ring->buffer + index + 4);
}

/* One 64-bit store writes length and type together (little-endian: length in the low half). */
static inline void store_header(const exon_ring_t *ring, int64_t index, int32_t length, int32_t type)
{
    uint64_t header = ((uint64_t)(uint32_t)type << 32) | (uint64_t)(uint32_t)length;
    EXON_STORE_REL((uint64_t *)(ring->buffer + index), header);
}

int exon_ring_init(exon_ring_t *ring, void *buffer, int64_t length)
{
    if (NULL == ring || NULL == buffer)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ring: NULL ring or buffer");
    }
    int64_t capacity = length - EXON_RING_TRAILER_LENGTH;
    if (capacity < EXON_RING_MIN_CAPACITY || capacity > (1LL << 30) || (capacity & (capacity - 1)) != 0)
    {
        return exon_set_error(
            EXON_E_ARGUMENT, "ring: length %lld is not a power of two >= %d plus the %d-byte trailer",
            (long long)length, EXON_RING_MIN_CAPACITY, EXON_RING_TRAILER_LENGTH);
    }
    if (((uintptr_t)buffer & 7) != 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ring: buffer not 8-byte aligned");
    }
    ring->buffer = (uint8_t *)buffer;
    ring->capacity = (int32_t)capacity;
    ring->max_message_length = (int32_t)(capacity / 8) - EXON_RING_RECORD_HEADER_LENGTH;
    ring->unblock_last_head = -1;
    ring->unblock_last_change_ns = 0;
    return 0;
}

int32_t exon_ring_try_claim(exon_ring_t *ring, int32_t type, int32_t length)
{
    if (type < 1 || length < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ring: invalid type %d or length %d", type, length);
    }
    if (length > ring->max_message_length)
    {
        return exon_set_error(
            EXON_E_MESSAGE_TOO_LARGE, "ring: message of %d bytes exceeds the maximum %d",
            length, ring->max_message_length);
    }
    const int64_t capacity = ring->capacity;
    const int64_t mask = capacity - 1;
    const int32_t record_length = length + EXON_RING_RECORD_HEADER_LENGTH;
    const int64_t required = EXON_RING_ALIGN(record_length);
    int64_t *tail_position = ring_field(ring, EXON_RING_TAIL_POSITION_OFFSET);
    int64_t *head_cache = ring_field(ring, EXON_RING_HEAD_CACHE_POSITION_OFFSET);
    int64_t *head_position = ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET);
    int64_t head = EXON_LOAD_ACQ(head_cache);
    int64_t tail;
    int64_t padding;
    int64_t record_index;

    for (;;)
    {
        tail = EXON_LOAD_ACQ(tail_position);
        if (required > capacity - (tail - head))
        {
            head = EXON_LOAD_ACQ(head_position);
            if (required > capacity - (tail - head))
            {
                return EXON_E_FULL;
            }
            EXON_STORE_REL(head_cache, head);
        }

        padding = 0;
        record_index = tail & mask;
        const int64_t to_buffer_end = capacity - record_index;
        if (required > to_buffer_end)
        {
            int64_t head_index = head & mask;
            if (required > head_index)
            {
                head = EXON_LOAD_ACQ(head_position);
                head_index = head & mask;
                if (required > head_index)
                {
                    return EXON_E_FULL;
                }
                EXON_STORE_REL(head_cache, head);
            }
            padding = to_buffer_end;
        }

        int64_t expected = tail;
        if (EXON_CAS(tail_position, &expected, tail + required + padding))
        {
            break;
        }
    }

    if (0 != padding)
    {
        store_header(ring, record_index, (int32_t)padding, EXON_RING_PADDING_TYPE);
        record_index = 0;
    }
    store_header(ring, record_index, -record_length, type);
    return (int32_t)(record_index + EXON_RING_RECORD_HEADER_LENGTH);
}

static int claimed_index(exon_ring_t *ring, int32_t offset, int32_t *length)
{
    int64_t index = (int64_t)offset - EXON_RING_RECORD_HEADER_LENGTH;
    if (index < 0 || index >= ring->capacity || (index & (EXON_RING_ALIGNMENT - 1)) != 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ring: offset %d is not a claimed record", offset);
    }
    int32_t stored = EXON_LOAD_ACQ(record_length_at(ring, index));
    if (stored >= 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ring: record at offset %d is not in progress", offset);
    }
    *length = -stored;
    return (int)index;
}

int exon_ring_commit(exon_ring_t *ring, int32_t offset)
{
    int32_t length = 0;
    int index = claimed_index(ring, offset, &length);
    if (index < 0)
    {
        return index;
    }
    EXON_STORE_REL(record_length_at(ring, index), length);
    return 0;
}

int exon_ring_abort(exon_ring_t *ring, int32_t offset)
{
    int32_t length = 0;
    int index = claimed_index(ring, offset, &length);
    if (index < 0)
    {
        return index;
    }
    EXON_STORE_RLX(record_type_at(ring, index), EXON_RING_PADDING_TYPE);
    EXON_STORE_REL(record_length_at(ring, index), length);
    return 0;
}

int exon_ring_write(exon_ring_t *ring, int32_t type, const void *src, int32_t length)
{
    int32_t offset = exon_ring_try_claim(ring, type, length);
    if (offset < 0)
    {
        return offset;
    }
    if (length > 0)
    {
        memcpy(ring->buffer + offset, src, (size_t)length);
    }
    EXON_STORE_REL(record_length_at(ring, offset - EXON_RING_RECORD_HEADER_LENGTH),
        length + EXON_RING_RECORD_HEADER_LENGTH);
    return 0;
}

uint8_t *exon_ring_payload(exon_ring_t *ring, int32_t offset)
{
    return ring->buffer + offset;
}

int64_t exon_ring_next_correlation_id(exon_ring_t *ring)
{
    return EXON_FETCH_ADD(ring_field(ring, EXON_RING_CORRELATION_COUNTER_OFFSET), 1);
}

int exon_ring_read_begin(exon_ring_t *ring, exon_ring_batch_t *batch, int32_t limit)
{
    batch->head = EXON_LOAD_RLX(ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET));
    batch->head_index = (int32_t)(batch->head & (ring->capacity - 1));
    batch->bytes_read = 0;
    batch->max_bytes = ring->capacity - batch->head_index;
    batch->records = 0;
    batch->limit = limit;
    return 0;
}

int exon_ring_read_next(
    exon_ring_t *ring, exon_ring_batch_t *batch, int32_t *type, int32_t *offset, int32_t *length)
{
    while (batch->bytes_read < batch->max_bytes && (batch->limit <= 0 || batch->records < batch->limit))
    {
        int64_t index = (int64_t)batch->head_index + batch->bytes_read;
        int32_t record_length = EXON_LOAD_ACQ(record_length_at(ring, index));
        if (record_length <= 0)
        {
            return 0;
        }
        batch->bytes_read += (int32_t)EXON_RING_ALIGN(record_length);
        int32_t record_type = *record_type_at(ring, index);
        if (EXON_RING_PADDING_TYPE == record_type)
        {
            continue;
        }
        batch->records++;
        *type = record_type;
        *offset = (int32_t)index + EXON_RING_RECORD_HEADER_LENGTH;
        *length = record_length - EXON_RING_RECORD_HEADER_LENGTH;
        return 1;
    }
    return 0;
}

int32_t exon_ring_read_end(exon_ring_t *ring, exon_ring_batch_t *batch)
{
    int32_t bytes = batch->bytes_read;
    if (bytes > 0)
    {
        memset(ring->buffer + batch->head_index, 0, (size_t)bytes);
        EXON_STORE_REL(ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET), batch->head + bytes);
    }
    batch->bytes_read = 0;
    return bytes;
}

int32_t exon_ring_read_copy(exon_ring_t *ring, uint8_t *dst, int32_t dst_capacity, int32_t limit)
{
    exon_ring_batch_t batch;
    exon_ring_read_begin(ring, &batch, limit);
    int32_t written = 0;
    while (batch.bytes_read < batch.max_bytes && (limit <= 0 || batch.records < limit))
    {
        int64_t index = (int64_t)batch.head_index + batch.bytes_read;
        int32_t record_length = EXON_LOAD_ACQ(record_length_at(ring, index));
        if (record_length <= 0)
        {
            break;
        }
        int32_t aligned = (int32_t)EXON_RING_ALIGN(record_length);
        if (EXON_RING_PADDING_TYPE != *record_type_at(ring, index))
        {
            if (written + aligned > dst_capacity)
            {
                break;
            }
            memcpy(dst + written, ring->buffer + index, (size_t)record_length);
            if (aligned > record_length)
            {
                memset(dst + written + record_length, 0, (size_t)(aligned - record_length));
            }
            written += aligned;
            batch.records++;
        }
        batch.bytes_read += aligned;
    }
    exon_ring_read_end(ring, &batch);
    return written;
}

/* The writer that claimed [from, to) may still be writing; confirm nothing appeared there. */
static bool still_zeroed(const exon_ring_t *ring, int64_t from, int64_t to)
{
    for (int64_t i = to - EXON_RING_ALIGNMENT; i >= from; i -= EXON_RING_ALIGNMENT)
    {
        if (0 != EXON_LOAD_ACQ(record_length_at(ring, i)))
        {
            return false;
        }
    }
    return true;
}

int exon_ring_unblock(exon_ring_t *ring)
{
    const int64_t mask = ring->capacity - 1;
    int64_t head = EXON_LOAD_RLX(ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET));
    int64_t tail = EXON_LOAD_ACQ(ring_field(ring, EXON_RING_TAIL_POSITION_OFFSET));
    if (tail <= head)
    {
        return 0;
    }
    int64_t consumer_index = head & mask;
    int64_t producer_index = tail & mask;
    int32_t length = EXON_LOAD_ACQ(record_length_at(ring, consumer_index));
    if (length < 0)
    {
        store_header(ring, consumer_index, -length, EXON_RING_PADDING_TYPE);
        return 1;
    }
    if (0 == length)
    {
        int64_t limit = producer_index > consumer_index ? producer_index : ring->capacity;
        for (int64_t i = consumer_index + EXON_RING_ALIGNMENT; i < limit; i += EXON_RING_ALIGNMENT)
        {
            if (0 != EXON_LOAD_ACQ(record_length_at(ring, i)))
            {
                if (still_zeroed(ring, consumer_index, i))
                {
                    store_header(ring, consumer_index, (int32_t)(i - consumer_index), EXON_RING_PADDING_TYPE);
                    return 1;
                }
                break;
            }
        }
    }
    return 0;
}

int exon_ring_check_unblock(exon_ring_t *ring, int64_t now_ns, int64_t timeout_ns)
{
    int64_t head = EXON_LOAD_RLX(ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET));
    int64_t tail = EXON_LOAD_ACQ(ring_field(ring, EXON_RING_TAIL_POSITION_OFFSET));
    if (head != ring->unblock_last_head || tail <= head)
    {
        /* progress, or nothing pending: restart the timer */
        ring->unblock_last_head = head;
        ring->unblock_last_change_ns = now_ns;
        return 0;
    }
    if (now_ns - ring->unblock_last_change_ns < timeout_ns)
    {
        return 0;
    }
    if (exon_ring_unblock(ring))
    {
        ring->unblock_last_change_ns = now_ns;
        return 1;
    }
    return 0;
}

int64_t exon_ring_producer_position(const exon_ring_t *ring)
{
    return EXON_LOAD_ACQ(ring_field(ring, EXON_RING_TAIL_POSITION_OFFSET));
}

int64_t exon_ring_consumer_position(const exon_ring_t *ring)
{
    return EXON_LOAD_ACQ(ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET));
}

int64_t exon_ring_size(const exon_ring_t *ring)
{
    int64_t head_before;
    int64_t tail;
    int64_t head_after = EXON_LOAD_ACQ(ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET));
    do
    {
        head_before = head_after;
        tail = EXON_LOAD_ACQ(ring_field(ring, EXON_RING_TAIL_POSITION_OFFSET));
        head_after = EXON_LOAD_ACQ(ring_field(ring, EXON_RING_HEAD_POSITION_OFFSET));
    }
    while (head_after != head_before);
    return tail - head_after;
}

int64_t exon_ring_consumer_heartbeat_time(const exon_ring_t *ring)
{
    return EXON_LOAD_ACQ(ring_field(ring, EXON_RING_CONSUMER_HEARTBEAT_OFFSET));
}

void exon_ring_set_consumer_heartbeat_time(exon_ring_t *ring, int64_t now_ms)
{
    EXON_STORE_REL(ring_field(ring, EXON_RING_CONSUMER_HEARTBEAT_OFFSET), now_ms);
}
