/*
 * exon_sender_agent.h: the sending half of the UDP transport as pure duty cycles.
 *
 * exon_net_publication_t drives one network publication (a log buffer written by
 * publishers) onto one UDP channel:
 *   - SETUP every setup_interval (100 ms) until the first SM, and at once when an SM
 *     carries SEND_SETUP;
 *   - DATA only within the sender limit (max(limit, SM position + receiver window)),
 *     frames packed into datagrams up to the MTU straight from the term (zero copy),
 *     a term's PAD sent as its 32-byte header closing the datagram;
 *   - a heartbeat after heartbeat_interval (100 ms) without data, once connected;
 *   - NAKs answered through the retransmit handler (resend now, then linger);
 *   - RTTM requests echoed;
 *   - not connected again after connection_timeout (5 s) without SM;
 *   - after exon_net_publication_close(): the remaining data, then EOS heartbeats for the
 *     linger period, then DONE.
 * exon_sender_agent_t holds publications, polls their channels for control frames
 * (recvmmsg), dispatches them by (session, stream), and runs each publication's duty
 * cycle. Everything takes now_ns; the caller owns logs, channels and timers.
 *
 * Hook for the driver conductor (H3): on ADD_PUBLICATION for a udp channel, create the
 * log (exon_log_create), open/bind a channel (exon_udp_channel_open on 0.0.0.0:0 or the
 * interface), resolve the endpoint (exon_udp_addr_resolve), exon_net_publication_init(),
 * point snd_pos/snd_lmt at counters, and hand the publication to the sender thread
 * (exon_sender_agent_add, on the sender's thread via its command queue). Publishers'
 * pub-lmt = snd-pos + term window (clean the log behind snd-pos - term_length first).
 * On close: exon_net_publication_close(), and remove/free once is_done().
 *
 * Thread-safety: a publication and the agent belong to the sender thread. The counters
 * it publishes (snd_pos, snd_lmt, meta->is_connected) are written with release stores.
 */
#ifndef EXON_SENDER_AGENT_H
#define EXON_SENDER_AGENT_H

#include <stdint.h>
#include <stdbool.h>

#include "exon_common.h"
#include "exon_layout.h"
#include "exon_logbuffer.h"
#include "exon_udp_channel.h"
#include "exon_retransmit_handler.h"
#include "exon_loss_generator.h"

#define EXON_NETPUB_ACTIVE 0
#define EXON_NETPUB_DRAINING 1
#define EXON_NETPUB_DONE 2

#define EXON_SENDER_MAX_PUBLICATIONS 64
#define EXON_SENDER_RX_BATCH 16
#define EXON_SENDER_RX_BUFFER 2048
#define EXON_SENDER_MAX_DATAGRAMS_PER_CYCLE 16

typedef struct exon_net_publication_params_stct
{
    int64_t setup_interval_ns;       /* 100 ms */
    int64_t heartbeat_interval_ns;   /* 100 ms */
    int64_t connection_timeout_ns;   /* 5 s */
    int64_t linger_ns;               /* 5 s */
    int64_t retransmit_delay_ns;     /* 0 */
    int64_t retransmit_linger_ns;    /* 10 ms */
    int32_t max_resend;              /* 16 */
    int32_t max_datagrams_per_cycle; /* <= EXON_SENDER_MAX_DATAGRAMS_PER_CYCLE */
    double send_loss_rate;           /* debug: drop this share of DATA datagrams */
    int64_t send_loss_seed;
}
exon_net_publication_params_t;

typedef struct exon_net_publication_stats_stct
{
    int64_t data_datagrams;
    int64_t data_bytes;
    int64_t setups_sent;
    int64_t heartbeats_sent;
    int64_t eos_heartbeats_sent;
    int64_t retransmits;
    int64_t retransmitted_bytes;
    int64_t naks_received;
    int64_t sms_received;
    int64_t rttm_replies;
    int64_t short_sends;
    int64_t send_loss_drops;
}
exon_net_publication_stats_t;

typedef struct exon_net_publication_stct
{
    exon_log_t *log;
    exon_udp_channel_t *channel;
    exon_udp_addr_t destination;
    int32_t session_id;
    int32_t stream_id;
    int32_t initial_term_id;
    int32_t term_length;
    int32_t bits;
    int32_t mtu;
    int32_t state;
    bool connected;
    bool should_send_setup;
    int32_t receiver_window;
    int64_t receiver_id;
    int64_t sender_position;          /* snd-pos */
    int64_t sender_limit;             /* snd-lmt */
    int64_t *snd_pos_counter;         /* optional mirrors (release stores), NULL = none */
    int64_t *snd_lmt_counter;
    int64_t last_data_ns;
    int64_t last_setup_ns;
    int64_t last_sm_ns;
    int64_t linger_deadline_ns;       /* 0 until the drained publication starts lingering */
    exon_retransmit_handler_t retransmit;
    exon_loss_generator_t send_loss;
    exon_net_publication_params_t params;
    exon_net_publication_stats_t stats;
}
exon_net_publication_t;

/* Aeron's defaults. */
void exon_net_publication_default_params(exon_net_publication_params_t *params);

/* The publication starts at the log's producer position; mtu/term from the log. */
int exon_net_publication_init(
    exon_net_publication_t *pub,
    exon_log_t *log,
    exon_udp_channel_t *channel,
    const exon_udp_addr_t *destination,
    const exon_net_publication_params_t *params,
    int64_t now_ns);

/* SETUP / DATA / heartbeat / timeouts; returns the work count (>= 0) or -errno. */
int exon_net_publication_send(exon_net_publication_t *pub, int64_t now_ns);

/* A validated SM, NAK or RTTM for this (session, stream); returns work done (0/1). */
int exon_net_publication_on_control(
    exon_net_publication_t *pub, const uint8_t *frame, int32_t length,
    const exon_udp_addr_t *source, int64_t now_ns);

void exon_net_publication_close(exon_net_publication_t *pub, int64_t now_ns);
bool exon_net_publication_is_done(const exon_net_publication_t *pub);

typedef struct exon_sender_agent_stct
{
    exon_net_publication_t *publications[EXON_SENDER_MAX_PUBLICATIONS];
    int32_t publication_count;
    int64_t invalid_packets;
    int64_t unknown_session_packets;
    exon_udp_msg_t rx[EXON_SENDER_RX_BATCH];
    uint8_t rx_buffers[EXON_SENDER_RX_BATCH][EXON_SENDER_RX_BUFFER];
}
exon_sender_agent_t;

void exon_sender_agent_init(exon_sender_agent_t *agent);
int exon_sender_agent_add(exon_sender_agent_t *agent, exon_net_publication_t *pub);
int exon_sender_agent_remove(exon_sender_agent_t *agent, exon_net_publication_t *pub);
/* Poll control frames, run every publication; the work count, or -errno from a socket. */
int exon_sender_agent_do_work(exon_sender_agent_t *agent, int64_t now_ns);

#endif /* EXON_SENDER_AGENT_H */
