/*
 * exon_frame_check.h: structural validation of a received datagram before any field of
 * it is trusted. The C twin of exon.transport.aeron.frames.split_datagram (same accept /
 * reject decisions, parity-tested): a datagram is one control frame whose frame_length is
 * the datagram length, or DATA frames back to back at 32-byte alignment (a heartbeat
 * alone, a PAD header only as the last frame). No error text is recorded (garbage is
 * counted, not reported): the reason code says what was wrong.
 *
 * Thread-safety: pure function.
 */
#ifndef EXON_FRAME_CHECK_H
#define EXON_FRAME_CHECK_H

#include <stdint.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"

#define EXON_FRAME_OK 0
#define EXON_FRAME_SHORT 1
#define EXON_FRAME_OVERSIZED 2
#define EXON_FRAME_BAD_VERSION 3
#define EXON_FRAME_UNKNOWN_TYPE 4
#define EXON_FRAME_BAD_LENGTH 5

typedef struct exon_datagram_info_stct
{
    int32_t type;          /* type of the first frame */
    int32_t frame_count;   /* frames in the datagram */
    int32_t reason;        /* EXON_FRAME_* */
}
exon_datagram_info_t;

/* 0 when the datagram is well formed (info filled), EXON_E_ARGUMENT otherwise (info->reason). */
int exon_datagram_check(const uint8_t *data, int32_t length, exon_datagram_info_t *info);

#endif /* EXON_FRAME_CHECK_H */
