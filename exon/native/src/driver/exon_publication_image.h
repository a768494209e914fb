/*
 * exon_publication_image.h: the receiver side of UDP (Aeron's ReceiveChannelEndpoint,
 * DataPacketDispatcher and PublicationImage), driven by the receiver agent.
 *
 * A receive endpoint is one bound UDP socket (aeron:udp?endpoint=HOST:PORT) shared by the
 * subscriptions on that endpoint. Per datagram (recvmmsg batches):
 *   - DATA/PAD for a known image, from the address its SETUP came from: validated (frames back to back, 32-byte aligned, inside
 *     the term, version 0), checked against the flow-control window (under/over-runs
 *     counted and dropped), inserted into the image's term whatever the order; heartbeats
 *     raise the high-water mark; the EOS flag records the end-of-stream position;
 *   - DATA for an unknown session of a subscribed stream: an SM with the SETUP flag goes
 *     back to the source (at most once per ms) to elicit a SETUP;
 *   - SETUP for a subscribed stream without image: queued for the conductor, which creates
 *     the image log and tells the subscriptions (ON_AVAILABLE_IMAGE); a SETUP whose term
 *     length exceeds max_term_length (the driver's max_image_term_length) is counted invalid
 *     and dropped. The image table is bounded and strangers cannot fill it for good
 *     (issue 13: ten SETUPs a second locked new peers out):
 *       - at most max_images images plus queued SETUPs live per endpoint (the driver's
 *         max_images_per_endpoint, <= EXON_ENDPOINT_MAX_IMAGES);
 *       - a source address (IP and port) holds at most max_unverified_per_source entries
 *         (queued SETUPs + images) that are not verified; its next SETUP evicts its oldest
 *         unverified image, or is dropped when only queued ones are left;
 *       - when the table is full a new SETUP evicts the oldest unverified image, else the
 *         verified image quiet for longest if quiet past idle_eviction_ns; a verified image
 *         that still hears from its source is never evicted: the SETUP is dropped;
 *     evicted images go INACTIVE (the conductor removes them, the subscriptions are told)
 *     and count IMAGES_EVICTED; dropped SETUPs count SETUPS_DROPPED. An image is verified
 *     once its source proved real: data contiguous from the join position arrived, or an
 *     RTTM answer echoed the image's own request from the image's source. Until then its
 *     gaps are not NAKed (exon_loss_detector) and it asks for an RTT every
 *     EXON_RTTM_UNVERIFIED_INTERVAL_NS;
 *   - RTTM without the reply flag is answered; anything else is counted invalid and dropped.
 * A multicast endpoint (exon_receive_endpoint_open_multicast) is joined to the data group
 * and sends every control frame (SMs, NAKs, SETUP requests, RTT requests) to the control
 * group, where the publisher and its other receivers' publishers listen; RTT answers for
 * other receivers (the sender sends them to the data group) are ignored, not counted. Its
 * images still take data only from their SETUP's source address.
 * Per image and duty cycle: gap scan + NAK (exon_loss_detector), SMs as the subscribers
 * consume (window / 4) or every sm_timeout, cleaning behind the slowest subscriber, EOS,
 * and liveness (no packet for liveness_timeout_ns -> INACTIVE; the conductor removes it).
 *
 * Thread-safety: an endpoint's image list, stream list and queued SETUPs, and an image's
 * sub-pos ids, belong to the thread running the receiver's duty cycle (under the driver's
 * receiver lock; exon_receiver.c); the conductor changes them only through the receiver's
 * command queue, and hears of queued SETUPs and releases through the receiver's event
 * queue. The conductor reads `state` with acquire loads; it owns `refcount` and `closing`.
 */
#ifndef EXON_PUBLICATION_IMAGE_H
#define EXON_PUBLICATION_IMAGE_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"
#include "concurrent/exon_logbuffer.h"
#include "concurrent/exon_counters.h"
#include "media/exon_udp_channel.h"
#include "driver/exon_loss_detector.h"
#include "driver/exon_flow_control.h"
#include "media/exon_loss_generator.h"
#include "driver/exon_feedback_delay.h"

