/*
 * exon_image.h: reading a log buffer (Aeron's Image, client side): scan committed frames
 * from the subscriber position, skip padding, reassemble fragmented messages, advance the
 * subscriber position (a shared counter) with a release store.
 *
 * Thread safety: ONE reader thread per exon_image_t at a time (poll/scan/wait). The
 * position/end-of-stream getters may be called from any thread. Writers (publications in
 * any process) run concurrently; a frame whose length is <= 0 is not committed yet and
 * the scan stops there.
 */
#ifndef EXON_IMAGE_H
#define EXON_IMAGE_H

#include <stdint.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"
#include "concurrent/exon_logbuffer.h"
#include "concurrent/exon_doorbell.h"

/* One whole message returned by exon_image_poll; its bytes are copy_buf[offset, +length). */
typedef struct exon_fragment_stct
{
    int64_t position;                  /* stream position just after the message */
    int64_t reserved_value;            /* of the message's last frame */
    int32_t offset;                    /* into the caller's copy buffer */
    int32_t length;
    int32_t term_id;                   /* of the message's last frame */
    int32_t term_offset;               /* of the message's last frame */
    int32_t session_id;
    int32_t stream_id;
    int32_t flags;                     /* of the last frame (END set; BEGIN too if unfragmented) */
    int32_t fragments;                 /* frames the message spanned */
}
exon_fragment_t;

/* One raw frame returned by exon_term_scan (no reassembly). */
typedef struct exon_frame_info_stct
{
    int32_t term_offset;
    int32_t frame_length;
    int32_t type;
    int32_t flags;
}
exon_frame_info_t;

typedef struct exon_image_stct
{
    exon_log_t *log;                   /* not owned: must outlive the image */
    exon_log_metadata_t *meta;
    uint8_t *terms[EXON_LOG_PARTITION_COUNT];
    int64_t *subscriber_position;      /* shared counter (sub-pos), written only here */
    uint8_t *counters_values;          /* base of the counters values; may be NULL */
    uint8_t *assembly;                 /* private buffer for a fragmented message */
    int32_t assembly_length;           /* bytes assembled so far (0: none in progress) */
    int32_t assembly_capacity;
    int32_t assembly_fragments;
    int32_t term_length;
    int32_t position_bits_to_shift;
    int32_t initial_term_id;
    int32_t max_message_length;
    int32_t closed;
    /* The exon link table's fairness bookkeeping (exon_lt_poll), decaying: messages polled
     * and, of those, malformed (dropped natively). Zero at init; never read here. */
    int32_t lt_polled;
    int32_t lt_malformed;
}
exon_image_t;

/* Initialise over an open log; *subscriber_position is the start position (set by caller,
 * normally the join position). */
int exon_image_init(
    exon_image_t *img, exon_log_t *log, int64_t *subscriber_position, uint8_t *counters_values);

/* Free the assembly buffer; the image reads nothing afterwards (poll returns 0). */
void exon_image_close(exon_image_t *img);

/*
 * Poll whole messages: consume up to `fragment_limit` DATA frames (a fragmented message
 * begun within the limit is read to its end when committed, so a poll that returns 0 left
 * nothing whole behind), return at most `max_messages` messages in out[], copying each
 * message's bytes into copy_buf (from
 * offset 0; *copy_used = bytes used). Padding is skipped. Stops early at an uncommitted
 * frame, at the limits, or when the next message does not fit into copy_buf. Returns the
 * number of messages (>= 0), or EXON_E_FULL with *copy_used = the length needed when the
 * very first message does not fit (the caller grows copy_buf and retries; nothing is
 * lost). Advances the subscriber position past everything consumed.
 */
int exon_image_poll(
    exon_image_t *img,
    exon_fragment_t *out,
    int32_t max_messages,
    int32_t fragment_limit,
    uint8_t *copy_buf,
    int32_t copy_cap,
    int32_t *copy_used);

/* Consume up to fragment_limit frames without copying; counts whole messages and their
 * bytes (*bytes may be NULL). For benchmarks and draining. */
int exon_image_poll_count(exon_image_t *img, int32_t fragment_limit, int64_t *bytes);

/* > 0 (the aligned length of the frame) when a committed frame waits at the subscriber
 * position, 0 when nothing does. */
int32_t exon_image_available(exon_image_t *img);

int64_t exon_image_position(exon_image_t *img);
/* Move the subscriber position (e.g. to a join position); drops any partial message. */
int exon_image_set_position(exon_image_t *img, int64_t position);
int64_t exon_image_end_of_stream_position(exon_image_t *img);
/* 1 when the subscriber position reached meta->end_of_stream_position. */
int exon_image_is_end_of_stream(exon_image_t *img);

/*
 * Raw scan of one term (parity twin of exon/transport/aeron/fragments.py): report frames
 * from term_offset while offset < limit_offset and the frame is committed (length > 0),
 * at most max_frames, PAD frames included. Returns the count; *next_offset = offset after
 * the last reported frame.
 */
int exon_term_scan(
    const uint8_t *term,
    int32_t term_offset,
    int32_t limit_offset,
    exon_frame_info_t *out,
    int32_t max_frames,
    int32_t *next_offset);

/*
 * Sleep until one of `count` images has data, or timeout_ns passes (< 0: no limit).
 * Protocol (docs/internals.md): read the doorbell, increment exon_waiters of each image's
 * log, re-check for data, FUTEX_WAIT on the doorbell (50 us first, then longer), decrement.
 * Returns 1 when data is available, 0 when woken without data (spurious), EXON_E_TIMEOUT.
 */
int exon_image_wait(exon_image_t **images, int32_t count, int32_t *doorbell, int64_t timeout_ns);

#endif /* EXON_IMAGE_H */
