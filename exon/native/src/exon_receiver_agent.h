/*
 * exon_receiver_agent.h: the receiving half of the UDP transport as pure duty cycles.
 *
 * exon_net_image_t rebuilds one publication's stream (one session of a subscribed stream)
 * into an image log buffer:
 *   - DATA frames go into the term at their offset whatever the arrival order, duplicates
 *     ignored (exon_term_rebuilder_insert); data outside [last SM position, + window] is an
 *     under-run / over-run, dropped and counted; heartbeats move the high-water mark and an
 *     EOS heartbeat records the end-of-stream position in the log;
 *   - gaps are NAKed after the NAK delay and re-NAKed after the retry delay
 *     (exon_loss_detector);
 *   - SMs go out when the consumers moved > window / 4, the window changed, or 200 ms
 *     passed (exon_sm_scheduler), with the static window min(term / 2, 128 KiB);
 *   - terms are cleaned behind the consumers (consumed - term_length) before reuse;
 *   - no packet for liveness_timeout (10 s), or end of stream consumed: state DONE.
 * exon_receiver_agent_t owns one receive channel (bound to the endpoint): it reads batches
 * (recvmmsg), checks every datagram (exon_datagram_check), applies the debug receive loss,
 * routes DATA to images, queues SETUPs of subscribed streams for the conductor, asks
 * unknown sessions of subscribed streams for a SETUP (SM with SEND_SETUP, at most every
 * setup_elicit_interval; never for an EOS heartbeat), and retires images that are DONE.
 * A retired image's (session, stream) is then ignored until it has been silent for
 * image_cool_down_ns, so the EOS heartbeats of a lingering publication do not re-create it.
 *
 * Hook for the driver conductor (H3): subscribe stream ids (exon_receiver_agent_subscribe)
 * on ADD_SUBSCRIPTION for the endpoint; each duty cycle, drain
 * exon_receiver_agent_take_setup(): create the image log from the SETUP (exon_log_create,
 * type IMAGE, term_length/mtu/initial_term_id/session/stream from the SETUP), call
 * exon_net_image_init(), point consumer_position at the subscribers' min position (or the
 * single sub-pos counter) and announce the image to clients; then exon_receiver_agent_add_image.
 * Drain exon_receiver_agent_take_removed() to tell clients the image went away and free it.
 * Counters: rcv-hwm = image->hwm_position, rcv-pos = image->rebuild_position.
 *
 * Thread-safety: images and the agent belong to the receiver thread; consumer_position is
 * read with acquire loads (written by subscribers).
 */
#ifndef EXON_RECEIVER_AGENT_H
#define EXON_RECEIVER_AGENT_H

#include <stdint.h>
#include <stdbool.h>

#include "exon_common.h"
#include "exon_layout.h"
#include "exon_logbuffer.h"
#include "exon_udp_channel.h"
#include "exon_loss_detector.h"
#include "exon_loss_generator.h"
#include "exon_flow_control.h"

#define EXON_NETIMG_ACTIVE 0
#define EXON_NETIMG_DONE_TIMEOUT 1
#define EXON_NETIMG_DONE_EOS 2

#define EXON_RECEIVER_MAX_IMAGES 64
#define EXON_RECEIVER_MAX_STREAMS 64
#define EXON_RECEIVER_MAX_PENDING 16
#define EXON_RECEIVER_RX_BATCH 16
#define EXON_RECEIVER_RX_BUFFER 65536

typedef struct exon_net_image_params_stct
{
    int32_t initial_window_length;   /* 128 KiB; the window is min(term / 2, this) */
    int64_t sm_timeout_ns;           /* 200 ms */
    int64_t liveness_timeout_ns;     /* 10 s */
    int64_t nak_delay_ns;            /* 1 us */
    int64_t nak_retry_delay_ns;      /* 100 us */
}
exon_net_image_params_t;

typedef struct exon_net_image_stats_stct
{
    int64_t packets;
    int64_t frames_inserted;
    int64_t heartbeats_received;
    int64_t naks_sent;
    int64_t sms_sent;
    int64_t under_runs;
    int64_t over_runs;
    int64_t bad_packets;
}
exon_net_image_stats_t;

