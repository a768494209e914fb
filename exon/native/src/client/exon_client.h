/*
 * exon_client.h: the client conductor (Aeron's ClientConductor) in C.
 *
 * exon_client_connect maps and validates <dir>/cnc.dat, checks the driver heartbeat,
 * takes a client id from the to-driver ring's correlation counter, starts one native
 * conductor thread and sends CLIENT_CONNECT (awaiting the driver's answer, which proves
 * the driver is really serving this dir). The conductor thread:
 *   - sends CLIENT_KEEPALIVE every keepalive interval (500 ms by default);
 *   - reads the to-clients broadcast: completes waiting commands by correlation id and
 *     queues image availability events per subscription;
 *   - watches the driver: a heartbeat older than the driver timeout, the driver's pid gone,
 *     or an ON_CLIENT_TIMEOUT for this client marks the client failed: every waiting and
 *     later call returns EXON_E_DRIVER_TIMEOUT (or EXON_E_CLIENT_CLOSED) with the reason;
 *   - sleeps on the CnC's to-clients futex doorbell between events (no spinning).
 * Commands (add/remove publication/subscription) write to the ring, ring the conductor's
 * agent doorbell if it is parked, and wait on a condition variable for the response with
 * a timeout. cffi releases the GIL for the whole wait.
 *
 * Thread-safety: every function may be called from any thread concurrently, except
 * exon_client_close, which must be the last call on a client (it frees it).
 */
#ifndef EXON_CLIENT_H
#define EXON_CLIENT_H

#include <stdint.h>
#include <pthread.h>

#include "common/exon_common.h"
#include "client/exon_publication.h"
#include "common/exon_cnc.h"
#include "common/exon_cnc_file.h"

#define EXON_CLIENT_DEFAULT_KEEPALIVE_NS 500000000LL
#define EXON_IMAGE_EVENT_AVAILABLE 1
#define EXON_IMAGE_EVENT_UNAVAILABLE 2
#define EXON_CLIENT_SOURCE_IDENTITY_LENGTH 256

typedef struct exon_client_stct exon_client_t;

/* Answer to add_publication / add_exclusive_publication. */
typedef struct exon_client_publication_stct
{
    int64_t registration_id;          /* this client's handle (remove with it) */
    int64_t original_registration_id; /* the log's registration id (shared publications) */
    int32_t session_id;
    int32_t stream_id;
    int32_t position_limit_counter_id;/* pub-lmt */
    int32_t position_counter_id;      /* pub-pos */
    char log_file[EXON_MAX_PATH_LENGTH];
}
exon_client_publication_t;

/* Answer to add_subscription. */
typedef struct exon_client_subscription_stct
{
    int64_t registration_id;
    int32_t doorbell_counter_id;
    int32_t stream_id;
    /* bumped (release) each time an image event is queued for this subscription: readers
     * compare it with the value they saw last and drain the queue when it changed */
    int64_t *event_count;
    /* UDP: the "host:port" the driver bound (port 0 resolved); "" for IPC */
    char bound_endpoint[64];
}
exon_client_subscription_t;

typedef struct exon_image_event_stct
{
    int32_t type;                          /* EXON_IMAGE_EVENT_* */
    int32_t session_id;
    int32_t stream_id;
    int32_t subscriber_position_counter_id;/* AVAILABLE only */
    int64_t correlation_id;                /* the image's id */
    int64_t subscription_registration_id;
    char log_file[EXON_MAX_PATH_LENGTH];   /* AVAILABLE only */
    char source_identity[EXON_CLIENT_SOURCE_IDENTITY_LENGTH];
}
exon_image_event_t;

/*
 * Connect to the driver of `dir`. timeout_ns bounds the wait for a CnC being created and
 * the CLIENT_CONNECT answer. driver_timeout_ms <= 0: use the CnC's value.
 * keepalive_interval_ns <= 0: 500 ms, or a quarter of the CnC's client liveness timeout when
 * that is shorter. Errors: -ENOENT/EXON_E_CNC_* naming the file,
 * EXON_E_DRIVER_TIMEOUT when no live driver answers.
 */
