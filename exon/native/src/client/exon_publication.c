/* exon_publication.c: concurrent and exclusive appends to a log buffer (Aeron's algorithm). */
#include <string.h>

#include "client/exon_publication.h"

int exon_publication_init(
    exon_publication_t *pub,
    exon_log_t *log,
    int64_t *position_limit,
    uint8_t *counters_values,
    int32_t exclusive)
{
    if (log == NULL || log->meta == NULL || position_limit == NULL)
    {
        return exon_set_error(EXON_E_ARGUMENT, "publication: log (open) and position_limit are required");
    }
    memset(pub, 0, sizeof(*pub));
    pub->log = log;
    pub->meta = log->meta;
    for (int i = 0; i < EXON_LOG_PARTITION_COUNT; i++)
    {
        pub->terms[i] = log->terms[i];
    }
    pub->position_limit = position_limit;
    pub->counters_values = counters_values;
    pub->term_length = log->term_length;
    pub->position_bits_to_shift = log->position_bits_to_shift;
    pub->initial_term_id = log->initial_term_id;
    pub->session_id = log->session_id;
    pub->stream_id = log->stream_id;
    pub->max_payload_length = log->mtu - EXON_DATA_HEADER_LENGTH;
    pub->max_message_length = log->max_message_length;
    pub->max_possible_position = exon_log_max_possible_position(log->term_length);
    pub->exclusive = exclusive != 0;
    pub->closed = 0;
    return 0;
}

/* ---- frames ---- */

/* First 8 bytes in one release store: frame_length = -length (not committed), version,
 * flags, type; then the rest of the header with plain stores. */
static inline void frame_begin(
    exon_publication_t *pub, uint8_t *frame, int32_t frame_length, uint8_t flags, int16_t type,
    int32_t term_offset, int32_t term_id, int64_t reserved_value)
{
    uint64_t word = (uint64_t)(uint32_t)(-frame_length) |
        ((uint64_t)(uint8_t)EXON_FRAME_VERSION << 32) |
        ((uint64_t)flags << 40) |
        ((uint64_t)(uint16_t)type << 48);
    exon_data_header_t *hdr = (exon_data_header_t *)frame;
    EXON_STORE_REL((int64_t *)frame, (int64_t)word);
    hdr->term_offset = term_offset;
    hdr->session_id = pub->session_id;
    hdr->stream_id = pub->stream_id;
    hdr->term_id = term_id;
    hdr->reserved_value = reserved_value;
}

static inline void frame_commit(uint8_t *frame, int32_t frame_length)
{
    EXON_STORE_REL((int32_t *)frame, frame_length);
}

static inline void ring_if_waiters(exon_publication_t *pub)
{
    if (EXON_UNLIKELY(EXON_LOAD_RLX(&pub->meta->exon_waiters) > 0))
    {
        exon_log_ring_doorbells(pub->meta, pub->counters_values, pub->agent_ring, pub->agent_ring_ctx);
    }
}

static inline void copy_pieces(
    uint8_t *dst, const char *a, int32_t a_length, const char *b, int32_t b_length, int64_t from, int32_t n)
{
    if (from < a_length)
    {
        int32_t k = (int32_t)(a_length - from) < n ? (int32_t)(a_length - from) : n;
        memcpy(dst, a + from, (size_t)k);
        dst += k;
        n -= k;
        from += k;
    }
    if (n > 0)
    {
        memcpy(dst, b + (from - a_length), (size_t)n);
    }
}

/* ---- tail, rotation, flow control ---- */

static inline int64_t reserve(exon_publication_t *pub, int64_t *tail, int64_t seen_raw_tail, int32_t length)
{
    if (pub->exclusive)
    {
        EXON_STORE_REL(tail, seen_raw_tail + length);
        return seen_raw_tail;
    }
    return EXON_FETCH_ADD(tail, (int64_t)length);
}

/* Aeron's rotate: move the next partition's tail to the next term id (only if it still
 * holds the term three back), then advance active_term_count from term_count. */
