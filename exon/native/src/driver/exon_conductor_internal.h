/*
 * exon_conductor_internal.h: what the pieces of the driver conductor share (not an API).
 *
 * The conductor is one agent split by concern over three files, all on its thread:
 *   exon_driver_conductor.c          commands, clients, client counters, channel parsing,
 *                                    UDP (network) publications, the duty cycle;
 *   exon_conductor_ipc_publications.c IPC publications: create/find/drain/linger/free, their
 *                                    logs, pub-pos/pub-lmt and the sub-pos of their subscribers;
 *   exon_conductor_receive_images.c  receive endpoints and the publication images they feed:
 *                                    endpoints per UDP subscription, images from SETUPs,
 *                                    their counters, linking, reaping, and the receiver's
 *                                    command and event queues.
 * The entities below are the conductor's own; the helpers are defined in
 * exon_driver_conductor.c unless noted.
 */
#ifndef EXON_CONDUCTOR_INTERNAL_H
#define EXON_CONDUCTOR_INTERNAL_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/exon_common.h"
#include "driver/exon_driver_conductor.h"
#include "uri/exon_uri.h"
#include "media/exon_udp_channel.h"
#include "driver/exon_network_publication.h"
#include "driver/exon_publication_image.h"
#include "driver/exon_receiver.h"
#include "driver/exon_sender.h"

#define EXON_DC_CHANNEL_IPC 0
#define EXON_DC_CHANNEL_UDP (-1)

#define EXON_DC_PUB_ACTIVE 0
#define EXON_DC_PUB_DRAINING 1
#define EXON_DC_PUB_LINGER 2

/* The longest `linger` / `nak-delay` a channel may ask for (the settings' bound for the
 * driver-wide linger): keeps every deadline computed from them far from overflow. */
#define EXON_DC_CHANNEL_DURATION_MAX_NS (3600LL * 1000000000LL)

struct exon_dc_client_stct
{
    int64_t client_id;
    int64_t pid;
    int64_t last_keepalive_ns;
    int32_t heartbeat_counter_id;
};

struct exon_dc_ipc_publication_stct
{
    int64_t registration_id;
    int32_t stream_id;
    int32_t session_id;
    bool exclusive;
    int32_t state;
    int32_t refcount;
    int32_t pub_pos_id;
    int32_t pub_lmt_id;
    int32_t window;
    int64_t clean_position;
    int64_t end_of_stream_position;
    int64_t drain_deadline_ns;
    int64_t linger_deadline_ns;
    int64_t linger_timeout_ns;              /* the channel's linger, else the driver's */
    bool back_pressured;
    exon_log_t log;
};

struct exon_dc_publication_link_stct
{
    int64_t registration_id;
    int64_t client_id;
    exon_dc_ipc_publication_t *publication;
    exon_dc_net_publication_t *net;        /* UDP link (publication NULL) */
};

struct exon_dc_net_publication_stct
{
    int64_t registration_id;
    int32_t stream_id;
    int32_t session_id;
    bool exclusive;
    int32_t state;                          /* EXON_NETPUB_* */
    int32_t refcount;
    int32_t pub_lmt_id;
    int32_t pub_pos_id;                     /* producer position, updated every duty cycle */
    int32_t snd_pos_id;
    int32_t snd_lmt_id;
    int32_t window;
    int64_t clean_position;
    int64_t drain_deadline_ns;
    int64_t linger_deadline_ns;
    int64_t linger_timeout_ns;              /* the channel's linger, else the driver's */
    char key[EXON_UDP_ADDR_TEXT_MAX];       /* destination "host:port" */
    char control_key[EXON_UDP_ADDR_TEXT_MAX]; /* control "host:port" as asked ("" = none) */
    exon_log_t log;
    exon_network_publication_t np;
};

struct exon_dc_image_stct
{
    int64_t correlation_id;
    exon_log_t log;
    exon_publication_image_t img;     /* the receiver's once handed over (ADD_IMAGE) */
    exon_dc_subscription_t *subs[EXON_IMAGE_MAX_SUBSCRIBERS];
    int32_t sub_pos_ids[EXON_IMAGE_MAX_SUBSCRIBERS]; /* the conductor's copy of img.sub_pos_ids */
    int32_t sub_count;
    bool handed_over;                 /* ADD_IMAGE sent: img.sub_pos_ids change by command */
    bool removing;                    /* REMOVE_IMAGE sent: freed once the receiver released
                                       * it; its subs[] are not to be followed any more */
    bool heard_tried;                 /* its rcv-heard counter was asked for (once verified) */
    char source[EXON_UDP_ADDR_TEXT_MAX];
};

struct exon_dc_subscription_stct
{
    int64_t registration_id;
    int64_t client_id;
    int32_t stream_id;
    int32_t doorbell_id;
    bool doorbell_owned;
    bool udp;
    int64_t nak_delay_ns;                   /* the channel's nak-delay; -1 = the driver's */
    exon_receive_endpoint_t *endpoint;
};

/* A counter a client allocated with ADD_COUNTER (freed by REMOVE_COUNTER or with its client). */
struct exon_dc_client_counter_stct
{
    int64_t registration_id;                /* the ADD_COUNTER's correlation id */
    int64_t client_id;
    int32_t counter_id;
};

