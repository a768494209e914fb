/* cdef: ADD_COUNTER's codec (exon_counter_command.h). */
#define EXON_COUNTER_COMMAND_KEY_OFFSET ...
#define EXON_COUNTER_COMMAND_MAX_LENGTH ...

typedef struct exon_counter_command_fields_stct {
    int64_t client_id; int64_t correlation_id; int32_t type_id; int32_t key_offset; int32_t key_length;
    int32_t label_offset; int32_t label_length; ...;
} exon_counter_command_fields_t;

int32_t exon_counter_command_length(int32_t key_length, int32_t label_length);
int exon_counter_command_parse(const uint8_t *buf, int32_t length, exon_counter_command_fields_t *out);
int32_t exon_counter_command_encode(uint8_t *buf, int32_t capacity, int64_t client_id, int64_t correlation_id, int32_t type_id, const uint8_t *key, int32_t key_length, const char *label, int32_t label_length);
