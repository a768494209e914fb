/* exon_udp_channel.c: non-blocking UDP sockets with recvmmsg/sendmmsg batches. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "media/exon_udp_channel.h"

#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h, Linux 4.18 */
#endif
#ifndef UDP_GRO
#define UDP_GRO 104     /* linux/udp.h, Linux 5.0 */
#endif

_Static_assert(sizeof(struct sockaddr_storage) <= EXON_UDP_ADDR_STORAGE, "sockaddr_storage fits");

int exon_udp_addr_resolve(exon_udp_addr_t *addr, const char *host, int32_t port)
{
    if (NULL == addr || NULL == host || port < 0 || port > 65535)
    {
        return exon_set_error(EXON_E_ARGUMENT, "udp address: bad host or port %d", port);
    }
    memset(addr, 0, sizeof(*addr));
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr->storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr->storage;
    if (1 == inet_pton(AF_INET, host, &v4->sin_addr))
    {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        addr->length = sizeof(*v4);
        return 0;
    }
    char text[EXON_UDP_ADDR_TEXT_MAX];
    const char *percent = strchr(host, '%');
    size_t address_length = percent ? (size_t)(percent - host) : strlen(host);
    if (address_length < sizeof(text))
    {
        memcpy(text, host, address_length);
        text[address_length] = '\0';
        if (1 == inet_pton(AF_INET6, text, &v6->sin6_addr))
        {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons((uint16_t)port);
            if (percent)
            {
                struct addrinfo hints = { .ai_family = AF_INET6, .ai_flags = AI_NUMERICHOST };
                struct addrinfo *res = NULL;
                if (0 == getaddrinfo(host, NULL, &hints, &res) && res)
                {
                    v6->sin6_scope_id = ((struct sockaddr_in6 *)res->ai_addr)->sin6_scope_id;
                }
                if (res)
                {
                    freeaddrinfo(res);
                }
            }
            addr->length = sizeof(*v6);
            return 0;
        }
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (0 != rc || NULL == res)
    {
        return exon_set_error(EXON_E_ARGUMENT, "cannot resolve host '%s': %s", host, gai_strerror(rc));
    }
    struct addrinfo *pick = res;
    for (struct addrinfo *it = res; it; it = it->ai_next)
    {
        if (it->ai_family == AF_INET)
        {
            pick = it;
            break;
        }
    }
    memcpy(addr->storage, pick->ai_addr, pick->ai_addrlen);
    addr->length = (uint32_t)pick->ai_addrlen;
    if (pick->ai_family == AF_INET)
    {
        v4->sin_port = htons((uint16_t)port);
    }
    else
    {
        v6->sin6_port = htons((uint16_t)port);
    }
    freeaddrinfo(res);
    return 0;
}

int32_t exon_udp_addr_port(const exon_udp_addr_t *addr)
{
    const struct sockaddr *sa = (const struct sockaddr *)addr->storage;
    if (sa->sa_family == AF_INET)
    {
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    }
    if (sa->sa_family == AF_INET6)
    {
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    }
    return -1;
}

int exon_udp_addr_format(const exon_udp_addr_t *addr, char *buf, size_t buf_length)
{
    const struct sockaddr *sa = (const struct sockaddr *)addr->storage;
    char host[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET)
    {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
        return snprintf(buf, buf_length, "%s:%d", host, exon_udp_addr_port(addr));
    }
    if (sa->sa_family == AF_INET6)
    {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof(host));
        return snprintf(buf, buf_length, "[%s]:%d", host, exon_udp_addr_port(addr));
    }
    return exon_set_error(EXON_E_ARGUMENT, "udp address: unknown family %d", sa->sa_family);
}

bool exon_udp_addr_equal(const exon_udp_addr_t *a, const exon_udp_addr_t *b)
{
    const struct sockaddr *sa = (const struct sockaddr *)a->storage;
    const struct sockaddr *sb = (const struct sockaddr *)b->storage;
    if (sa->sa_family != sb->sa_family)
    {
        return false;
    }
    if (sa->sa_family == AF_INET)
    {
        const struct sockaddr_in *x = (const struct sockaddr_in *)sa, *y = (const struct sockaddr_in *)sb;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (sa->sa_family == AF_INET6)
    {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)sa, *y = (const struct sockaddr_in6 *)sb;
        return x->sin6_port == y->sin6_port && 0 == memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
    }
    return false;
}

