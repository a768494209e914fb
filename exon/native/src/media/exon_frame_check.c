/* exon_frame_check.c: datagram structure checks; see the header. */
#include <string.h>

#include "media/exon_frame_check.h"

static int reject(exon_datagram_info_t *info, int32_t reason)
{
    info->reason = reason;
    return EXON_E_ARGUMENT;
}

static int check_header(const uint8_t *data, int32_t length, int32_t offset, exon_datagram_info_t *info,
    int32_t *frame_length, int32_t *type)
{
    if (length - offset < (int32_t)sizeof(exon_frame_header_t))
    {
        return reject(info, EXON_FRAME_SHORT);
    }
    exon_frame_header_t hdr;
    memcpy(&hdr, data + offset, sizeof(hdr));
    if (hdr.version != EXON_FRAME_VERSION)
    {
        return reject(info, EXON_FRAME_BAD_VERSION);
    }
    if (hdr.frame_length < 0)
    {
        return reject(info, EXON_FRAME_BAD_LENGTH);
    }
    *frame_length = hdr.frame_length;
    *type = (uint16_t)hdr.type;
    return 0;
}

static int check_control(const uint8_t *data, int32_t length, int32_t frame_length, int32_t type,
    exon_datagram_info_t *info)
{
    if (frame_length != length)
    {
        return reject(info, EXON_FRAME_BAD_LENGTH);
    }
    switch (type)
    {
        case EXON_HDR_TYPE_SETUP:
            return frame_length == EXON_SETUP_LENGTH ? 0 : reject(info, EXON_FRAME_BAD_LENGTH);
        case EXON_HDR_TYPE_SM:
            return (frame_length == EXON_SM_LENGTH || frame_length == EXON_SM_WITH_GROUP_TAG_LENGTH) ?
                0 : reject(info, EXON_FRAME_BAD_LENGTH);
        case EXON_HDR_TYPE_NAK:
            return frame_length == EXON_NAK_LENGTH ? 0 : reject(info, EXON_FRAME_BAD_LENGTH);
        case EXON_HDR_TYPE_RTTM:
            return frame_length == EXON_RTTM_LENGTH ? 0 : reject(info, EXON_FRAME_BAD_LENGTH);
        case EXON_HDR_TYPE_ERR:
        {
            if (frame_length < EXON_ERR_HEADER_LENGTH)
            {
                return reject(info, EXON_FRAME_BAD_LENGTH);
            }
            int32_t text_length;
            memcpy(&text_length, data + offsetof(exon_err_header_t, error_length), sizeof(text_length));
            if (text_length < 0 || text_length > EXON_ERR_MAX_TEXT_LENGTH ||
                EXON_ERR_HEADER_LENGTH + text_length != frame_length)
            {
                return reject(info, EXON_FRAME_BAD_LENGTH);
            }
            return 0;
        }
        default: /* RES: opaque */
            return 0;
    }
}

int exon_datagram_check(const uint8_t *data, int32_t length, exon_datagram_info_t *info)
{
    memset(info, 0, sizeof(*info));
    if (length > EXON_MAX_UDP_PAYLOAD_LENGTH)
    {
        return reject(info, EXON_FRAME_OVERSIZED);
    }
    int32_t frame_length, type;
    int rc = check_header(data, length, 0, info, &frame_length, &type);
    if (rc < 0)
    {
        return rc;
    }
    info->type = type;
    switch (type)
    {
        case EXON_HDR_TYPE_SETUP:
        case EXON_HDR_TYPE_SM:
        case EXON_HDR_TYPE_NAK:
        case EXON_HDR_TYPE_RTTM:
        case EXON_HDR_TYPE_ERR:
        case EXON_HDR_TYPE_RES:
            if ((rc = check_control(data, length, frame_length, type, info)) < 0)
            {
                return rc;
            }
            info->frame_count = 1;
            return 0;
        case EXON_HDR_TYPE_DATA:
        case EXON_HDR_TYPE_PAD:
            break;
        default:
            return reject(info, EXON_FRAME_UNKNOWN_TYPE);
    }
    int32_t offset = 0;
    while (offset < length)
    {
        if ((rc = check_header(data, length, offset, info, &frame_length, &type)) < 0)
        {
            return rc;
        }
        if (type != EXON_HDR_TYPE_DATA && type != EXON_HDR_TYPE_PAD)
        {
            return reject(info, EXON_FRAME_UNKNOWN_TYPE);
        }
        int32_t available = length - offset;
        if (available < EXON_DATA_HEADER_LENGTH)
        {
            return reject(info, EXON_FRAME_SHORT);
        }
        int32_t wire;
        if (type == EXON_HDR_TYPE_PAD)
        {
            if (frame_length < EXON_DATA_HEADER_LENGTH || available != EXON_DATA_HEADER_LENGTH)
            {
                return reject(info, EXON_FRAME_BAD_LENGTH);
            }
            wire = EXON_DATA_HEADER_LENGTH;
        }
        else if (frame_length == 0)
        {
            if (length != EXON_DATA_HEADER_LENGTH)
            {
                return reject(info, EXON_FRAME_BAD_LENGTH);
            }
            wire = EXON_DATA_HEADER_LENGTH;
        }
        else
        {
            if (frame_length < EXON_DATA_HEADER_LENGTH)
            {
                return reject(info, EXON_FRAME_BAD_LENGTH);
            }
            wire = EXON_ALIGN(frame_length, EXON_FRAME_ALIGNMENT);
            if (wire > available)
            {
                return reject(info, EXON_FRAME_BAD_LENGTH);
            }
        }
        info->frame_count++;
        offset += wire;
    }
    return 0;
}
