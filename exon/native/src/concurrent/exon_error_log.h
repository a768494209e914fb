/*
 * exon_error_log.h: the driver's distinct error log (Aeron's DistinctErrorLog format).
 *
 * Records in a shared buffer, 64-byte aligned:
 *   +0  int32 length (header + text; 0 = end of log; release-stored last)
 *   +4  int32 observation count
 *   +8  int64 last observation timestamp (epoch ms)
 *   +16 int64 first observation timestamp (epoch ms)
 *   +24 text (UTF-8, length - 24 bytes, no NUL)
 * The same text observed again bumps the count and the last timestamp of its record
 * instead of adding one (dedup by exact text). When the buffer is full new distinct
 * errors are dropped (exon_error_log_record returns EXON_E_NO_SPACE); repeats still count.
 *
 * Thread safety: exon_error_log_record may be called from any thread of the process that
 * owns the handle (a process-local mutex serialises writers). Readers in any process use
 * exon_error_log_read while records are added: they see whole records only.
 */
#ifndef EXON_ERROR_LOG_H
#define EXON_ERROR_LOG_H

#include <stdint.h>
#include <pthread.h>

#include "common/exon_common.h"

#define EXON_ERROR_LOG_HEADER_LENGTH 24
#define EXON_ERROR_LOG_ALIGNMENT 64
#define EXON_ERROR_LOG_OBSERVATION_COUNT_OFFSET 4
#define EXON_ERROR_LOG_LAST_TIMESTAMP_OFFSET 8
#define EXON_ERROR_LOG_FIRST_TIMESTAMP_OFFSET 16
#define EXON_ERROR_LOG_MAX_TEXT_LENGTH 4000

typedef struct exon_error_log_stct
{
    uint8_t *buffer;
    int64_t length;
    int64_t next_offset;   /* writer: where the next distinct record goes */
    pthread_mutex_t lock;
}
exon_error_log_t;

/* Attach (scans existing records to find the end). 0 or EXON_E_ARGUMENT. */
int exon_error_log_init(exon_error_log_t *log, void *buffer, int64_t length);
void exon_error_log_close(exon_error_log_t *log);
/*
 * Record one observation of `text` (text_length bytes, truncated to 4000) at now_ms.
 * Returns 1 if a new distinct record was added, 0 if an existing one was bumped,
 * EXON_E_NO_SPACE if the log is full.
 */
int exon_error_log_record(exon_error_log_t *log, int64_t now_ms, const char *text, int32_t text_length);

/*
 * Reader: read the record at `offset` (start with 0). Returns the offset of the next
 * record (> offset) with the fields set, or 0 when there is no record at offset.
 * text points into the buffer (text_length bytes).
 */
int64_t exon_error_log_read(
    const uint8_t *buffer,
    int64_t length,
    int64_t offset,
    int32_t *observation_count,
    int64_t *first_timestamp_ms,
    int64_t *last_timestamp_ms,
    int32_t *text_offset,
    int32_t *text_length);
/* Number of distinct errors in the buffer. */
int32_t exon_error_log_count(const uint8_t *buffer, int64_t length);

#endif /* EXON_ERROR_LOG_H */
