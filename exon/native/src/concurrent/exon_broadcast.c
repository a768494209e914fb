/* exon_broadcast.c: one-to-many broadcast buffer. Layout and contract in exon_broadcast.h. */
#include <string.h>

#include "concurrent/exon_broadcast.h"

#define EXON_BROADCAST_ALIGN(v) (((v) + (EXON_BROADCAST_ALIGNMENT - 1)) & ~(EXON_BROADCAST_ALIGNMENT - 1))
#define EXON_BROADCAST_MAX_LAPS 64

static inline int64_t *trailer_field(uint8_t *buffer, int32_t capacity, int32_t offset)
{
    return (int64_t *)(buffer + capacity + offset);
}

static inline int32_t *length_at(uint8_t *buffer, int64_t index)
{
    return (int32_t *)(buffer + index);
}

static inline int32_t *type_at(uint8_t *buffer, int64_t index)
{
    return (int32_t *)(buffer + index + 4);
}

static int check_length(void *buffer, int64_t length, const char *who)
{
    int64_t capacity = length - EXON_BROADCAST_TRAILER_LENGTH;
    if (NULL == buffer || ((uintptr_t)buffer & 7) != 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "broadcast %s: NULL or unaligned buffer", who);
    }
    if (capacity < EXON_BROADCAST_MIN_CAPACITY || capacity > (1LL << 30) || (capacity & (capacity - 1)) != 0)
    {
        return exon_set_error(
            EXON_E_ARGUMENT, "broadcast %s: length %lld is not a power of two >= %d plus the %d-byte trailer",
            who, (long long)length, EXON_BROADCAST_MIN_CAPACITY, EXON_BROADCAST_TRAILER_LENGTH);
    }
    return (int)capacity;
}

int exon_broadcast_transmitter_init(exon_broadcast_transmitter_t *tx, void *buffer, int64_t length)
{
    int capacity = check_length(buffer, length, "transmitter");
    if (capacity < 0)
    {
        return capacity;
    }
    tx->buffer = (uint8_t *)buffer;
    tx->capacity = capacity;
    tx->max_message_length = capacity / 8 - EXON_BROADCAST_RECORD_HEADER_LENGTH;
    return 0;
}

int exon_broadcast_transmit(exon_broadcast_transmitter_t *tx, int32_t type, const void *msg, int32_t length)
{
    if (type < 1 || length < 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "broadcast: invalid type %d or length %d", type, length);
    }
    if (length > tx->max_message_length)
    {
        return exon_set_error(
            EXON_E_MESSAGE_TOO_LARGE, "broadcast: message of %d bytes exceeds the maximum %d",
            length, tx->max_message_length);
    }
    int64_t *tail_intent = trailer_field(tx->buffer, tx->capacity, EXON_BROADCAST_TAIL_INTENT_COUNTER_OFFSET);
    int64_t *tail_counter = trailer_field(tx->buffer, tx->capacity, EXON_BROADCAST_TAIL_COUNTER_OFFSET);
    int64_t *latest_counter = trailer_field(tx->buffer, tx->capacity, EXON_BROADCAST_LATEST_COUNTER_OFFSET);
    const int32_t record_length = length + EXON_BROADCAST_RECORD_HEADER_LENGTH;
    const int64_t aligned = EXON_BROADCAST_ALIGN(record_length);
    int64_t tail = EXON_LOAD_RLX(tail_counter);
    int64_t record_offset = tail & (tx->capacity - 1);
    const int64_t to_buffer_end = tx->capacity - record_offset;

    if (to_buffer_end < aligned)
    {
        EXON_STORE_RLX(tail_intent, tail + to_buffer_end + aligned);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        EXON_STORE_RLX(length_at(tx->buffer, record_offset), (int32_t)to_buffer_end);
        EXON_STORE_RLX(type_at(tx->buffer, record_offset), EXON_BROADCAST_PADDING_TYPE);
        tail += to_buffer_end;
        record_offset = 0;
    }
    else
    {
        EXON_STORE_RLX(tail_intent, tail + aligned);
        __atomic_thread_fence(__ATOMIC_RELEASE);
    }

    EXON_STORE_RLX(length_at(tx->buffer, record_offset), record_length);
    EXON_STORE_RLX(type_at(tx->buffer, record_offset), type);
    if (length > 0)
    {
        memcpy(tx->buffer + record_offset + EXON_BROADCAST_RECORD_HEADER_LENGTH, msg, (size_t)length);
    }
    EXON_STORE_REL(latest_counter, tail);
    EXON_STORE_REL(tail_counter, tail + aligned);
    return 0;
}

int exon_broadcast_receiver_init(exon_broadcast_receiver_t *rx, void *buffer, int64_t length)
{
    int capacity = check_length(buffer, length, "receiver");
    if (capacity < 0)
    {
        return capacity;
    }
    rx->buffer = (uint8_t *)buffer;
    rx->capacity = capacity;
    rx->max_message_length = capacity / 8 - EXON_BROADCAST_RECORD_HEADER_LENGTH;
    int64_t tail = EXON_LOAD_ACQ(trailer_field(rx->buffer, capacity, EXON_BROADCAST_TAIL_COUNTER_OFFSET));
    rx->cursor = tail;
    rx->next_record = tail;
    rx->record_offset = (int32_t)(tail & (capacity - 1));
    rx->pad0 = 0;
    rx->lapped_count = 0;
    return 0;
}

