/* cdef: publications (exon_publication.h). */
#define EXON_PUBLICATION_NOT_CONNECTED ...
#define EXON_PUBLICATION_BACK_PRESSURED ...
#define EXON_PUBLICATION_ADMIN_ACTION ...
#define EXON_PUBLICATION_CLOSED ...
#define EXON_PUBLICATION_MAX_POSITION_EXCEEDED ...
typedef struct exon_publication_stct {
    exon_log_t *log;
    exon_log_metadata_t *meta;
    int64_t *position_limit;
    uint8_t *counters_values;
    exon_agent_ring_fn_t agent_ring;
    void *agent_ring_ctx;
    int64_t max_possible_position;
    int32_t term_length;
    int32_t position_bits_to_shift;
    int32_t initial_term_id;
    int32_t session_id;
    int32_t stream_id;
    int32_t max_payload_length;
    int32_t max_message_length;
    int32_t exclusive;
    ...;
} exon_publication_t;
typedef struct exon_claim_stct {
    uint8_t *frame;
    uint8_t *data;
    int32_t length;
    exon_publication_t *pub;
    ...;
} exon_claim_t;
int exon_publication_init(exon_publication_t *pub, exon_log_t *log, int64_t *position_limit, uint8_t *counters_values, int32_t exclusive);
int64_t exon_publication_offer(exon_publication_t *pub, const char *buf, int32_t length, int64_t reserved_value);
int64_t exon_publication_offer2(exon_publication_t *pub, const char *a, int32_t a_length, const char *b, int32_t b_length, int64_t reserved_value);
int64_t exon_publication_try_claim(exon_publication_t *pub, int32_t length, exon_claim_t *claim);
int exon_claim_commit(exon_claim_t *claim);
int exon_claim_abort(exon_claim_t *claim);
void exon_claim_set_reserved_value(exon_claim_t *claim, int64_t reserved_value);
int64_t exon_publication_position(exon_publication_t *pub);
int64_t exon_publication_position_limit(exon_publication_t *pub);
int exon_publication_is_connected(exon_publication_t *pub);
void exon_publication_close(exon_publication_t *pub);
int exon_publication_is_closed(exon_publication_t *pub);
