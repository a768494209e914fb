/* exon_counter_command.c: parse and encode ADD_COUNTER; layout in exon_counter_command.h. */
#include <string.h>

#include "common/exon_counter_command.h"

static int32_t align4(int32_t n)
{
    return (n + 3) & ~3;
}

int32_t exon_counter_command_length(int32_t key_length, int32_t label_length)
{
    if (key_length < 0 || key_length > EXON_COUNTER_MAX_KEY_LENGTH)
    {
        return exon_set_error(EXON_E_ARGUMENT, "counter key of %d bytes (0..%d allowed)", key_length,
            EXON_COUNTER_MAX_KEY_LENGTH);
    }
    if (label_length < 0 || label_length > EXON_COUNTER_MAX_LABEL_LENGTH)
    {
        return exon_set_error(EXON_E_ARGUMENT, "counter label of %d bytes (0..%d allowed)", label_length,
            EXON_COUNTER_MAX_LABEL_LENGTH);
    }
    return EXON_COUNTER_COMMAND_KEY_OFFSET + align4(key_length) + 4 + label_length;
}

int exon_counter_command_parse(const uint8_t *buf, int32_t length, exon_counter_command_fields_t *out)
{
    if (NULL == buf || length < EXON_COUNTER_COMMAND_KEY_OFFSET + 4)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ADD_COUNTER of %d bytes is shorter than its fixed part (%d)",
            length, EXON_COUNTER_COMMAND_KEY_OFFSET + 4);
    }
    exon_counter_command_t fixed;
    memcpy(&fixed, buf, sizeof(fixed));
    int32_t key_length = fixed.key_length;
    if (key_length < 0 || key_length > EXON_COUNTER_MAX_KEY_LENGTH)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ADD_COUNTER key_length %d is not in 0..%d", key_length,
            EXON_COUNTER_MAX_KEY_LENGTH);
    }
    int32_t label_length_offset = EXON_COUNTER_COMMAND_KEY_OFFSET + align4(key_length);
    if (label_length_offset + 4 > length)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ADD_COUNTER of %d bytes ends inside its key (key_length %d)",
            length, key_length);
    }
    int32_t label_length;
    memcpy(&label_length, buf + label_length_offset, sizeof(label_length));
    if (label_length < 0 || label_length > EXON_COUNTER_MAX_LABEL_LENGTH)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ADD_COUNTER label_length %d is not in 0..%d", label_length,
            EXON_COUNTER_MAX_LABEL_LENGTH);
    }
    int32_t expected = label_length_offset + 4 + label_length;
    if (expected != length)
    {
        return exon_set_error(EXON_E_ARGUMENT, "ADD_COUNTER of %d bytes, but its key and label make %d",
            length, expected);
    }
    out->client_id = fixed.correlated.client_id;
    out->correlation_id = fixed.correlated.correlation_id;
    out->type_id = fixed.type_id;
    out->key_offset = EXON_COUNTER_COMMAND_KEY_OFFSET;
    out->key_length = key_length;
    out->label_offset = label_length_offset + 4;
    out->label_length = label_length;
    return 0;
}

int32_t exon_counter_command_encode(
    uint8_t *buf,
    int32_t capacity,
    int64_t client_id,
    int64_t correlation_id,
    int32_t type_id,
    const uint8_t *key,
    int32_t key_length,
    const char *label,
    int32_t label_length)
{
    int32_t length = exon_counter_command_length(key_length, label_length);
    if (length < 0)
    {
        return length;
    }
    if (NULL == buf || capacity < length || (key_length > 0 && NULL == key) || (label_length > 0 && NULL == label))
    {
        return exon_set_error(EXON_E_ARGUMENT, "ADD_COUNTER needs %d bytes of buffer and its key and label", length);
    }
    memset(buf, 0, (size_t)length);
    exon_counter_command_t fixed;
    memset(&fixed, 0, sizeof(fixed));
    fixed.correlated.client_id = client_id;
    fixed.correlated.correlation_id = correlation_id;
    fixed.type_id = type_id;
    fixed.key_length = key_length;
    memcpy(buf, &fixed, sizeof(fixed));
    if (key_length > 0)
    {
        memcpy(buf + EXON_COUNTER_COMMAND_KEY_OFFSET, key, (size_t)key_length);
    }
    int32_t label_length_offset = EXON_COUNTER_COMMAND_KEY_OFFSET + align4(key_length);
    memcpy(buf + label_length_offset, &label_length, sizeof(label_length));
    if (label_length > 0)
    {
        memcpy(buf + label_length_offset + 4, label, (size_t)label_length);
    }
    return length;
}
