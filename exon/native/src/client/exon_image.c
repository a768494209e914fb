/* exon_image.c: scanning a log from the subscriber position, fragment reassembly, waiting. */
#include <stdlib.h>
#include <string.h>

#include "client/exon_image.h"

#define ASSEMBLY_INITIAL_CAPACITY (64 * 1024)

int exon_image_init(
    exon_image_t *img, exon_log_t *log, int64_t *subscriber_position, uint8_t *counters_values)
{
    if (log == NULL || log->meta == NULL || subscriber_position == NULL)
    {
        return exon_set_error(EXON_E_ARGUMENT, "image: log (open) and subscriber_position are required");
    }
    memset(img, 0, sizeof(*img));
    img->log = log;
    img->meta = log->meta;
    for (int i = 0; i < EXON_LOG_PARTITION_COUNT; i++)
    {
        img->terms[i] = log->terms[i];
    }
    img->subscriber_position = subscriber_position;
    img->counters_values = counters_values;
    img->term_length = log->term_length;
    img->position_bits_to_shift = log->position_bits_to_shift;
    img->initial_term_id = log->initial_term_id;
    img->max_message_length = log->max_message_length;
    return 0;
}

void exon_image_close(exon_image_t *img)
{
    img->closed = 1;
    free(img->assembly);
    img->assembly = NULL;
    img->assembly_capacity = 0;
    img->assembly_length = 0;
    img->assembly_fragments = 0;
}

static void assembly_reset(exon_image_t *img)
{
    img->assembly_length = 0;
    img->assembly_fragments = 0;
}

/* Append a fragment to the assembly buffer; on failure or an oversized message the partial
 * message is dropped (returns < 0). */
static int assembly_append(exon_image_t *img, const uint8_t *data, int32_t length)
{
    int64_t needed = (int64_t)img->assembly_length + length;
    if (needed > (int64_t)img->max_message_length)
    {
        assembly_reset(img);
        return EXON_E_MESSAGE_TOO_LARGE;
    }
    if (needed > img->assembly_capacity)
    {
        int64_t capacity = img->assembly_capacity > 0 ? img->assembly_capacity : ASSEMBLY_INITIAL_CAPACITY;
        while (capacity < needed)
        {
            capacity *= 2;
        }
        if (capacity > img->max_message_length)
        {
            capacity = img->max_message_length;
        }
        uint8_t *grown = realloc(img->assembly, (size_t)capacity);
        if (grown == NULL)
        {
            assembly_reset(img);
            return -ENOMEM;
        }
        img->assembly = grown;
        img->assembly_capacity = (int32_t)capacity;
    }
    memcpy(img->assembly + img->assembly_length, data, (size_t)length);
    img->assembly_length += length;
    img->assembly_fragments++;
    return 0;
}

/*
 * The committed frame at term + offset, or 0 when none: length <= 0 (not committed), a
 * frame from an older term (a region not yet reused), or an impossible length (stops the
 * scan; *corrupt set).
 */
static inline int32_t committed_frame(
    const uint8_t *term, int32_t offset, int32_t term_length, int32_t expected_term_id, int *corrupt)
{
    int32_t frame_length = EXON_LOAD_ACQ((const int32_t *)(term + offset));
    if (frame_length <= 0)
    {
        return 0;
    }
    const exon_data_header_t *hdr = (const exon_data_header_t *)(term + offset);
    if (EXON_UNLIKELY(hdr->term_id != expected_term_id))
    {
        return 0;
    }
    if (EXON_UNLIKELY(frame_length < EXON_DATA_HEADER_LENGTH ||
        EXON_ALIGN((int64_t)frame_length, EXON_FRAME_ALIGNMENT) > (int64_t)(term_length - offset)))
    {
        *corrupt = 1;
        return 0;
    }
    return frame_length;
}

