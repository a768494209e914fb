/*
 * exon_udp_channel.h: the UDP socket under the sender and receiver agents.
 *
 * A channel is one non-blocking datagram socket (IPv4 or IPv6), bound to an address
 * (port 0 = the kernel picks one; exon_udp_channel_open() reports it in ->local), with
 * SO_RCVBUF/SO_SNDBUF set from settings (0 = OS default; the values the kernel granted
 * are read back). Sends are connect-less (sendto/sendmmsg to any address); receives
 * return the source address of each datagram. Batches use recvmmsg/sendmmsg, up to
 * EXON_UDP_BATCH_MAX datagrams per call.
 *
 * Segmentation offload (issue 11), both optional and detected at run time:
 * - GSO (exon_udp_channel_enable_gso): send_batch hands the kernel a run of consecutive
 *   datagrams of one length to one address (the last of the run may be shorter) as one
 *   message with a UDP_SEGMENT cmsg; the kernel (or the NIC) cuts it into exactly the
 *   datagrams a plain sendmmsg would have sent, so the wire does not change. At most
 *   EXON_UDP_GSO_MAX_SEGMENTS datagrams and EXON_UDP_GSO_MAX_BYTES per run. A send that
 *   the kernel refuses as GSO (EIO: no checksum offload on the device; EINVAL, EMSGSIZE, ENOPROTOOPT,
 *   EOPNOTSUPP) turns GSO off for the channel for good and is retried plainly.
 * - GRO (exon_udp_channel_enable_gro): a received buffer may hold several datagrams of
 *   msg.segment_size bytes each (the last may be shorter); exon_udp_msg_split() says how
 *   to cut it. Receive buffers must then be 64 KiB.
 *
 * Nothing here blocks: would-block is 0 datagrams, never an error.
 * Thread-safety: a channel is owned by one agent thread; the fd may be polled by another.
 */
#ifndef EXON_UDP_CHANNEL_H
#define EXON_UDP_CHANNEL_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/exon_common.h"

#define EXON_UDP_BATCH_MAX 64
#define EXON_UDP_ADDR_STORAGE 128
#define EXON_UDP_ADDR_TEXT_MAX 64
#define EXON_UDP_GSO_MAX_SEGMENTS 64     /* the kernel's UDP_MAX_SEGMENTS (older kernels) */
#define EXON_UDP_GSO_MAX_BYTES 65507     /* one IPv4 UDP payload at most */

/* A socket address (struct sockaddr_storage bytes), opaque to Python. */
typedef struct exon_udp_addr_stct
{
    uint8_t storage[EXON_UDP_ADDR_STORAGE];
    uint32_t length;
}
exon_udp_addr_t;

typedef struct exon_udp_channel_stct
{
    int fd;                  /* -1 when closed */
    int32_t family;          /* AF_INET or AF_INET6 */
    exon_udp_addr_t local;   /* the bound address, port filled in */
    int32_t so_rcvbuf;       /* as granted by the kernel */
    int32_t so_sndbuf;
    bool gso;                /* send_batch coalesces equal-length runs (UDP_SEGMENT) */
    bool gro;                /* receives may hold several datagrams (UDP_GRO) */
    int64_t gso_fallbacks;   /* GSO sends refused by the kernel (GSO then off) */
}
exon_udp_channel_t;

typedef struct exon_udp_msg_stct
{
    uint8_t *buffer;
    int32_t capacity;        /* receive: buffer size; send: unused */
    int32_t length;          /* receive: bytes received; send: bytes to send */
    bool truncated;          /* receive: the datagram was longer than capacity */
    int32_t segment_size;    /* receive, GRO: datagrams of this length (the last may be
                              * shorter) fill the buffer; 0 = one datagram */
    exon_udp_addr_t addr;    /* receive: source; send: destination */
}
exon_udp_msg_t;

/* How a received message cuts into datagrams (exon_udp_msg_split): count datagrams from
 * offset 0, each segment_size bytes but the last (last_length); dropped = 1 when a cut
 * tail (a truncated buffer) was left out: count it, do not dispatch it. */
typedef struct exon_udp_segments_stct
{
    int32_t count;
    int32_t segment_size;
    int32_t last_length;
    int32_t dropped;
}
exon_udp_segments_t;

/* Resolve host (numeric IPv4/IPv6 or a name; IPv4 preferred) and port into *addr. */
int exon_udp_addr_resolve(exon_udp_addr_t *addr, const char *host, int32_t port);
/* "a.b.c.d:port" or "[v6]:port" into buf; returns the text length. */
int exon_udp_addr_format(const exon_udp_addr_t *addr, char *buf, size_t buf_length);
int32_t exon_udp_addr_port(const exon_udp_addr_t *addr);
bool exon_udp_addr_equal(const exon_udp_addr_t *a, const exon_udp_addr_t *b);

int exon_udp_channel_open(
    exon_udp_channel_t *channel, const exon_udp_addr_t *bind_addr, int32_t so_rcvbuf, int32_t so_sndbuf);
int32_t exon_udp_channel_local_port(const exon_udp_channel_t *channel);
void exon_udp_channel_close(exon_udp_channel_t *channel);

/* Offload: 1 when the kernel takes it (then on), 0 when it does not (left off). */
int exon_udp_channel_enable_gso(exon_udp_channel_t *channel);
int exon_udp_channel_enable_gro(exon_udp_channel_t *channel);

/* Cut a received message into its datagrams (pure; see exon_udp_segments_t). */
void exon_udp_msg_split(const exon_udp_msg_t *msg, exon_udp_segments_t *out);

/* Bytes sent, 0 when the socket would block, or -errno. */
int exon_udp_channel_send(
    exon_udp_channel_t *channel, const uint8_t *data, int32_t length, const exon_udp_addr_t *to);
/* Messages received into msgs[0..n) (0 when none is waiting), or -errno; with GRO one
 * message may hold several datagrams (msgs[i].segment_size). */
int exon_udp_channel_recv_batch(exon_udp_channel_t *channel, exon_udp_msg_t *msgs, int32_t count);
/* Datagrams sent from msgs[0..n) (0 when the socket would block), or -errno. With GSO,
 * runs of equal-length datagrams go as one message each; the count is still datagrams. */
int exon_udp_channel_send_batch(exon_udp_channel_t *channel, exon_udp_msg_t *msgs, int32_t count);

#endif /* EXON_UDP_CHANNEL_H */