struct exon_dc_subscriber_position_stct
{
    exon_dc_ipc_publication_t *publication;
    exon_dc_subscription_t *subscription;
    int32_t counter_id;
};

/* a + b for deadlines, saturating at INT64_MAX (both >= 0 or a clock value). */
static inline int64_t exon_dc_add_ns(int64_t a, int64_t b)
{
    return (b > 0 && a > INT64_MAX - b) ? INT64_MAX : a + b;
}

/* Whether a publication's log is a sparse file: the channel's `sparse` (-1: not given), else
 * the driver's term_buffer_sparse_file. The one rule for IPC and network publications. */
static inline int32_t exon_dc_publication_sparse(const exon_driver_conductor_t *c, int32_t channel_sparse)
{
    return channel_sparse >= 0 ? channel_sparse : c->config.term_buffer_sparse_file;
}

/* ---- helpers (exon_driver_conductor.c) ---------------------------------------------- */

int exon_dc_array_add(exon_dc_array_t *a, void *item);
void exon_dc_array_remove(exon_dc_array_t *a, void *item);
uint64_t exon_dc_random(exon_driver_conductor_t *c);
void exon_dc_transmit(exon_driver_conductor_t *c, int32_t type, const void *msg, int32_t length);
void exon_dc_ring_subscription(exon_driver_conductor_t *c, exon_dc_subscription_t *sub);
int32_t exon_dc_alloc_counter(exon_driver_conductor_t *c, int32_t type, const char *what,
    int64_t registration_id, int32_t session_id, int32_t stream_id, const char *channel);
int exon_dc_multicast_check(const exon_uri_t *uri, const exon_udp_addr_t *dest, exon_udp_addr_t *control,
    exon_udp_addr_t *iface, char *why, size_t why_length);
void exon_dc_epoll_add(int epoll_fd, int fd);
void exon_dc_epoll_del(int epoll_fd, int fd);

/* ---- IPC publications (exon_conductor_ipc_publications.c) --------------------------- */

/* A session id not used by an IPC publication of `stream_id` (random, outside [-1, 1000]). */
int32_t exon_dc_next_session_id(exon_driver_conductor_t *c, int32_t stream_id);
/* linger_ns: the channel's `linger` (-1: the driver's publication linger); sparse: the
 * channel's `sparse` (-1: the driver's term_buffer_sparse_file). NULL with `why` filled. */
exon_dc_ipc_publication_t *exon_dc_create_ipc_publication(exon_driver_conductor_t *c, int64_t registration_id,
    int32_t stream_id, bool exclusive, int64_t linger_ns, int32_t sparse, char *why, size_t why_length);
/* The active non-exclusive IPC publication of `stream_id` (shared by ADD_PUBLICATION), or NULL. */
exon_dc_ipc_publication_t *exon_dc_find_ipc_publication(exon_driver_conductor_t *c, int32_t stream_id);
void exon_dc_free_ipc_publication(exon_driver_conductor_t *c, exon_dc_ipc_publication_t *pub);
/* A publication lost a link; at its last one it drains, then its images go, then it lingers. */
void exon_dc_release_ipc_publication(exon_driver_conductor_t *c, exon_dc_ipc_publication_t *pub, int64_t now_ns);
/* A new IPC publication links to every IPC subscription of its stream. */
void exon_dc_ipc_link_subscriptions(exon_driver_conductor_t *c, exon_dc_ipc_publication_t *pub);
/* A new IPC subscription links to every active IPC publication of its stream. */
void exon_dc_ipc_link_publications(exon_driver_conductor_t *c, exon_dc_subscription_t *sub);
/* A subscription going away: its sub-pos on IPC publications go, without ON_UNAVAILABLE_IMAGE. */
void exon_dc_ipc_unlink_subscription(exon_driver_conductor_t *c, exon_dc_subscription_t *sub);
/* Duty cycle: pub-pos, connection, back pressure, cleaning, pub-lmt, drain and linger. */
int exon_dc_update_ipc_publications(exon_driver_conductor_t *c, int64_t now_ns);

/* ---- receive endpoints and images (exon_conductor_receive_images.c) ----------------- */

/* 0, -1 (the endpoint cannot open: `why` says why) or -2 (a multicast rule broken: `why`). */
int exon_dc_setup_udp_subscription(
    exon_driver_conductor_t *c, exon_dc_subscription_t *sub, const exon_uri_t *uri, char *why, size_t why_length);
void exon_dc_remove_udp_subscription(exon_driver_conductor_t *c, exon_dc_subscription_t *sub);
/* A new UDP subscription links to the active images of its endpoint and stream. */
void exon_dc_link_images(exon_driver_conductor_t *c, exon_dc_subscription_t *sub);
/* Duty cycle: reap the images that are done, then drain the receiver's events (SETUPs
 * become images or are refused; released images, endpoints and counters are freed). */
int exon_dc_update_images(exon_driver_conductor_t *c, int64_t now_ns);
/* Close every endpoint (and its images); the agents are stopped. */
void exon_dc_close_receive_endpoints(exon_driver_conductor_t *c);

#endif /* EXON_CONDUCTOR_INTERNAL_H */