static inline void fill_fragment(
    exon_fragment_t *f, const exon_data_header_t *hdr, int64_t position, int32_t offset, int32_t length,
    int32_t fragments)
{
    f->position = position;
    f->reserved_value = hdr->reserved_value;
    f->offset = offset;
    f->length = length;
    f->term_id = hdr->term_id;
    f->term_offset = hdr->term_offset;
    f->session_id = hdr->session_id;
    f->stream_id = hdr->stream_id;
    f->flags = hdr->frame_header.flags;
    f->fragments = fragments;
}

int exon_image_poll(
    exon_image_t *img,
    exon_fragment_t *out,
    int32_t max_messages,
    int32_t fragment_limit,
    uint8_t *copy_buf,
    int32_t copy_cap,
    int32_t *copy_used)
{
    *copy_used = 0;
    if (EXON_UNLIKELY(img->closed))
    {
        return 0;
    }
    const int32_t term_length = img->term_length;
    const int32_t bits = img->position_bits_to_shift;
    const int64_t start = EXON_LOAD_RLX(img->subscriber_position);
    int64_t position = start;
    int32_t fragments = 0;
    int32_t messages = 0;
    int32_t used = 0;
    int rc = 0;
    int corrupt = 0;
    bool stop = false;

    /* fragment_limit stops a poll only between messages: a message begun in this call is
     * completed if its frames are committed, so 0 means "nothing more available now". */
    while (!stop && (fragments < fragment_limit || img->assembly_fragments > 0) && messages < max_messages)
    {
        const uint8_t *term = img->terms[exon_log_index_by_position(position, bits)];
        int32_t term_id = exon_log_term_id_by_position(position, bits, img->initial_term_id);
        int32_t offset = exon_log_term_offset_by_position(position, term_length);
        int32_t term_start = offset;

        while ((fragments < fragment_limit || img->assembly_fragments > 0) && messages < max_messages &&
            offset < term_length)
        {
            int32_t frame_length = committed_frame(term, offset, term_length, term_id, &corrupt);
            if (frame_length == 0)
            {
                stop = true;
                break;
            }
            int32_t aligned = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
            const exon_data_header_t *hdr = (const exon_data_header_t *)(term + offset);
            if (hdr->frame_header.type == EXON_HDR_TYPE_PAD)
            {
                offset += aligned;
                continue;
            }
            const uint8_t *payload = term + offset + EXON_DATA_HEADER_LENGTH;
            int32_t payload_length = frame_length - EXON_DATA_HEADER_LENGTH;
            uint8_t flags = hdr->frame_header.flags;
            int64_t after = position + (offset - term_start) + aligned;

            if ((flags & EXON_DATA_FLAG_UNFRAGMENTED) == EXON_DATA_FLAG_UNFRAGMENTED)
            {
                if (used + (int64_t)payload_length > copy_cap)
                {
                    if (messages == 0)
                    {
                        *copy_used = payload_length;
                        rc = EXON_E_FULL;
                    }
                    stop = true;
                    break;
                }
                memcpy(copy_buf + used, payload, (size_t)payload_length);
                fill_fragment(&out[messages++], hdr, after, used, payload_length, 1);
                used += payload_length;
            }
            else if (flags & EXON_DATA_FLAG_BEGIN)
            {
                assembly_reset(img);
                int arc = assembly_append(img, payload, payload_length);
                if (arc == -ENOMEM)
                {
                    rc = exon_set_error(-ENOMEM, "image: out of memory assembling a message");
                    stop = true;
                    break;
                }
            }
            else if (img->assembly_fragments > 0) /* else: joined mid-message, drop */
            {
                if (flags & EXON_DATA_FLAG_END)
                {
                    int64_t total = (int64_t)img->assembly_length + payload_length;
                    if (total > img->max_message_length)
                    {
                        assembly_reset(img); /* cannot come from a valid publisher: drop */
                    }
                    else if (used + total > copy_cap)
                    {
                        if (messages == 0)
                        {
                            *copy_used = (int32_t)total;
                            rc = EXON_E_FULL;
                        }
                        stop = true;
                        break;
                    }
                    else
                    {
                        memcpy(copy_buf + used, img->assembly, (size_t)img->assembly_length);
                        memcpy(copy_buf + used + img->assembly_length, payload, (size_t)payload_length);
                        fill_fragment(&out[messages++], hdr, after, used, (int32_t)total, img->assembly_fragments + 1);
                        used += (int32_t)total;
                        assembly_reset(img);
                    }
                }
                else
                {
                    int arc = assembly_append(img, payload, payload_length);
                    if (arc == -ENOMEM)
                    {
                        rc = exon_set_error(-ENOMEM, "image: out of memory assembling a message");
                        stop = true;
                        break;
                    }
                }
            }
            fragments++;
            offset += aligned;
        }
        position += offset - term_start;
        if (offset < term_length)
        {
            break; /* stopped inside the term */
        }
    }

    if (position != start)
    {
        EXON_STORE_REL(img->subscriber_position, position);
    }
    *copy_used = rc == EXON_E_FULL ? *copy_used : used;
    if (rc < 0)
    {
        return rc;
    }
    if (corrupt && messages == 0)
    {
        return exon_set_error(EXON_E_LOG_CORRUPT, "log buffer %s: invalid frame length at position %lld",
            img->log->path, (long long)position);
    }
    return messages;
}

