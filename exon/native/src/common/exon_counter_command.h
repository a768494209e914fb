/*
 * exon_counter_command.h: the variable part of ADD_COUNTER (docs/protocol.md 4.3).
 *
 * Wire-exact with Aeron's CounterMessageFlyweight (Aeron 1.15.1 and later):
 *   0   int64  client_id
 *   8   int64  correlation_id
 *   16  int32  type_id
 *   20  int32  key_length               0..EXON_COUNTER_MAX_KEY_LENGTH (112)
 *   24  uint8  key[key_length]
 *   24 + align4(key_length)   int32 label_length   0..EXON_COUNTER_MAX_LABEL_LENGTH (380)
 *   28 + align4(key_length)   char  label[label_length]
 * The command's length is exactly 28 + align4(key_length) + label_length.
 * Pure functions over bytes (no state): the conductor parses with them, the client encodes
 * with them, tests compare them with the Python twin (exon/transport/aeron/commands.py).
 */
#ifndef EXON_COUNTER_COMMAND_H
#define EXON_COUNTER_COMMAND_H

#include <stdint.h>

#include "common/exon_common.h"
#include "common/exon_cnc.h"
#include "concurrent/exon_counters.h"

#define EXON_COUNTER_COMMAND_KEY_OFFSET 24
#define EXON_COUNTER_COMMAND_MAX_LENGTH \
    (EXON_COUNTER_COMMAND_KEY_OFFSET + EXON_COUNTER_MAX_KEY_LENGTH + 4 + EXON_COUNTER_MAX_LABEL_LENGTH)

/* Where the parts of a parsed ADD_COUNTER are (offsets from the command's start). */
typedef struct exon_counter_command_fields_stct
{
    int64_t client_id;
    int64_t correlation_id;
    int32_t type_id;
    int32_t key_offset;
    int32_t key_length;
    int32_t label_offset;
    int32_t label_length;
}
exon_counter_command_fields_t;

/* Length of an ADD_COUNTER with these parts; EXON_E_ARGUMENT if a length is out of range. */
int32_t exon_counter_command_length(int32_t key_length, int32_t label_length);

/*
 * Check `length` bytes as one ADD_COUNTER and fill *out. 0, or EXON_E_ARGUMENT (the text,
 * via exon_last_error(), says which field is wrong): shorter than its fixed part, a key or
 * label length negative, over its limit or past the end, or bytes after the label.
 */
int exon_counter_command_parse(const uint8_t *buf, int32_t length, exon_counter_command_fields_t *out);

/* Encode into buf (capacity bytes); returns the length written or EXON_E_ARGUMENT. */
int32_t exon_counter_command_encode(
    uint8_t *buf,
    int32_t capacity,
    int64_t client_id,
    int64_t correlation_id,
    int32_t type_id,
    const uint8_t *key,
    int32_t key_length,
    const char *label,
    int32_t label_length);

#endif /* EXON_COUNTER_COMMAND_H */