static int read_buffer_size(int fd, int option, int32_t *out)
{
    int value = 0;
    socklen_t length = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, option, &value, &length) < 0)
    {
        return -errno;
    }
    *out = value;
    return 0;
}

int exon_udp_channel_open(
    exon_udp_channel_t *channel, const exon_udp_addr_t *bind_addr, int32_t so_rcvbuf, int32_t so_sndbuf)
{
    if (NULL == channel || NULL == bind_addr)
    {
        return exon_set_error(EXON_E_ARGUMENT, "udp channel: NULL argument");
    }
    memset(channel, 0, sizeof(*channel));
    channel->fd = -1;
    const struct sockaddr *sa = (const struct sockaddr *)bind_addr->storage;
    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
    {
        return exon_set_error(EXON_E_ARGUMENT, "udp channel: bind address has no family");
    }
    int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
    {
        return exon_set_error(-errno, "udp channel: socket(): %s", strerror(errno));
    }
    int one = 1;
    if (sa->sa_family == AF_INET6)
    {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (so_rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &so_rcvbuf, sizeof(so_rcvbuf)) < 0)
    {
        int err = errno;
        close(fd);
        return exon_set_error(-err, "udp channel: SO_RCVBUF %d: %s", so_rcvbuf, strerror(err));
    }
    if (so_sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &so_sndbuf, sizeof(so_sndbuf)) < 0)
    {
        int err = errno;
        close(fd);
        return exon_set_error(-err, "udp channel: SO_SNDBUF %d: %s", so_sndbuf, strerror(err));
    }
    if (bind(fd, sa, bind_addr->length) < 0)
    {
        int err = errno;
        char text[EXON_UDP_ADDR_TEXT_MAX];
        exon_udp_addr_format(bind_addr, text, sizeof(text));
        close(fd);
        return exon_set_error(-err, "udp channel: bind %s: %s", text, strerror(err));
    }
    socklen_t length = sizeof(channel->local.storage);
    if (getsockname(fd, (struct sockaddr *)channel->local.storage, &length) < 0)
    {
        int err = errno;
        close(fd);
        return exon_set_error(-err, "udp channel: getsockname: %s", strerror(err));
    }
    channel->local.length = length;
    channel->family = sa->sa_family;
    read_buffer_size(fd, SO_RCVBUF, &channel->so_rcvbuf);
    read_buffer_size(fd, SO_SNDBUF, &channel->so_sndbuf);
    channel->fd = fd;
    return 0;
}

int32_t exon_udp_channel_local_port(const exon_udp_channel_t *channel)
{
    return exon_udp_addr_port(&channel->local);
}

void exon_udp_channel_close(exon_udp_channel_t *channel)
{
    if (NULL != channel && channel->fd >= 0)
    {
        close(channel->fd);
        channel->fd = -1;
    }
}

