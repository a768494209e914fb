/*
 * exon_driver_conductor.h: the media driver's conductor agent.
 *
 * Reads client commands from the to-driver ring of cnc.dat, owns the IPC publications
 * (log files under <dir>/publications/<registration id>.logbuffer), links subscriptions
 * to them (one sub-pos counter per link), answers on the to-clients broadcast with the
 * command's correlation id, and on every duty cycle:
 *   - stamps the driver heartbeat (the ring's consumer heartbeat, epoch ms);
 *   - per IPC publication: pub-pos = producer position; with subscribers:
 *     is_connected = 1, clean the log up to min(sub-pos) - term length, and
 *     pub-lmt = min(sub-pos) + window (term/2 unless set); without: is_connected = 0;
 *   - times out clients whose last command/keepalive is older than the liveness timeout
 *     (their publications and subscriptions are removed, ON_CLIENT_TIMEOUT broadcast,
 *     client-timeouts counter incremented);
 *   - drains removed publications: end_of_stream_position = final position; once every
 *     subscriber reached it (or the liveness timeout passed) ON_UNAVAILABLE_IMAGE goes to
 *     each, then after the linger timeout the log is unmapped and unlinked.
 * It also maintains each log's exon_doorbell_ids (the doorbell counters of the
 * subscriptions reading it) and rings a subscription's doorbell when one of its images
 * comes or goes, so a subscriber asleep in wait() notices.
 *
 * Channels: "aeron:ipc" (optionally "aeron:ipc?k=v|..." with keys ignored) and
 * "aeron:udp?endpoint=HOST:PORT|..." (parsed by exon_uri; a malformed URI is refused with
 * EXON_DRIVER_ERR_INVALID_CHANNEL naming the bad part). UDP publications are
 * exon_network_publication_t driven by the sender agent (send socket bound to the channel's
 * `control` HOST:PORT when given, else `interface`/any on an ephemeral port; pub-pos,
 * pub-lmt, snd-pos and snd-lmt counters; `control` on a subscription is refused); UDP subscriptions share receive
 * endpoints (exon_publication_image.h) driven by the receiver agent through a command queue;
 * a SETUP the receiver reports becomes an image log under <dir>/images/<id>.logbuffer and
 * ON_AVAILABLE_IMAGE.
 *
 * The code is split by concern: exon_driver_conductor.c (commands, clients, UDP publications,
 * the duty cycle), exon_conductor_ipc_publications.c, exon_conductor_receive_images.c;
 * exon_conductor_internal.h holds what they share.
 *
 * Thread-safety: everything here runs on the conductor's agent thread only (init/close on
 * the driver's owner thread while no runner is running).
 */
#ifndef EXON_DRIVER_CONDUCTOR_H
#define EXON_DRIVER_CONDUCTOR_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"
#include "common/exon_cnc.h"
#include "common/exon_cnc_file.h"
#include "concurrent/exon_ring.h"
#include "concurrent/exon_broadcast.h"
#include "concurrent/exon_counters.h"
#include "concurrent/exon_error_log.h"
#include "concurrent/exon_logbuffer.h"
#include "driver/exon_driver_context.h"
#include <pthread.h>

typedef struct exon_dc_client_stct exon_dc_client_t;
typedef struct exon_dc_ipc_publication_stct exon_dc_ipc_publication_t;
typedef struct exon_dc_publication_link_stct exon_dc_publication_link_t;
typedef struct exon_dc_subscription_stct exon_dc_subscription_t;
typedef struct exon_dc_subscriber_position_stct exon_dc_subscriber_position_t;
typedef struct exon_dc_net_publication_stct exon_dc_net_publication_t;
typedef struct exon_dc_image_stct exon_dc_image_t;
typedef struct exon_dc_client_counter_stct exon_dc_client_counter_t;

typedef struct exon_dc_array_stct
{
    void **items;
    int32_t length;
    int32_t capacity;
}
exon_dc_array_t;

typedef struct exon_driver_conductor_stct
{
    exon_driver_context_t config;     /* the driver's settings (a copy) */
    exon_cnc_t *cnc;
    exon_ring_t to_driver;
    exon_broadcast_transmitter_t to_clients;
    exon_counters_t counters;
    exon_error_log_t error_log;
    bool error_log_ready;
    exon_dc_array_t clients;
    exon_dc_array_t publications;     /* exon_dc_ipc_publication_t* */
    exon_dc_array_t publication_links;/* exon_dc_publication_link_t* */
    exon_dc_array_t subscriptions;    /* exon_dc_subscription_t* */
    exon_dc_array_t subscriber_positions; /* exon_dc_subscriber_position_t* */
    exon_dc_array_t client_counters;  /* exon_dc_client_counter_t*: counters of ADD_COUNTER */
    /* The sender and the receiver have their own state (exon_sender.h, exon_receiver.h),
     * owned by the driver: the conductor offers them commands, drains the receiver's
     * events and puts sockets in their epoll sets, nothing more. */
    struct exon_sender_stct *sender;
    struct exon_receiver_stct *receiver;
    exon_dc_array_t net_publications; /* exon_dc_net_publication_t* (conductor only) */
    exon_dc_array_t endpoints;        /* exon_receive_endpoint_t* (conductor only; with the
                                       * closing ones until the receiver released them) */
    exon_dc_array_t images;           /* exon_dc_image_t* (conductor only; with the removed
                                       * ones until the receiver released them) */
    int64_t receiver_id;              /* in the SMs of every endpoint the conductor opens */
    int64_t next_timer_ns;
    int64_t timer_interval_ns;
    int64_t last_heartbeat_ms;
    uint64_t rng;
    volatile int32_t terminate_requested;
    int32_t pad0;
    uint8_t msg[8192];
}
exon_driver_conductor_t;

/* Attach to an open, freshly created CnC (counters must have their system counters) and to
 * the driver's sender and receiver (initialised, not yet running). */
int exon_driver_conductor_init(exon_driver_conductor_t *conductor, exon_cnc_t *cnc,
    const exon_driver_context_t *config, struct exon_sender_stct *sender, struct exon_receiver_stct *receiver);

/* One duty cycle (the agent's do_work; state is the conductor). Returns the work count. */
int exon_driver_conductor_do_work(void *state, int64_t now_ns);

/* Free everything: unmap and unlink every log, free entities (not the counters' memory). */
void exon_driver_conductor_close(exon_driver_conductor_t *conductor);

/* Record an error text in the driver's error log and bump the errors counter. */
void exon_driver_conductor_error(exon_driver_conductor_t *conductor, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* EXON_DRIVER_CONDUCTOR_H */
