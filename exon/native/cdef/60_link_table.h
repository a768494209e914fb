/* cdef: the sockets' native DATA fast path (exon_link_table.h). */
#define EXON_LT_HEADER_LENGTH ...
#define EXON_LT_NO_CREDIT ...
#define EXON_LT_TOO_LARGE ...
#define EXON_LT_NO_LINK ...
#define EXON_LT_FLOW_DONE ...
#define EXON_LT_FLOW_CREDIT ...
#define EXON_LT_DELIVER_NONE ...
#define EXON_LT_DELIVER_FIRST ...
#define EXON_LT_DELIVER_DUE ...
typedef struct exon_lt_link_stct {
    exon_publication_t *pub;
    uint64_t limit;
    uint64_t sent;
    uint64_t advertised;
    uint64_t received;
    uint64_t delivered;
    uint64_t flowed_delivered;
    uint64_t batch;
    uint64_t confirmed;
    uint64_t hold_flow;
    uint64_t flow_timer;
    uint64_t capacity;
    uint32_t source_tag;
    uint32_t destination_tag;
    uint32_t incarnation;
    uint32_t peer_incarnation;
    int32_t peer_key;
    int32_t socket_slot;
    int32_t max_out;
    int32_t max_in;
    exon_seal_t *seal;
} exon_lt_link_t;
typedef struct exon_lt_desc_stct {
    int32_t link;
    int32_t image;
    int32_t offset;
    int32_t length;
    int32_t slot;
} exon_lt_desc_t;
typedef struct exon_link_table_stct {
    exon_lt_link_t *links;
    int32_t capacity;
    int32_t high;
    int32_t flow_count;
    int32_t poll_next;
    int64_t malformed_dropped;
    ...;
} exon_link_table_t;
int exon_lt_init(exon_link_table_t *t, int32_t capacity, int32_t socket_capacity);
void exon_lt_close(exon_link_table_t *t);
int32_t exon_lt_reserve(exon_link_table_t *t);
int exon_lt_activate(exon_link_table_t *t, int32_t link, exon_publication_t *pub);
void exon_lt_detach(exon_link_table_t *t, int32_t link);
int64_t exon_lt_send(exon_link_table_t *t, int32_t socket_slot, int32_t link, const char *payload, int32_t length);
#define EXON_LT_MIN_SHARE ...
#define EXON_LT_GARBAGE_SHARE ...
int exon_lt_frame_malformed(const uint8_t *frame, int32_t length);
int exon_lt_poll(exon_link_table_t *t, exon_image_t **images, int32_t count, int32_t max_messages, uint8_t *copy_buf, int32_t copy_cap, int32_t *copy_used, exon_lt_desc_t *out, exon_fragment_t *scratch);
int exon_lt_classify(exon_link_table_t *t, const int32_t *image_keys, uint8_t *copy_buf, exon_lt_desc_t *descs, int32_t count);
int exon_lt_wait(exon_image_t **images, int32_t count, int32_t *doorbell, int64_t spin_ns, int64_t timeout_ns);
int64_t exon_lt_deliver(exon_link_table_t *t, int32_t link);
void exon_lt_set_flow_delay(exon_link_table_t *t, int64_t delay_ns);
int32_t exon_lt_flush_flows(exon_link_table_t *t, int64_t now_ns);
int64_t exon_lt_next_flow_ns(const exon_link_table_t *t);
int64_t exon_lt_deliver_many(exon_link_table_t *t, int32_t link, int64_t count);