static bool would_block(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

/* The result of a send/receive call: n (>= 0), 0 when the socket would block, or the error. */
static inline int io_outcome(ssize_t n, const char *call)
{
    if (n < 0)
    {
        int err = errno;
        if (would_block(err))
        {
            return 0;
        }
        return exon_set_error(-err, "udp channel: %s: %s", call, strerror(err));
    }
    return (int)n;
}

/* Point headers[i] and iovs[i] at msgs[i] for count messages (clamped to EXON_UDP_BATCH_MAX;
 * returns the count, 0 when count <= 0): receiving, at the whole buffer and address storage;
 * sending, at the message and its address. */
static inline int32_t batch_headers(
    struct mmsghdr *headers, struct iovec *iovs, exon_udp_msg_t *msgs, int32_t count, bool receiving)
{
    if (count > EXON_UDP_BATCH_MAX)
    {
        count = EXON_UDP_BATCH_MAX;
    }
    if (count <= 0)
    {
        return 0;
    }
    memset(headers, 0, sizeof(headers[0]) * (size_t)count);
    for (int32_t i = 0; i < count; i++)
    {
        iovs[i].iov_base = msgs[i].buffer;
        iovs[i].iov_len = (size_t)(receiving ? msgs[i].capacity : msgs[i].length);
        headers[i].msg_hdr.msg_iov = &iovs[i];
        headers[i].msg_hdr.msg_iovlen = 1;
        headers[i].msg_hdr.msg_name = msgs[i].addr.storage;
        headers[i].msg_hdr.msg_namelen = receiving ? (socklen_t)sizeof(msgs[i].addr.storage) : msgs[i].addr.length;
    }
    return count;
}

int exon_udp_channel_send(
    exon_udp_channel_t *channel, const uint8_t *data, int32_t length, const exon_udp_addr_t *to)
{
    ssize_t n = sendto(channel->fd, data, (size_t)length, 0, (const struct sockaddr *)to->storage, to->length);
    return io_outcome(n, "sendto");
}

int exon_udp_channel_enable_gso(exon_udp_channel_t *channel)
{
    /* a socket-wide segment size of 0 changes nothing; kernels without UDP GSO refuse the
     * option (ENOPROTOOPT), which is the run-time check. Sends then ask per message. */
    int zero = 0;
    if (channel->fd < 0 || setsockopt(channel->fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) < 0)
    {
        channel->gso = false;
        return 0;
    }
    channel->gso = true;
    return 1;
}

int exon_udp_channel_enable_gro(exon_udp_channel_t *channel)
{
    int one = 1;
    if (channel->fd < 0 || setsockopt(channel->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) < 0)
    {
        channel->gro = false;
        return 0;
    }
    channel->gro = true;
    return 1;
}

void exon_udp_msg_split(const exon_udp_msg_t *msg, exon_udp_segments_t *out)
{
    int32_t length = msg->length > 0 ? msg->length : 0;
    int32_t size = msg->segment_size;
    out->dropped = 0;
    if (size <= 0 || size >= length)
    {
        /* one datagram; a cut one is dropped whole */
        out->count = msg->truncated ? 0 : 1;
        out->segment_size = length;
        out->last_length = length;
        out->dropped = msg->truncated ? 1 : 0;
        return;
    }
    if (msg->truncated)
    {
        /* the whole datagrams before the cut go on; the cut tail (and whatever did not fit) is one drop */
        out->count = length / size;
        out->segment_size = size;
        out->last_length = size;
        out->dropped = 1;
        return;
    }
    out->count = (length + size - 1) / size;
    out->segment_size = size;
    out->last_length = length - (out->count - 1) * size;
}

/* The UDP_GRO segment size a received header carries, 0 when none. */
static int32_t gro_segment_size(struct msghdr *hdr)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(hdr); NULL != cm; cm = CMSG_NXTHDR(hdr, cm))
    {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO && cm->cmsg_len >= CMSG_LEN(sizeof(int)))
        {
            int size = 0;
            memcpy(&size, CMSG_DATA(cm), sizeof(size));
            return size > 0 ? size : 0;
        }
    }
    return 0;
}

typedef union exon_udp_cmsg_stct
{
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
}
exon_udp_cmsg_t;

int exon_udp_channel_recv_batch(exon_udp_channel_t *channel, exon_udp_msg_t *msgs, int32_t count)
{
    struct mmsghdr headers[EXON_UDP_BATCH_MAX];
    struct iovec iovs[EXON_UDP_BATCH_MAX];
    exon_udp_cmsg_t controls[EXON_UDP_BATCH_MAX];
    count = batch_headers(headers, iovs, msgs, count, true);
    if (count == 0)
    {
        return 0;
    }
    if (channel->gro)
    {
        for (int32_t i = 0; i < count; i++)
        {
            headers[i].msg_hdr.msg_control = controls[i].buf;
            headers[i].msg_hdr.msg_controllen = sizeof(controls[i].buf);
        }
    }
    int n = recvmmsg(channel->fd, headers, (unsigned)count, MSG_DONTWAIT, NULL);
    if (n < 0)
    {
        return io_outcome(n, "recvmmsg");
    }
    for (int i = 0; i < n; i++)
    {
        msgs[i].length = (int32_t)headers[i].msg_len;
        msgs[i].truncated = 0 != (headers[i].msg_hdr.msg_flags & MSG_TRUNC);
        msgs[i].addr.length = headers[i].msg_hdr.msg_namelen;
        msgs[i].segment_size = channel->gro ? gro_segment_size(&headers[i].msg_hdr) : 0;
    }
    return n;
}