static void rotate_log(exon_log_metadata_t *meta, int32_t term_count, int32_t term_id)
{
    int32_t next_term_id = (int32_t)((uint32_t)term_id + 1);
    int32_t next_term_count = term_count + 1;
    int32_t next_index = exon_log_index_by_term_count(next_term_count);
    int32_t expected_term_id = (int32_t)((uint32_t)next_term_id - EXON_LOG_PARTITION_COUNT);
    int64_t new_raw_tail = exon_log_pack_tail(next_term_id, 0);
    int64_t *tail = &meta->term_tail_counters[next_index];
    int64_t raw_tail;
    do
    {
        raw_tail = EXON_LOAD_ACQ(tail);
        if (exon_log_tail_term_id(raw_tail) != expected_term_id)
        {
            break;
        }
    }
    while (!EXON_CAS(tail, &raw_tail, new_raw_tail));
    int32_t expected_count = term_count;
    EXON_CAS(&meta->active_term_count, &expected_count, next_term_count);
}

/* The claim at term_offset went past the end of the term: pad the rest (if this claim
 * straddles the end) and rotate. */
static int64_t trip(exon_publication_t *pub, uint8_t *term, int64_t term_offset, int32_t term_id, int32_t term_count)
{
    if (term_offset < pub->term_length)
    {
        int32_t pad_length = pub->term_length - (int32_t)term_offset;
        uint8_t *frame = term + term_offset;
        frame_begin(pub, frame, pad_length, EXON_DATA_FLAG_UNFRAGMENTED, EXON_HDR_TYPE_PAD,
            (int32_t)term_offset, term_id, 0);
        frame_commit(frame, pad_length);
    }
    rotate_log(pub->meta, term_count, term_id);
    return EXON_PUBLICATION_ADMIN_ACTION;
}

static int64_t back_pressure_status(exon_publication_t *pub, int64_t position, int32_t length)
{
    if (position + EXON_ALIGN((int64_t)length + EXON_DATA_HEADER_LENGTH, EXON_FRAME_ALIGNMENT) >=
        pub->max_possible_position)
    {
        return EXON_PUBLICATION_MAX_POSITION_EXCEEDED;
    }
    if (EXON_LOAD_ACQ(&pub->meta->is_connected) != 0)
    {
        return EXON_PUBLICATION_BACK_PRESSURED;
    }
    return EXON_PUBLICATION_NOT_CONNECTED;
}

/* Common entry checks. On success sets *term_count_out, *tail_out, *raw_tail_out and returns
 * 0; otherwise an outcome code. */
static inline int64_t begin_append(
    exon_publication_t *pub, int32_t length, int32_t *term_count_out, int64_t **tail_out, int64_t *raw_tail_out)
{
    if (EXON_UNLIKELY(pub->closed))
    {
        return EXON_PUBLICATION_CLOSED;
    }
    exon_log_metadata_t *meta = pub->meta;
    int64_t limit = EXON_LOAD_ACQ(pub->position_limit);
    int32_t term_count = EXON_LOAD_ACQ(&meta->active_term_count);
    int64_t *tail = &meta->term_tail_counters[exon_log_index_by_term_count(term_count)];
    int64_t raw_tail = EXON_LOAD_ACQ(tail);
    int32_t term_id = exon_log_tail_term_id(raw_tail);
    if (EXON_UNLIKELY(term_count != (int32_t)((uint32_t)term_id - (uint32_t)pub->initial_term_id)))
    {
        return EXON_PUBLICATION_ADMIN_ACTION; /* a rotation is in progress */
    }
    int64_t position = ((int64_t)term_count << pub->position_bits_to_shift) + (raw_tail & 0xFFFFFFFFLL);
    if (EXON_UNLIKELY(position >= limit))
    {
        return back_pressure_status(pub, position, length);
    }
    *term_count_out = term_count;
    *tail_out = tail;
    *raw_tail_out = raw_tail;
    return 0;
}

static inline int64_t term_begin_position(exon_publication_t *pub, int32_t term_id)
{
    int64_t term_count = (int32_t)((uint32_t)term_id - (uint32_t)pub->initial_term_id);
    return term_count << pub->position_bits_to_shift;
}

/*
 * Reserve one unfragmented frame for `length` payload bytes and write its header (not
 * committed yet). Returns the frame with *position the position after it, or NULL with
 * *position the outcome of the trip when the frame does not fit in the term.
 */
