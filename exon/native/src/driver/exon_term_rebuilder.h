/*
 * exon_term_rebuilder.h: put received DATA/PAD frames into an image's term, whatever the
 * order they arrive in, and the term gap scanner the loss detector uses.
 *
 * A datagram of DATA frames (already validated by the receiver: 32-byte aligned offset and
 * length, frames back to back, inside the term) is inserted frame by frame at
 * term_offset. A frame whose slot already holds a non-zero frame_length is a duplicate and
 * is skipped. Each frame is copied body first, then its frame_length is stored with release
 * semantics: a reader that sees a positive frame_length (acquire) sees the whole frame. A
 * PAD frame travels as its 32-byte header alone and is inserted as such.
 *
 * Thread-safety: one writer per term (the receiver agent); any number of readers.
 */
#ifndef EXON_TERM_REBUILDER_H
#define EXON_TERM_REBUILDER_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"

/*
 * Insert the frames of `packet` (length bytes) at term_offset of `term`.
 * Returns the number of frames inserted (duplicates and heartbeats are not counted),
 * or EXON_E_ARGUMENT when the packet does not fit the term or is not 32-byte aligned.
 */
int exon_term_rebuilder_insert(
    uint8_t *term, int32_t term_length, int32_t term_offset, const uint8_t *packet, int32_t length);

/*
 * Scan `term` from `offset` for the first gap below `limit_offset`. Returns the offset
 * where the contiguous frames end (may reach past limit_offset when a frame or a PAD
 * crosses it, never past term_length). When that offset is below limit_offset there is a
 * gap: *gap_length (> 0) is its length up to the next frame or limit_offset.
 */
int32_t exon_term_gap_scan(
    const uint8_t *term, int32_t term_length, int32_t offset, int32_t limit_offset, int32_t *gap_length);

/* Atomically raise *position to `proposed` if it is larger; returns true if it moved. */
bool exon_position_propose_max(int64_t *position, int64_t proposed);

#endif /* EXON_TERM_REBUILDER_H */