#define EXON_IMAGE_MAX_SUBSCRIBERS 16
#define EXON_ENDPOINT_MAX_IMAGES 1024          /* capacity; the driver setting limits it */
#define EXON_ENDPOINT_DEFAULT_IMAGES 64
#define EXON_ENDPOINT_DEFAULT_UNVERIFIED_PER_SOURCE 4
#define EXON_ENDPOINT_DEFAULT_IDLE_EVICTION_NS (2000LL * 1000 * 1000)
#define EXON_ENDPOINT_MAX_STREAMS 32
#define EXON_ENDPOINT_MAX_PENDING 16
#define EXON_ENDPOINT_BATCH 16
#define EXON_ENDPOINT_BUFFER_LENGTH (64 * 1024)

#define EXON_RTTM_INTERVAL_NS (1000LL * 1000 * 1000) /* an image asks for an RTT this often */
#define EXON_RTTM_UNVERIFIED_INTERVAL_NS (250LL * 1000 * 1000) /* ... and this often until verified */
#define EXON_HEARD_STEP_NS (10LL * 1000 * 1000) /* rcv-heard is set at most this often */

#define EXON_IMAGE_ACTIVE 0
#define EXON_IMAGE_EOS 1       /* every byte up to the EOS position arrived */
#define EXON_IMAGE_INACTIVE 2  /* timed out (or closing): the receiver no longer touches it */

typedef struct exon_receive_endpoint_stct exon_receive_endpoint_t;

typedef struct exon_publication_image_stct
{
    exon_log_t *log;                  /* conductor-owned mapping */
    exon_counters_t *counters;
    exon_receive_endpoint_t *endpoint;
    int64_t correlation_id;
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t term_length;
    int32_t bits;
    int32_t window;
    int32_t rcv_hwm_id;
    int32_t rcv_pos_id;
    int32_t sub_pos_ids[EXON_IMAGE_MAX_SUBSCRIBERS];
    int32_t sub_pos_count;
    int64_t join_position;
    int64_t hwm;
    int64_t rcv_pos;
    int64_t clean_position;
    int64_t last_consumed;            /* min sub-pos seen at the last duty cycle */
    int64_t last_packet_ns;
    int64_t liveness_timeout_ns;
    int64_t eos_position;
    bool eos_seen;
    volatile int32_t state;
    exon_loss_detector_t loss;
    exon_sm_scheduler_t sm;
    exon_udp_addr_t control_addr;
    int64_t last_rttm_ns;             /* last RTTM request sent */
    int64_t rtt_ns;                   /* last measured round trip (0 before the first) */
    int32_t rtt_id;                   /* rcv-rtt counter, -1 when none */
    int32_t heard_id;                 /* rcv-heard counter, -1 when none (the conductor
                                       * allocates it once the image is verified) */
    int64_t heard_ns;                 /* last_packet_ns when rcv-heard was last set */
    bool wake_readers;                /* frames inserted in this batch: ring the readers
                                       * asleep on the log once the batch is done */
    int64_t created_ns;               /* when the conductor made it (eviction order) */
    bool evicted;                     /* made INACTIVE to make room (counted) */
    exon_feedback_delay_t nak_delay;  /* multicast: each new gap's NAK delay is drawn from
                                       * it (max_backoff_ns 0: the detector's static delay) */
}
exon_publication_image_t;

typedef struct exon_pending_setup_stct
{
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t active_term_id;
    int32_t term_offset;
    int32_t term_length;
    int32_t mtu;
    exon_udp_addr_t source;
}
exon_pending_setup_t;

/* A queued SETUP as the receiver reports it to the conductor (EXON_RCV_EVT_SETUP): malloc'd
 * by the receiver; the conductor frees it, or hands it back with EXON_RCV_CMD_SETUP_REFUSED. */
typedef struct exon_receiver_setup_stct
{
    exon_receive_endpoint_t *endpoint;
    exon_pending_setup_t setup;
}
exon_receiver_setup_t;

