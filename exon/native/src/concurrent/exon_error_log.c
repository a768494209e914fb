/* exon_error_log.c: distinct error log. Layout and contract in exon_error_log.h. */
#include <string.h>

#include "concurrent/exon_error_log.h"

#define EXON_ERROR_LOG_ALIGN(v) (((v) + (EXON_ERROR_LOG_ALIGNMENT - 1)) & ~((int64_t)EXON_ERROR_LOG_ALIGNMENT - 1))

static inline int32_t *length_at(const uint8_t *buffer, int64_t offset)
{
    return (int32_t *)(buffer + offset);
}

int exon_error_log_init(exon_error_log_t *log, void *buffer, int64_t length)
{
    if (NULL == log || NULL == buffer || length < 0 || ((uintptr_t)buffer & 7) != 0)
    {
        return exon_set_error(EXON_E_ARGUMENT, "error log: NULL, unaligned or negative-length buffer");
    }
    log->buffer = (uint8_t *)buffer;
    log->length = length;
    log->next_offset = 0;
    while (log->next_offset + EXON_ERROR_LOG_HEADER_LENGTH <= length)
    {
        int32_t record_length = EXON_LOAD_ACQ(length_at(log->buffer, log->next_offset));
        if (record_length <= 0)
        {
            break;
        }
        log->next_offset += EXON_ERROR_LOG_ALIGN(record_length);
    }
    pthread_mutex_init(&log->lock, NULL);
    return 0;
}

void exon_error_log_close(exon_error_log_t *log)
{
    pthread_mutex_destroy(&log->lock);
}

static int64_t find(const exon_error_log_t *log, const char *text, int32_t text_length)
{
    for (int64_t offset = 0; offset < log->next_offset;)
    {
        int32_t record_length = EXON_LOAD_ACQ(length_at(log->buffer, offset));
        if (record_length <= 0)
        {
            break;
        }
        if (record_length - EXON_ERROR_LOG_HEADER_LENGTH == text_length &&
            0 == memcmp(log->buffer + offset + EXON_ERROR_LOG_HEADER_LENGTH, text, (size_t)text_length))
        {
            return offset;
        }
        offset += EXON_ERROR_LOG_ALIGN(record_length);
    }
    return -1;
}

int exon_error_log_record(exon_error_log_t *log, int64_t now_ms, const char *text, int32_t text_length)
{
    if (text_length < 0 || (text_length > 0 && NULL == text))
    {
        return exon_set_error(EXON_E_ARGUMENT, "error log: invalid text length %d", text_length);
    }
    if (text_length > EXON_ERROR_LOG_MAX_TEXT_LENGTH)
    {
        text_length = EXON_ERROR_LOG_MAX_TEXT_LENGTH;
    }
    int rc;
    pthread_mutex_lock(&log->lock);
    int64_t offset = find(log, text, text_length);
    if (offset >= 0)
    {
        uint8_t *record = log->buffer + offset;
        EXON_STORE_REL((int64_t *)(record + EXON_ERROR_LOG_LAST_TIMESTAMP_OFFSET), now_ms);
        EXON_FETCH_ADD((int32_t *)(record + EXON_ERROR_LOG_OBSERVATION_COUNT_OFFSET), 1);
        rc = 0;
    }
    else
    {
        int32_t record_length = EXON_ERROR_LOG_HEADER_LENGTH + text_length;
        if (log->next_offset + EXON_ERROR_LOG_ALIGN(record_length) > log->length)
        {
            rc = exon_set_error(EXON_E_NO_SPACE, "error log: full (%lld bytes)", (long long)log->length);
        }
        else
        {
            uint8_t *record = log->buffer + log->next_offset;
            if (text_length > 0)
            {
                memcpy(record + EXON_ERROR_LOG_HEADER_LENGTH, text, (size_t)text_length);
            }
            EXON_STORE_RLX((int64_t *)(record + EXON_ERROR_LOG_FIRST_TIMESTAMP_OFFSET), now_ms);
            EXON_STORE_RLX((int64_t *)(record + EXON_ERROR_LOG_LAST_TIMESTAMP_OFFSET), now_ms);
            EXON_STORE_RLX((int32_t *)(record + EXON_ERROR_LOG_OBSERVATION_COUNT_OFFSET), 1);
            EXON_STORE_REL(length_at(log->buffer, log->next_offset), record_length);
            log->next_offset += EXON_ERROR_LOG_ALIGN(record_length);
            rc = 1;
        }
    }
    pthread_mutex_unlock(&log->lock);
    return rc;
}

int64_t exon_error_log_read(
    const uint8_t *buffer,
    int64_t length,
    int64_t offset,
    int32_t *observation_count,
    int64_t *first_timestamp_ms,
    int64_t *last_timestamp_ms,
    int32_t *text_offset,
    int32_t *text_length)
{
    if (offset < 0 || offset + EXON_ERROR_LOG_HEADER_LENGTH > length || (offset & (EXON_ERROR_LOG_ALIGNMENT - 1)) != 0)
    {
        return 0;
    }
    int32_t record_length = EXON_LOAD_ACQ(length_at(buffer, offset));
    if (record_length < EXON_ERROR_LOG_HEADER_LENGTH || offset + record_length > length)
    {
        return 0;
    }
    const uint8_t *record = buffer + offset;
    *observation_count = EXON_LOAD_ACQ((const int32_t *)(record + EXON_ERROR_LOG_OBSERVATION_COUNT_OFFSET));
    *first_timestamp_ms = EXON_LOAD_ACQ((const int64_t *)(record + EXON_ERROR_LOG_FIRST_TIMESTAMP_OFFSET));
    *last_timestamp_ms = EXON_LOAD_ACQ((const int64_t *)(record + EXON_ERROR_LOG_LAST_TIMESTAMP_OFFSET));
    *text_offset = (int32_t)(offset + EXON_ERROR_LOG_HEADER_LENGTH);
    *text_length = record_length - EXON_ERROR_LOG_HEADER_LENGTH;
    return offset + EXON_ERROR_LOG_ALIGN(record_length);
}

int32_t exon_error_log_count(const uint8_t *buffer, int64_t length)
{
    int32_t count = 0;
    int64_t offset = 0;
    int32_t observations;
    int64_t first;
    int64_t last;
    int32_t text_offset;
    int32_t text_length;
    while ((offset = exon_error_log_read(
        buffer, length, offset, &observations, &first, &last, &text_offset, &text_length)) > 0)
    {
        count++;
    }
    return count;
}