static inline uint8_t *begin_unfragmented(
    exon_publication_t *pub, int32_t term_count, int64_t *tail, int64_t seen_raw_tail, int32_t length,
    int64_t reserved_value, int64_t *position)
{
    int32_t frame_length = length + EXON_DATA_HEADER_LENGTH;
    int32_t aligned = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
    int64_t raw_tail = reserve(pub, tail, seen_raw_tail, aligned);
    int64_t term_offset = raw_tail & 0xFFFFFFFFLL;
    int32_t term_id = exon_log_tail_term_id(raw_tail);
    uint8_t *term = pub->terms[exon_log_index_by_term_count(term_count)];
    int64_t resulting_offset = term_offset + aligned;
    if (EXON_UNLIKELY(resulting_offset > pub->term_length))
    {
        *position = trip(pub, term, term_offset, term_id, term_count);
        return NULL;
    }
    uint8_t *frame = term + term_offset;
    frame_begin(pub, frame, frame_length, EXON_DATA_FLAG_UNFRAGMENTED, EXON_HDR_TYPE_DATA,
        (int32_t)term_offset, term_id, reserved_value);
    *position = term_begin_position(pub, term_id) + resulting_offset;
    return frame;
}

static int64_t append_unfragmented(
    exon_publication_t *pub, int32_t term_count, int64_t *tail, int64_t seen_raw_tail,
    const char *a, int32_t a_length, const char *b, int32_t b_length, int64_t reserved_value)
{
    int32_t length = a_length + b_length;
    int32_t frame_length = length + EXON_DATA_HEADER_LENGTH;
    int64_t position;
    uint8_t *frame = begin_unfragmented(pub, term_count, tail, seen_raw_tail, length, reserved_value, &position);
    if (EXON_UNLIKELY(NULL == frame))
    {
        return position;
    }
    if (a_length > 0)
    {
        memcpy(frame + EXON_DATA_HEADER_LENGTH, a, (size_t)a_length);
    }
    if (b_length > 0)
    {
        memcpy(frame + EXON_DATA_HEADER_LENGTH + a_length, b, (size_t)b_length);
    }
    frame_commit(frame, frame_length);
    ring_if_waiters(pub);
    return position;
}

static int64_t append_fragmented(
    exon_publication_t *pub, int32_t term_count, int64_t *tail, int64_t seen_raw_tail,
    const char *a, int32_t a_length, const char *b, int32_t b_length, int64_t reserved_value)
{
    int32_t length = a_length + b_length;
    int32_t max_payload = pub->max_payload_length;
    int32_t full_frames = length / max_payload;
    int32_t remainder = length % max_payload;
    int32_t last_frame = remainder > 0 ? EXON_ALIGN(remainder + EXON_DATA_HEADER_LENGTH, EXON_FRAME_ALIGNMENT) : 0;
    int32_t required = full_frames * EXON_ALIGN(max_payload + EXON_DATA_HEADER_LENGTH, EXON_FRAME_ALIGNMENT) + last_frame;

    int64_t raw_tail = reserve(pub, tail, seen_raw_tail, required);
    int64_t term_offset = raw_tail & 0xFFFFFFFFLL;
    int32_t term_id = exon_log_tail_term_id(raw_tail);
    uint8_t *term = pub->terms[exon_log_index_by_term_count(term_count)];
    int64_t resulting_offset = term_offset + required;
    if (EXON_UNLIKELY(resulting_offset > pub->term_length))
    {
        return trip(pub, term, term_offset, term_id, term_count);
    }

    int64_t offset = term_offset;
    int64_t consumed = 0;
    uint8_t flags = EXON_DATA_FLAG_BEGIN;
    while (consumed < length)
    {
        int32_t bytes = (length - consumed) < max_payload ? (int32_t)(length - consumed) : max_payload;
        int32_t frame_length = bytes + EXON_DATA_HEADER_LENGTH;
        uint8_t *frame = term + offset;
        if (consumed + bytes == length)
        {
            flags |= EXON_DATA_FLAG_END;
        }
        frame_begin(pub, frame, frame_length, flags, EXON_HDR_TYPE_DATA, (int32_t)offset, term_id, reserved_value);
        copy_pieces(frame + EXON_DATA_HEADER_LENGTH, a, a_length, b, b_length, consumed, bytes);
        frame_commit(frame, frame_length);
        offset += EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
        consumed += bytes;
        flags = 0;
    }
    ring_if_waiters(pub);
    return term_begin_position(pub, term_id) + resulting_offset;
}