int exon_image_poll_count(exon_image_t *img, int32_t fragment_limit, int64_t *bytes)
{
    if (EXON_UNLIKELY(img->closed))
    {
        return 0;
    }
    const int32_t term_length = img->term_length;
    const int32_t bits = img->position_bits_to_shift;
    const int64_t start = EXON_LOAD_RLX(img->subscriber_position);
    int64_t position = start;
    int32_t fragments = 0;
    int32_t messages = 0;
    int64_t total = 0;
    int corrupt = 0;
    bool stop = false;

    assembly_reset(img);
    while (!stop && fragments < fragment_limit)
    {
        const uint8_t *term = img->terms[exon_log_index_by_position(position, bits)];
        int32_t term_id = exon_log_term_id_by_position(position, bits, img->initial_term_id);
        int32_t offset = exon_log_term_offset_by_position(position, term_length);
        int32_t term_start = offset;
        while (fragments < fragment_limit && offset < term_length)
        {
            int32_t frame_length = committed_frame(term, offset, term_length, term_id, &corrupt);
            if (frame_length == 0)
            {
                stop = true;
                break;
            }
            const exon_data_header_t *hdr = (const exon_data_header_t *)(term + offset);
            if (hdr->frame_header.type != EXON_HDR_TYPE_PAD)
            {
                fragments++;
                total += frame_length - EXON_DATA_HEADER_LENGTH;
                if (hdr->frame_header.flags & EXON_DATA_FLAG_END)
                {
                    messages++;
                }
            }
            offset += EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
        }
        position += offset - term_start;
        if (offset < term_length)
        {
            break;
        }
    }
    if (position != start)
    {
        EXON_STORE_REL(img->subscriber_position, position);
    }
    if (bytes != NULL)
    {
        *bytes = total;
    }
    return messages;
}

int32_t exon_image_available(exon_image_t *img)
{
    if (img->closed)
    {
        return 0;
    }
    int64_t position = EXON_LOAD_RLX(img->subscriber_position);
    const int32_t bits = img->position_bits_to_shift;
    const uint8_t *term = img->terms[exon_log_index_by_position(position, bits)];
    int32_t term_id = exon_log_term_id_by_position(position, bits, img->initial_term_id);
    int32_t offset = exon_log_term_offset_by_position(position, img->term_length);
    int corrupt = 0;
    int32_t frame_length = committed_frame(term, offset, img->term_length, term_id, &corrupt);
    return frame_length > 0 ? EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT) : 0;
}

int64_t exon_image_position(exon_image_t *img)
{
    return EXON_LOAD_ACQ(img->subscriber_position);
}