static bool valid_at(const exon_broadcast_receiver_t *rx, int64_t cursor)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    int64_t intent = EXON_LOAD_ACQ(
        trailer_field(rx->buffer, rx->capacity, EXON_BROADCAST_TAIL_INTENT_COUNTER_OFFSET));
    return (cursor + rx->capacity) > intent;
}

static bool sane_length(const exon_broadcast_receiver_t *rx, int64_t offset, int32_t length)
{
    return length >= EXON_BROADCAST_RECORD_HEADER_LENGTH && offset + length <= rx->capacity;
}

int exon_broadcast_receive_next(exon_broadcast_receiver_t *rx)
{
    const int64_t mask = rx->capacity - 1;
    int64_t tail = EXON_LOAD_ACQ(trailer_field(rx->buffer, rx->capacity, EXON_BROADCAST_TAIL_COUNTER_OFFSET));
    int64_t cursor = rx->next_record;
    if (tail <= cursor)
    {
        return 0;
    }
    int64_t record_offset = cursor & mask;
    int32_t length = EXON_LOAD_RLX(length_at(rx->buffer, record_offset));
    if (!valid_at(rx, cursor) || !sane_length(rx, record_offset, length))
    {
        rx->lapped_count++;
        cursor = EXON_LOAD_ACQ(trailer_field(rx->buffer, rx->capacity, EXON_BROADCAST_LATEST_COUNTER_OFFSET));
        record_offset = cursor & mask;
        length = EXON_LOAD_RLX(length_at(rx->buffer, record_offset));
        if (!sane_length(rx, record_offset, length))
        {
            length = EXON_BROADCAST_RECORD_HEADER_LENGTH; /* validate() will fail; skip ahead */
        }
    }
    int64_t next_record = cursor + EXON_BROADCAST_ALIGN(length);
    if (EXON_BROADCAST_PADDING_TYPE == EXON_LOAD_RLX(type_at(rx->buffer, record_offset)))
    {
        record_offset = 0;
        cursor = next_record;
        length = EXON_LOAD_RLX(length_at(rx->buffer, 0));
        if (!sane_length(rx, 0, length))
        {
            length = EXON_BROADCAST_RECORD_HEADER_LENGTH;
        }
        next_record += EXON_BROADCAST_ALIGN(length);
    }
    rx->cursor = cursor;
    rx->next_record = next_record;
    rx->record_offset = (int32_t)record_offset;
    return 1;
}

int32_t exon_broadcast_receiver_type(const exon_broadcast_receiver_t *rx)
{
    return EXON_LOAD_RLX(type_at(rx->buffer, rx->record_offset));
}

int32_t exon_broadcast_receiver_offset(const exon_broadcast_receiver_t *rx)
{
    return rx->record_offset + EXON_BROADCAST_RECORD_HEADER_LENGTH;
}

int32_t exon_broadcast_receiver_length(const exon_broadcast_receiver_t *rx)
{
    return EXON_LOAD_RLX(length_at(rx->buffer, rx->record_offset)) - EXON_BROADCAST_RECORD_HEADER_LENGTH;
}

bool exon_broadcast_receiver_validate(const exon_broadcast_receiver_t *rx)
{
    return valid_at(rx, rx->cursor);
}

int64_t exon_broadcast_receiver_lapped_count(const exon_broadcast_receiver_t *rx)
{
    return rx->lapped_count;
}

int exon_broadcast_receive(
    exon_broadcast_receiver_t *rx, int32_t *type, uint8_t *dst, int32_t dst_capacity, int32_t *length)
{
    if (dst_capacity < rx->max_message_length)
    {
        return exon_set_error(
            EXON_E_ARGUMENT, "broadcast: destination of %d bytes is smaller than the maximum message %d",
            dst_capacity, rx->max_message_length);
    }
    for (int attempt = 0; attempt < EXON_BROADCAST_MAX_LAPS; attempt++)
    {
        if (!exon_broadcast_receive_next(rx))
        {
            return 0;
        }
        int32_t record_type = exon_broadcast_receiver_type(rx);
        int32_t record_length = exon_broadcast_receiver_length(rx);
        if (record_length >= 0 && record_length <= dst_capacity && record_type != EXON_BROADCAST_PADDING_TYPE)
        {
            memcpy(dst, rx->buffer + exon_broadcast_receiver_offset(rx), (size_t)record_length);
            if (exon_broadcast_receiver_validate(rx))
            {
                *type = record_type;
                *length = record_length;
                return 1;
            }
        }
        else if (exon_broadcast_receiver_validate(rx))
        {
            continue; /* cannot happen with a sane transmitter; skip the record */
        }
        /* overwritten while we copied: restart from the latest record */
        rx->lapped_count++;
        rx->next_record = EXON_LOAD_ACQ(
            trailer_field(rx->buffer, rx->capacity, EXON_BROADCAST_LATEST_COUNTER_OFFSET));
    }
    return 0;
}
