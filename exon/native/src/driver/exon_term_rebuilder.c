/* exon_term_rebuilder.c: out-of-order insertion into image terms, and the gap scanner. */
#include <string.h>

#include "driver/exon_term_rebuilder.h"

static inline int32_t frame_length_acquire(const uint8_t *term, int32_t offset)
{
    return EXON_LOAD_ACQ((const int32_t *)(term + offset));
}

int exon_term_rebuilder_insert(
    uint8_t *term, int32_t term_length, int32_t term_offset, const uint8_t *packet, int32_t length)
{
    if (NULL == term || NULL == packet || term_offset < 0 || length < EXON_DATA_HEADER_LENGTH ||
        (term_offset & (EXON_FRAME_ALIGNMENT - 1)) || (length & (EXON_FRAME_ALIGNMENT - 1)) ||
        (int64_t)term_offset + length > term_length)
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "term rebuilder: packet of %d bytes at offset %d does not fit a term of %d",
            length, term_offset, term_length);
    }
    int inserted = 0;
    int32_t pos = 0;
    while (pos + EXON_DATA_HEADER_LENGTH <= length)
    {
        const exon_data_header_t *src = (const exon_data_header_t *)(packet + pos);
        int32_t frame_length = src->frame_header.frame_length;
        int32_t wire;
        if (src->frame_header.type == EXON_HDR_TYPE_PAD)
        {
            wire = EXON_DATA_HEADER_LENGTH;
        }
        else if (frame_length <= 0)
        {
            break; /* a heartbeat: nothing to insert */
        }
        else
        {
            wire = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
            if (wire > length - pos)
            {
                break; /* the receiver validated this; never copy past the packet */
            }
        }
        if (frame_length <= 0)
        {
            break;
        }
        uint8_t *dest = term + term_offset + pos;
        if (0 == frame_length_acquire(term, term_offset + pos))
        {
            memcpy(dest + sizeof(int32_t), packet + pos + sizeof(int32_t), (size_t)wire - sizeof(int32_t));
            EXON_STORE_REL((int32_t *)dest, frame_length);
            inserted++;
        }
        pos += wire;
    }
    return inserted;
}

int32_t exon_term_gap_scan(
    const uint8_t *term, int32_t term_length, int32_t offset, int32_t limit_offset, int32_t *gap_length)
{
    *gap_length = 0;
    if (limit_offset > term_length)
    {
        limit_offset = term_length;
    }
    if (offset < 0)
    {
        offset = 0;
    }
    offset &= ~(EXON_FRAME_ALIGNMENT - 1);
    while (offset < limit_offset)
    {
        int32_t frame_length = frame_length_acquire(term, offset);
        if (frame_length <= 0)
        {
            break;
        }
        int64_t next = (int64_t)offset + EXON_ALIGN((int64_t)frame_length, EXON_FRAME_ALIGNMENT);
        offset = next > term_length ? term_length : (int32_t)next;
    }
    if (offset < limit_offset)
    {
        int32_t end = offset + EXON_FRAME_ALIGNMENT;
        while (end < limit_offset && 0 == frame_length_acquire(term, end))
        {
            end += EXON_FRAME_ALIGNMENT;
        }
        *gap_length = (end < limit_offset ? end : limit_offset) - offset;
    }
    return offset;
}

bool exon_position_propose_max(int64_t *position, int64_t proposed)
{
    int64_t current = EXON_LOAD_ACQ(position);
    while (proposed > current)
    {
        if (EXON_CAS(position, &current, proposed))
        {
            return true;
        }
    }
    return false;
}