static inline int64_t offer_pieces(
    exon_publication_t *pub, const char *a, int32_t a_length, const char *b, int32_t b_length, int64_t reserved_value)
{
    if (EXON_UNLIKELY(a_length < 0 || b_length < 0))
    {
        return exon_set_error(EXON_E_ARGUMENT, "offer: negative length");
    }
    int64_t length = (int64_t)a_length + b_length;
    if (EXON_UNLIKELY(length > pub->max_message_length))
    {
        return exon_set_error(EXON_E_MESSAGE_TOO_LARGE,
            "message of %lld bytes exceeds the maximum message length %d of this publication",
            (long long)length, pub->max_message_length);
    }
    int32_t term_count;
    int64_t *tail;
    int64_t raw_tail;
    int64_t rc = begin_append(pub, (int32_t)length, &term_count, &tail, &raw_tail);
    if (EXON_UNLIKELY(rc != 0))
    {
        return rc;
    }
    if (EXON_LIKELY(length <= pub->max_payload_length))
    {
        return append_unfragmented(pub, term_count, tail, raw_tail, a, a_length, b, b_length, reserved_value);
    }
    return append_fragmented(pub, term_count, tail, raw_tail, a, a_length, b, b_length, reserved_value);
}

int64_t exon_publication_offer(exon_publication_t *pub, const char *buf, int32_t length, int64_t reserved_value)
{
    return offer_pieces(pub, buf, length, NULL, 0, reserved_value);
}

int64_t exon_publication_offer2(
    exon_publication_t *pub,
    const char *a,
    int32_t a_length,
    const char *b,
    int32_t b_length,
    int64_t reserved_value)
{
    return offer_pieces(pub, a, a_length, b, b_length, reserved_value);
}

int64_t exon_publication_try_claim(exon_publication_t *pub, int32_t length, exon_claim_t *claim)
{
    if (EXON_UNLIKELY(length < 0 || length > pub->max_payload_length))
    {
        return exon_set_error(length < 0 ? EXON_E_ARGUMENT : EXON_E_MESSAGE_TOO_LARGE,
            "try_claim of %d bytes: must be in [0, max_payload_length %d]", length, pub->max_payload_length);
    }
    int32_t term_count;
    int64_t *tail;
    int64_t seen_raw_tail;
    int64_t rc = begin_append(pub, length, &term_count, &tail, &seen_raw_tail);
    if (EXON_UNLIKELY(rc != 0))
    {
        return rc;
    }
    int64_t position;
    uint8_t *frame = begin_unfragmented(pub, term_count, tail, seen_raw_tail, length, 0, &position);
    if (EXON_UNLIKELY(NULL == frame))
    {
        return position;
    }
    claim->frame = frame;
    claim->data = frame + EXON_DATA_HEADER_LENGTH;
    claim->length = length;
    claim->pub = pub;
    return position;
}

int exon_claim_commit(exon_claim_t *claim)
{
    if (claim->frame == NULL)
    {
        return exon_set_error(EXON_E_STATE, "claim already committed or aborted");
    }
    frame_commit(claim->frame, claim->length + EXON_DATA_HEADER_LENGTH);
    claim->frame = NULL;
    ring_if_waiters(claim->pub);
    return 0;
}

int exon_claim_abort(exon_claim_t *claim)
{
    if (claim->frame == NULL)
    {
        return exon_set_error(EXON_E_STATE, "claim already committed or aborted");
    }
    exon_data_header_t *hdr = (exon_data_header_t *)claim->frame;
    hdr->frame_header.type = EXON_HDR_TYPE_PAD;
    frame_commit(claim->frame, claim->length + EXON_DATA_HEADER_LENGTH);
    claim->frame = NULL;
    return 0;
}

void exon_claim_set_reserved_value(exon_claim_t *claim, int64_t reserved_value)
{
    if (claim->frame != NULL)
    {
        ((exon_data_header_t *)claim->frame)->reserved_value = reserved_value;
    }
}

int64_t exon_publication_position(exon_publication_t *pub)
{
    return exon_log_producer_position(pub->log);
}

int64_t exon_publication_position_limit(exon_publication_t *pub)
{
    return EXON_LOAD_ACQ(pub->position_limit);
}

int exon_publication_is_connected(exon_publication_t *pub)
{
    return EXON_LOAD_ACQ(&pub->meta->is_connected) != 0;
}

void exon_publication_close(exon_publication_t *pub)
{
    pub->closed = 1;
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

int exon_publication_is_closed(exon_publication_t *pub)
{
    return pub->closed != 0;
}
