/*
 * exon_bench_net.h: native loops for `exon bench transport` over a running driver (UDP or
 * IPC channels): a throughput loop (publisher thread + subscriber thread; the driver owns
 * flow control, unlike exon_bench_ipc) and a ping-pong round-trip loop.
 *
 * Thread safety: each call runs its own threads; the caller must not use the publications
 * or images meanwhile.
 */
#ifndef EXON_BENCH_NET_H
#define EXON_BENCH_NET_H

#include <stdint.h>

#include "client/exon_publication.h"
#include "client/exon_image.h"
#include "exon_bench_ipc.h"

/* Offer msg_len-byte messages for duration_ns on one thread, poll them on another. */
int exon_bench_net_throughput(
    exon_publication_t *pub, exon_image_t *img, int32_t msg_len, int64_t duration_ns, exon_bench_result_t *result);

/*
 * `count` round trips of msg_len bytes: this thread offers on ping_pub and busy-polls
 * pong_img; a second thread echoes from ping_img onto pong_pub. rtt_ns[i] receives each
 * round trip (ns). Returns the number of round trips done or a negative code.
 */
int64_t exon_bench_net_pingpong(
    exon_publication_t *ping_pub,
    exon_image_t *ping_img,
    exon_publication_t *pong_pub,
    exon_image_t *pong_img,
    int32_t msg_len,
    int64_t count,
    int64_t timeout_ns,
    int64_t *rtt_ns);

/*
 * The physical floor of a UDP round trip on this host: two UDP sockets on 127.0.0.1, no
 * driver, no log. This thread sends msg_len bytes and blocks in recv for the echo; a second
 * thread blocks in recv and echoes (one blocking recv per side, as a bare C ping-pong).
 * `count` round trips after count/10 warm-up ones; rtt_ns[i] receives each (ns). Each recv
 * waits at most timeout_ns. Returns the number of round trips done or a negative code.
 */
int64_t exon_bench_udp_floor(int32_t msg_len, int64_t count, int64_t timeout_ns, int64_t *rtt_ns);

#endif /* EXON_BENCH_NET_H */
