/* cdef: reader doorbells (exon_doorbell.h). */
#define EXON_DOORBELL_RECORD_LENGTH ...
int32_t *exon_doorbell_word(uint8_t *counters_values, int32_t counter_id);
int exon_doorbell_wait(int32_t *word, int32_t expected, int64_t timeout_ns);
int exon_doorbell_ring(int32_t *word);
void exon_doorbell_arm(int32_t *word);
int exon_doorbell_ring_armed(int32_t *word);
int32_t exon_doorbell_read(const int32_t *word);
int exon_log_ring_doorbells(exon_log_metadata_t *meta, uint8_t *counters_values, exon_agent_ring_fn_t agent_ring, void *ctx);
int exon_log_add_doorbell(exon_log_metadata_t *meta, int32_t doorbell_id);
int exon_log_remove_doorbell(exon_log_metadata_t *meta, int32_t doorbell_id);
