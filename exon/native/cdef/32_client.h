/* cdef: the client conductor (exon_client.h). */
#define EXON_CLIENT_DEFAULT_KEEPALIVE_NS ...
#define EXON_IMAGE_EVENT_AVAILABLE ...
#define EXON_IMAGE_EVENT_UNAVAILABLE ...

typedef struct exon_client_stct exon_client_t;

typedef struct exon_client_publication_stct {
    int64_t registration_id;
    int64_t original_registration_id;
    int32_t session_id;
    int32_t stream_id;
    int32_t position_limit_counter_id;
    int32_t position_counter_id;
    char log_file[4096];
    ...;
} exon_client_publication_t;

typedef struct exon_client_subscription_stct {
    int64_t registration_id;
    int32_t doorbell_counter_id;
    int32_t stream_id;
    int64_t *event_count;
    char bound_endpoint[64];
    ...;
} exon_client_subscription_t;

typedef struct exon_image_event_stct {
    int32_t type;
    int32_t session_id;
    int32_t stream_id;
    int32_t subscriber_position_counter_id;
    int64_t correlation_id;
    int64_t subscription_registration_id;
    char log_file[4096];
    char source_identity[256];
    ...;
} exon_image_event_t;

int exon_client_connect(exon_client_t **client, const char *dir, int64_t timeout_ns, int64_t driver_timeout_ms, int64_t keepalive_interval_ns);
int exon_client_close(exon_client_t *client);
int64_t exon_client_id(exon_client_t *client);
int exon_client_status(exon_client_t *client);
int64_t exon_client_driver_heartbeat_age_ms(exon_client_t *client);
int64_t exon_client_keepalives_sent(exon_client_t *client);
uint8_t *exon_client_counters_values(exon_client_t *client);
int64_t *exon_client_counter_addr(exon_client_t *client, int32_t counter_id);
exon_counters_t *exon_client_counters(exon_client_t *client);
int exon_client_add_publication(exon_client_t *client, const char *channel, int32_t stream_id, int32_t exclusive, int64_t timeout_ns, exon_client_publication_t *out);
int exon_client_remove_publication(exon_client_t *client, int64_t registration_id, int64_t timeout_ns);
int exon_client_add_subscription(exon_client_t *client, const char *channel, int32_t stream_id, int32_t doorbell_counter_id, int64_t timeout_ns, exon_client_subscription_t *out);
int exon_client_remove_subscription(exon_client_t *client, int64_t registration_id, int64_t timeout_ns);
typedef struct exon_client_counter_stct { int64_t registration_id; int32_t counter_id; ...; } exon_client_counter_t;
int exon_client_add_counter(exon_client_t *client, int32_t type_id, const uint8_t *key, int32_t key_length, const char *label, int32_t label_length, int64_t timeout_ns, exon_client_counter_t *out);
int exon_client_remove_counter(exon_client_t *client, int64_t registration_id, int64_t timeout_ns);
int exon_client_poll_image_event(exon_client_t *client, int64_t subscription_registration_id, exon_image_event_t *out);
int exon_client_terminate_driver(exon_client_t *client, int64_t timeout_ns);
void exon_client_attach_publication(exon_client_t *client, exon_publication_t *pub);