int exon_image_set_position(exon_image_t *img, int64_t position)
{
    if (position < 0 || (position & (EXON_FRAME_ALIGNMENT - 1)) != 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "image position %lld is not a non-negative multiple of 32",
            (long long)position);
    }
    assembly_reset(img);
    EXON_STORE_REL(img->subscriber_position, position);
    return 0;
}

int64_t exon_image_end_of_stream_position(exon_image_t *img)
{
    return EXON_LOAD_ACQ(&img->meta->end_of_stream_position);
}

int exon_image_is_end_of_stream(exon_image_t *img)
{
    return EXON_LOAD_ACQ(img->subscriber_position) >= EXON_LOAD_ACQ(&img->meta->end_of_stream_position);
}

int exon_term_scan(
    const uint8_t *term,
    int32_t term_offset,
    int32_t limit_offset,
    exon_frame_info_t *out,
    int32_t max_frames,
    int32_t *next_offset)
{
    int32_t count = 0;
    int32_t offset = term_offset;
    while (count < max_frames && offset < limit_offset)
    {
        int32_t frame_length = EXON_LOAD_ACQ((const int32_t *)(term + offset));
        if (frame_length <= 0)
        {
            break;
        }
        int32_t aligned = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
        if (frame_length < EXON_DATA_HEADER_LENGTH || (int64_t)offset + aligned > limit_offset)
        {
            break; /* invalid or crossing the limit: stop, like the image */
        }
        const exon_data_header_t *hdr = (const exon_data_header_t *)(term + offset);
        out[count].term_offset = offset;
        out[count].frame_length = frame_length;
        out[count].type = hdr->frame_header.type;
        out[count].flags = hdr->frame_header.flags;
        count++;
        offset += aligned;
    }
    *next_offset = offset;
    return count;
}

static bool any_available(exon_image_t **images, int32_t count)
{
    for (int32_t i = 0; i < count; i++)
    {
        if (images[i] != NULL && exon_image_available(images[i]) > 0)
        {
            return true;
        }
    }
    return false;
}

static void add_waiters(exon_image_t **images, int32_t count, int32_t delta)
{
    for (int32_t i = 0; i < count; i++)
    {
        if (images[i] != NULL && !images[i]->closed)
        {
            EXON_FETCH_ADD(&images[i]->meta->exon_waiters, delta);
        }
    }
}

int exon_image_wait(exon_image_t **images, int32_t count, int32_t *doorbell, int64_t timeout_ns)
{
    int64_t now = exon_nano_clock();
    int64_t deadline = timeout_ns >= 0 ? now + timeout_ns : INT64_MAX;
    int64_t next_wait = EXON_DOORBELL_FIRST_WAIT_NS;

    if (any_available(images, count))
    {
        return 1;
    }
    for (;;)
    {
        int32_t bell = EXON_LOAD_ACQ(doorbell);
        exon_doorbell_arm(doorbell);
        add_waiters(images, count, 1);
        EXON_FENCE_SEQ();
        bool has_data = any_available(images, count);
        if (!has_data)
        {
            int64_t remaining = deadline - now;
            int64_t wait = remaining < next_wait ? remaining : next_wait;
            if (wait > 0)
            {
                exon_doorbell_wait(doorbell, bell, wait);
            }
        }
        add_waiters(images, count, -1);
        if (has_data || any_available(images, count))
        {
            return 1;
        }
        if (EXON_LOAD_ACQ(doorbell) != bell)
        {
            return 0; /* rung for something else (e.g. a new image) */
        }
        now = exon_nano_clock();
        if (now >= deadline)
        {
            return EXON_E_TIMEOUT;
        }
        next_wait = next_wait < EXON_DOORBELL_NEXT_WAIT_NS ? EXON_DOORBELL_NEXT_WAIT_NS : next_wait * 4;
        if (next_wait > EXON_DOORBELL_MAX_WAIT_NS)
        {
            next_wait = EXON_DOORBELL_MAX_WAIT_NS;
        }
    }
}