struct exon_receive_endpoint_stct
{
    exon_udp_channel_t channel;
    exon_counters_t *counters;
    exon_loss_generator_t loss;
    bool loss_enabled;
    int64_t receiver_id;
    int64_t last_elicit_ns;
    int32_t stream_ids[EXON_ENDPOINT_MAX_STREAMS];  /* receiver (ADD/REMOVE_STREAM) */
    int32_t stream_refs[EXON_ENDPOINT_MAX_STREAMS];
    int32_t stream_count;
    exon_publication_image_t *images[EXON_ENDPOINT_MAX_IMAGES];
    int32_t image_count;
    exon_pending_setup_t pending[EXON_ENDPOINT_MAX_PENDING];
    int32_t pending_count;
    int32_t refcount;                                 /* subscriptions using it (conductor) */
    bool closing;                                     /* REMOVE_ENDPOINT sent, not yet released
                                                       * (conductor) */
    int32_t max_term_length;                          /* SETUPs over it are invalid (set before use) */
    int32_t max_images;                               /* images + queued SETUPs (set before use) */
    int32_t max_unverified_per_source;                /* per source address (set before use) */
    int64_t idle_eviction_ns;                         /* a verified image quiet this long may go */
    bool multicast;                                   /* joined to a data group */
    exon_udp_addr_t control_group;                    /* multicast: where control frames go */
    char bind_text[EXON_UDP_ADDR_TEXT_MAX];           /* as asked: "host:port" */
    char bound_text[EXON_UDP_ADDR_TEXT_MAX];          /* as bound */
    uint8_t *buffers;                                 /* EXON_ENDPOINT_BATCH x BUFFER_LENGTH: 64 KiB,
                                                       * as a UDP GRO read may fill it with
                                                       * up to 64 KiB of datagrams */
};

/* Open the socket (bound to addr) and the buffers. */
int exon_receive_endpoint_open(
    exon_receive_endpoint_t *ep,
    const exon_udp_addr_t *addr,
    exon_counters_t *counters,
    int32_t so_rcvbuf,
    double loss_rate,
    int64_t loss_seed,
    int64_t receiver_id);

/* Open a multicast endpoint: joined to `group` on `iface` (NULL = the kernel's choice);
 * control frames go to the group's control group. */
int exon_receive_endpoint_open_multicast(
    exon_receive_endpoint_t *ep,
    const exon_udp_addr_t *group,
    const exon_udp_addr_t *iface,
    exon_counters_t *counters,
    int32_t so_rcvbuf,
    double loss_rate,
    int64_t loss_seed,
    int64_t receiver_id);

void exon_receive_endpoint_close(exon_receive_endpoint_t *ep);

/* Receive and dispatch a batch; returns the work count. */
int exon_receive_endpoint_poll(exon_receive_endpoint_t *ep, int64_t now_ns);

/* Dispatch one datagram (tests and the poll loop). */
void exon_receive_endpoint_on_datagram(
    exon_receive_endpoint_t *ep, const uint8_t *buf, int32_t length, const exon_udp_addr_t *from, int64_t now_ns);

bool exon_receive_endpoint_has_stream(const exon_receive_endpoint_t *ep, int32_t stream_id);

/* Take a queued SETUP off the list (receiver). */
void exon_receive_endpoint_unqueue(exon_receive_endpoint_t *ep, int32_t session_id, int32_t stream_id);

/* Initialise an image over its (fresh) log after a SETUP; positions start at join. */
void exon_publication_image_init(
    exon_publication_image_t *img,
    exon_log_t *log,
    exon_counters_t *counters,
    exon_receive_endpoint_t *ep,
    const exon_pending_setup_t *setup,
    int32_t rcv_hwm_id,
    int32_t rcv_pos_id,
    int32_t window,
    int64_t liveness_timeout_ns,
    int64_t sm_timeout_ns,
    int64_t now_ns);

/* The image's source proved real (data from the join, or an RTTM echo): NAKs may go. */
static inline bool exon_publication_image_verified(const exon_publication_image_t *img)
{
    return img->loss.verified;
}

/* Gap scan/NAK, SM, cleaning, EOS and liveness; returns the work count. */
int exon_publication_image_do_work(exon_publication_image_t *img, int64_t now_ns);

/* min(sub-pos) of the image's subscribers (rcv_pos when none). */
int64_t exon_publication_image_min_sub_pos(exon_publication_image_t *img);

#endif /* EXON_PUBLICATION_IMAGE_H */
