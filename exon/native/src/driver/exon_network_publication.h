/*
 * exon_network_publication.h: the sender side of one UDP publication (Aeron's
 * NetworkPublication), driven by the sender agent.
 *
 * The conductor creates the log, the counters and the socket and hands the publication to
 * the sender (under the sender lock). Each sender duty cycle calls
 * exon_network_publication_send() and _poll_control():
 *   - SETUP every 100 ms until the first status message (SM), and at once after an SM
 *     that carries the SETUP flag;
 *   - DATA from snd-pos up to snd-lmt (last SM position + receiver window), several
 *     frames per datagram up to the MTU, a PAD frame as its 32-byte header alone;
 *   - a heartbeat (0-length DATA at snd-pos) after 100 ms without data; with the EOS flag
 *     once the publication is closing and everything was sent;
 *   - NAK -> retransmit (exon_retransmit_handler: at once, then linger); RTTM -> reply;
 *   - connected while SMs arrive; not connected after connection_timeout_ns without one.
 * On a multicast channel (`multicast`) the destination is the data group and the socket is
 * joined to the control group: SMs of every receiver arrive there and exon_flow_control
 * (fc=min, the default, or fc=max) turns them into snd-lmt; RTTM replies go to the data
 * group (Aeron does the same), where the asking receiver picks its own by receiver id.
 *
 * Thread-safety: the sender agent only, except the fields documented as conductor-owned
 * (state, end_of_stream_position), which the conductor writes with release stores.
 */
#ifndef EXON_NETWORK_PUBLICATION_H
#define EXON_NETWORK_PUBLICATION_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"
#include "concurrent/exon_logbuffer.h"
#include "concurrent/exon_counters.h"
#include "media/exon_udp_channel.h"
#include "driver/exon_retransmit_handler.h"
#include "media/exon_loss_generator.h"
#include "driver/exon_flow_control.h"

#define EXON_NP_HEARTBEAT_TIMEOUT_NS (100LL * 1000 * 1000)
#define EXON_NP_SETUP_TIMEOUT_NS (100LL * 1000 * 1000)
#define EXON_NP_BATCH 16       /* control datagrams read per poll */
#define EXON_NP_SEND_BATCH 64  /* data datagrams per send (one sendmmsg; GSO coalesces runs) */

#define EXON_NP_ACTIVE 0
#define EXON_NP_DRAINING 1  /* no more offers; send the rest, then EOS heartbeats */
#define EXON_NP_LINGER 2
#define EXON_NP_CLOSED 3    /* the sender drops it at its next cycle */

typedef struct exon_network_publication_stct
{
    exon_log_t *log;                 /* conductor-owned mapping */
    exon_counters_t *counters;
    exon_udp_channel_t channel;      /* owned: opened by the conductor, closed on free */
    exon_udp_addr_t destination;
    exon_retransmit_handler_t retransmit;
    exon_loss_generator_t *send_loss; /* may be NULL */
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t term_length;
    int32_t bits;
    int32_t mtu;
    int32_t snd_pos_id;
    int32_t snd_lmt_id;
    int64_t snd_pos;
    int64_t snd_lmt;
    int64_t last_send_ns;
    int64_t last_setup_ns;
    int64_t last_sm_ns;
    int64_t connection_timeout_ns;
    int64_t heartbeat_interval_ns;
    int64_t setup_interval_ns;
    bool has_sm;
    bool send_setup;
    bool connected;
    volatile int32_t state;           /* EXON_NETPUB_*, written by the conductor */
    int64_t end_of_stream_position;   /* set by the conductor before DRAINING */
    int64_t receiver_id;
    volatile int32_t sender_released; /* 1 once the sender dropped it (REMOVE_PUBLICATION) */
    bool multicast;
    int32_t ttl;                      /* multicast TTL carried in SETUP (0 = default) */
    exon_flow_control_t fc;
    uint8_t ctrl_buf[EXON_NP_BATCH][512];
}
exon_network_publication_t;

/* Timers and retransmit policy of a network publication (0 fields take the defaults). */
typedef struct exon_network_publication_params_stct
{
    int64_t connection_timeout_ns;
    int64_t heartbeat_interval_ns;
    int64_t setup_interval_ns;
    int64_t retransmit_delay_ns;
    int64_t retransmit_linger_ns;
    int32_t max_resend;
    bool multicast;                   /* destination is a multicast data group */
    int32_t ttl;
    int32_t flow_control;             /* EXON_FC_*; multicast defaults to EXON_FC_MIN */
    int64_t fc_receiver_timeout_ns;   /* 0 = EXON_FC_RECEIVER_TIMEOUT_DEFAULT_NS */
}
exon_network_publication_params_t;

/* Initialise over an open log and an open channel (both stay valid while in use). */
int exon_network_publication_init(
    exon_network_publication_t *pub,
    exon_log_t *log,
    exon_counters_t *counters,
    const exon_udp_addr_t *destination,
    int32_t snd_pos_id,
    int32_t snd_lmt_id,
    const exon_network_publication_params_t *params,
    exon_loss_generator_t *send_loss,
    int64_t now_ns);

/* Send SETUP/DATA/heartbeats due now; returns the work count. */
int exon_network_publication_send(exon_network_publication_t *pub, int64_t now_ns);

/* Read SM/NAK/RTTM from the publication's socket and act on them; returns the work count. */
int exon_network_publication_poll_control(exon_network_publication_t *pub, int64_t now_ns);

/* Act on one control datagram (also used by tests). */
void exon_network_publication_on_control(
    exon_network_publication_t *pub, const uint8_t *buf, int32_t length, const exon_udp_addr_t *from, int64_t now_ns);

#endif /* EXON_NETWORK_PUBLICATION_H */