typedef struct exon_net_image_stct
{
    exon_log_t *log;
    exon_udp_channel_t *channel;
    exon_udp_addr_t control;          /* where SMs and NAKs go: the sender's address */
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t term_length;
    int32_t bits;
    int32_t window;
    int32_t state;
    int64_t receiver_id;
    int64_t join_position;
    int64_t rebuild_position;         /* rcv-pos: all complete below */
    int64_t hwm_position;             /* rcv-hwm */
    int64_t clean_position;
    int64_t eos_position;             /* INT64_MAX until an EOS heartbeat */
    int64_t *consumer_position;       /* min subscriber position (acquire loads) */
    int64_t consumer_position_local;  /* default target of consumer_position */
    int64_t last_packet_ns;
    exon_loss_detector_t loss;
    exon_sm_scheduler_t sm;
    exon_net_image_params_t params;
    exon_net_image_stats_t stats;
}
exon_net_image_t;

void exon_net_image_default_params(exon_net_image_params_t *params);

/* 0 when a SETUP can make an image (term length, mtu, offsets sane), else EXON_E_ARGUMENT. */
int exon_setup_check(const exon_setup_header_t *setup);

/* The log must match the SETUP (term length, initial term id, session, stream). */
int exon_net_image_init(
    exon_net_image_t *image,
    exon_log_t *log,
    exon_udp_channel_t *channel,
    const exon_udp_addr_t *control,
    const exon_setup_header_t *setup,
    int64_t receiver_id,
    const exon_net_image_params_t *params,
    int64_t now_ns);

/* A checked DATA/PAD datagram of this session; frames inserted (>= 0). */
int exon_net_image_on_data(exon_net_image_t *image, const uint8_t *packet, int32_t length, int64_t now_ns);
/* Loss detection, NAKs, SMs, cleaning, liveness; the work count or -errno. */
int exon_net_image_do_work(exon_net_image_t *image, int64_t now_ns);
/* Tell the sender this image is closing (SM with EOS). */
int exon_net_image_send_eos(exon_net_image_t *image);

typedef struct exon_setup_request_stct
{
    exon_setup_header_t setup;
    exon_udp_addr_t source;
    exon_udp_channel_t *channel;
}
exon_setup_request_t;

typedef struct exon_receiver_agent_stct
{
    exon_udp_channel_t *channel;
    int32_t streams[EXON_RECEIVER_MAX_STREAMS];
    int32_t stream_count;
    exon_net_image_t *images[EXON_RECEIVER_MAX_IMAGES];
    int32_t image_count;
    exon_setup_request_t pending[EXON_RECEIVER_MAX_PENDING];
    int32_t pending_count;
    exon_net_image_t *removed[EXON_RECEIVER_MAX_IMAGES];
    int32_t removed_count;
    struct { int32_t session_id; int32_t stream_id; int64_t at_ns; } elicited[EXON_RECEIVER_MAX_PENDING];
    int32_t elicit_next;
    int64_t setup_elicit_interval_ns; /* 100 ms */
    /* a retired image's session is ignored until it has been silent for image_cool_down_ns */
    struct { int32_t session_id; int32_t stream_id; int64_t until_ns; } cool_down[EXON_RECEIVER_MAX_IMAGES];
    int64_t image_cool_down_ns;       /* 1 s */
    int32_t max_setup_term_length;    /* SETUPs asking for longer terms are refused (counted invalid) */
    int64_t cool_down_packets;
    exon_loss_generator_t receive_loss;
    int64_t invalid_packets;
    int64_t unknown_stream_packets;
    int64_t setups_elicited;
    int64_t receive_loss_drops;
    exon_udp_msg_t rx[EXON_RECEIVER_RX_BATCH];
    uint8_t *rx_memory;               /* EXON_RECEIVER_RX_BATCH x 64 KiB */
}
exon_receiver_agent_t;

int exon_receiver_agent_init(
    exon_receiver_agent_t *agent, exon_udp_channel_t *channel, double receive_loss_rate, int64_t receive_loss_seed);
void exon_receiver_agent_fini(exon_receiver_agent_t *agent);
int exon_receiver_agent_subscribe(exon_receiver_agent_t *agent, int32_t stream_id);
int exon_receiver_agent_unsubscribe(exon_receiver_agent_t *agent, int32_t stream_id);
/* 1 and *out filled when a SETUP waits for an image, else 0. */
int exon_receiver_agent_take_setup(exon_receiver_agent_t *agent, exon_setup_request_t *out);
int exon_receiver_agent_add_image(exon_receiver_agent_t *agent, exon_net_image_t *image);
/* 1 and *out set when an image was retired (timed out or end of stream), else 0. */
int exon_receiver_agent_take_removed(exon_receiver_agent_t *agent, exon_net_image_t **out);
int exon_receiver_agent_do_work(exon_receiver_agent_t *agent, int64_t now_ns);

#endif /* EXON_RECEIVER_AGENT_H */