int exon_client_connect(
    exon_client_t **client,
    const char *dir,
    int64_t timeout_ns,
    int64_t driver_timeout_ms,
    int64_t keepalive_interval_ns);

/* Send CLIENT_CLOSE, stop the conductor thread, unmap, free. Safe with NULL. */
int exon_client_close(exon_client_t *client);

int64_t exon_client_id(exon_client_t *client);
/* 0 while healthy, else the failure code (its text via exon_last_error() on this thread). */
int exon_client_status(exon_client_t *client);
/* Age of the driver heartbeat in ms as last seen by the conductor thread. */
int64_t exon_client_driver_heartbeat_age_ms(exon_client_t *client);
int64_t exon_client_keepalives_sent(exon_client_t *client);

/* The client's view of the CnC's counters values (pub-lmt / sub-pos / doorbells). */
uint8_t *exon_client_counters_values(exon_client_t *client);
int64_t *exon_client_counter_addr(exon_client_t *client, int32_t counter_id);
/* Reader handle over the CnC's counters (exon_counters_state/type_id/label...). */
exon_counters_t *exon_client_counters(exon_client_t *client);

int exon_client_add_publication(
    exon_client_t *client,
    const char *channel,
    int32_t stream_id,
    int32_t exclusive,
    int64_t timeout_ns,
    exon_client_publication_t *out);
int exon_client_remove_publication(exon_client_t *client, int64_t registration_id, int64_t timeout_ns);

/* doorbell_counter_id < 0: the driver allocates one for the subscription. */
int exon_client_add_subscription(
    exon_client_t *client,
    const char *channel,
    int32_t stream_id,
    int32_t doorbell_counter_id,
    int64_t timeout_ns,
    exon_client_subscription_t *out);
int exon_client_remove_subscription(exon_client_t *client, int64_t registration_id, int64_t timeout_ns);

/* Answer to add_counter. */
typedef struct exon_client_counter_stct
{
    int64_t registration_id;          /* remove with it (the ADD_COUNTER's correlation id) */
    int32_t counter_id;               /* its value: exon_client_counter_addr(client, counter_id) */
}
exon_client_counter_t;

/*
 * ADD_COUNTER: the driver allocates a counter of `type_id` with this key (0..112 bytes) and
 * label (0..380 bytes), owned by this client: it is freed by exon_client_remove_counter,
 * or with the client (close, or the driver timing it out). Errors: EXON_E_ARGUMENT for
 * a key or label too long, EXON_E_DRIVER_ERROR (no counter left...), EXON_E_TIMEOUT.
 */
int exon_client_add_counter(
    exon_client_t *client,
    int32_t type_id,
    const uint8_t *key,
    int32_t key_length,
    const char *label,
    int32_t label_length,
    int64_t timeout_ns,
    exon_client_counter_t *out);
int exon_client_remove_counter(exon_client_t *client, int64_t registration_id, int64_t timeout_ns);

/* Pop the next image event of a subscription: 1 (out filled), 0 (none), EXON_E_ARGUMENT. */
int exon_client_poll_image_event(exon_client_t *client, int64_t subscription_registration_id, exon_image_event_t *out);

/* Ask the driver to terminate (TERMINATE_DRIVER); waits for the acknowledgement. */
int exon_client_terminate_driver(exon_client_t *client, int64_t timeout_ns);

/*
 * Let commits to `pub` wake the driver's sender agent when it sleeps (a UDP publication's
 * log lists EXON_DOORBELL_SENDER in its doorbell table). `client` must outlive `pub`'s use.
 */
void exon_client_attach_publication(exon_client_t *client, exon_publication_t *pub);

#endif /* EXON_CLIENT_H */
