/*
 * exon_udp_loop.h: a native end-to-end loop over the UDP agents, for the loss tests and
 * the transport benchmark. One thread plays publisher, sender agent, receiver agent, a
 * miniature conductor (log creation, pub-lmt from snd-pos with cleaning, image creation
 * from SETUP) and subscriber, over real UDP on 127.0.0.1 (ports picked by the kernel).
 *
 * Messages are message_length bytes (>= 8): the little-endian sequence number, then
 * bytes (uint8_t)(seq + j). With verify set the subscriber checks every message's
 * order and content and counts errors.
 *
 * Thread-safety: self-contained; each call uses its own sockets and log files (created in
 * `directory` and removed before returning).
 */
#ifndef EXON_UDP_LOOP_H
#define EXON_UDP_LOOP_H

#include <stdint.h>
#include <stdbool.h>

#include "exon_common.h"

typedef struct exon_udp_loop_params_stct
{
    const char *directory;
    int32_t term_length;        /* 0 -> 64 KiB */
    int32_t mtu;                /* 0 -> 1408 */
    int32_t message_length;     /* >= 8 */
    int64_t message_count;
    double receive_loss_rate;
    double send_loss_rate;
    int64_t loss_seed;
    int64_t timeout_ns;         /* 0 -> 60 s */
    bool verify;
}
exon_udp_loop_params_t;

typedef struct exon_udp_loop_result_stct
{
    int64_t messages_received;
    int64_t bytes_received;
    int64_t errors;             /* out of order or corrupt messages */
    int64_t elapsed_ns;         /* from the first offer to the last message received */
    int64_t naks_sent;
    int64_t naks_received;
    int64_t retransmits;
    int64_t receive_loss_drops;
    int64_t send_loss_drops;
    int64_t data_datagrams;
    int64_t sms_sent;
    int64_t heartbeats_sent;
    int64_t setups_sent;
}
exon_udp_loop_result_t;

/* 0 when every message arrived (errors may still be > 0), EXON_E_TIMEOUT, or an error. */
int exon_udp_loop_run(const exon_udp_loop_params_t *params, exon_udp_loop_result_t *result);

#endif /* EXON_UDP_LOOP_H */