static int send_batch_plain(exon_udp_channel_t *channel, exon_udp_msg_t *msgs, int32_t count)
{
    struct mmsghdr headers[EXON_UDP_BATCH_MAX];
    struct iovec iovs[EXON_UDP_BATCH_MAX];
    count = batch_headers(headers, iovs, msgs, count, false);
    if (count == 0)
    {
        return 0;
    }
    int n = sendmmsg(channel->fd, headers, (unsigned)count, MSG_DONTWAIT);
    return io_outcome(n, "sendmmsg");
}

/* Errors by which the kernel refuses a GSO send that a plain one may pass. */
static bool gso_refused(int err)
{
    return err == EIO || err == EINVAL || err == EMSGSIZE || err == ENOPROTOOPT || err == EOPNOTSUPP;
}

int exon_udp_channel_send_batch(exon_udp_channel_t *channel, exon_udp_msg_t *msgs, int32_t count)
{
    if (!channel->gso)
    {
        return send_batch_plain(channel, msgs, count);
    }
    struct mmsghdr headers[EXON_UDP_BATCH_MAX];
    struct iovec iovs[EXON_UDP_BATCH_MAX];
    exon_udp_cmsg_t controls[EXON_UDP_BATCH_MAX];
    int32_t runs[EXON_UDP_BATCH_MAX];
    if (count > EXON_UDP_BATCH_MAX)
    {
        count = EXON_UDP_BATCH_MAX;
    }
    if (count <= 0)
    {
        return 0;
    }
    /* runs: datagrams of one length to one address, the last of a run may be shorter */
    int32_t groups = 0;
    for (int32_t i = 0; i < count;)
    {
        int32_t size = msgs[i].length;
        int32_t j = i + 1;
        int64_t total = size;
        while (j < count && j - i < EXON_UDP_GSO_MAX_SEGMENTS && msgs[j].length > 0 && msgs[j].length <= size &&
            total + msgs[j].length <= EXON_UDP_GSO_MAX_BYTES && exon_udp_addr_equal(&msgs[j].addr, &msgs[i].addr))
        {
            total += msgs[j].length;
            j++;
            if (msgs[j - 1].length < size)
            {
                break;
            }
        }
        struct msghdr *hdr = &headers[groups].msg_hdr;
        memset(&headers[groups], 0, sizeof(headers[groups]));
        for (int32_t k = i; k < j; k++)
        {
            iovs[k].iov_base = msgs[k].buffer;
            iovs[k].iov_len = (size_t)msgs[k].length;
        }
        hdr->msg_iov = &iovs[i];
        hdr->msg_iovlen = (size_t)(j - i);
        hdr->msg_name = msgs[i].addr.storage;
        hdr->msg_namelen = msgs[i].addr.length;
        if (j - i > 1)
        {
            memset(&controls[groups], 0, sizeof(controls[groups]));
            hdr->msg_control = controls[groups].buf;
            hdr->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
            struct cmsghdr *cm = CMSG_FIRSTHDR(hdr);
            cm->cmsg_level = SOL_UDP;
            cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t segment = (uint16_t)size;
            memcpy(CMSG_DATA(cm), &segment, sizeof(segment));
        }
        runs[groups++] = j - i;
        i = j;
    }
    int n = sendmmsg(channel->fd, headers, (unsigned)groups, MSG_DONTWAIT);
    if (n < 0)
    {
        int err = errno;
        if (runs[0] > 1 && gso_refused(err))
        {
            /* the first message was a GSO one and the kernel (or the device) will not
             * segment it: off for good on this channel, and this batch goes plainly */
            channel->gso = false;
            channel->gso_fallbacks++;
            return send_batch_plain(channel, msgs, count);
        }
        errno = err;
        return io_outcome(n, "sendmmsg");
    }
    int sent = 0;
    for (int i = 0; i < n; i++)
    {
        sent += runs[i];
    }
    return sent;
}
