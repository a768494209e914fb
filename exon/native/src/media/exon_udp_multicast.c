/* exon_udp_multicast.c: multicast group rules, interface lookup and group sockets (IPv4). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "media/exon_udp_multicast.h"

#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif

bool exon_udp_addr_is_multicast(const exon_udp_addr_t *addr)
{
    const struct sockaddr *sa = (const struct sockaddr *)addr->storage;
    if (sa->sa_family != AF_INET)
    {
        return false;
    }
    uint32_t host = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
    return (host & 0xF0000000U) == 0xE0000000U;
}

int exon_udp_multicast_control_addr(const exon_udp_addr_t *data, exon_udp_addr_t *control)
{
    if (!exon_udp_addr_is_multicast(data))
    {
        return exon_set_error(EXON_E_ARGUMENT, "not an IPv4 multicast address");
    }
    *control = *data;
    struct sockaddr_in *v4 = (struct sockaddr_in *)control->storage;
    uint8_t *bytes = (uint8_t *)&v4->sin_addr.s_addr;
    if (0 == (bytes[3] & 1))
    {
        char text[EXON_UDP_ADDR_TEXT_MAX];
        exon_udp_addr_format(data, text, sizeof(text));
        return exon_set_error(EXON_E_ARGUMENT,
            "multicast data address must be odd (%s; its control group is the next address)", text);
    }
    bytes[3]++;
    return 0;
}

int exon_udp_interface_resolve(const char *text, exon_udp_addr_t *out, char *name, size_t name_length)
{
    char host[64];
    size_t n = strcspn(text, ":/");
    int prefix = 32;
    const char *slash = strchr(text, '/');
    if (n >= sizeof(host))
    {
        return exon_set_error(EXON_E_ARGUMENT, "interface=%s: not an IPv4 address", text);
    }
    memcpy(host, text, n);
    host[n] = '\0';
    struct in_addr want;
    if (1 != inet_pton(AF_INET, host, &want))
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "interface=%s: not an IPv4 address (multicast takes interface=ADDRESS[/PREFIX])", text);
    }
    if (NULL != slash)
    {
        char *end = NULL;
        long bits = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end != '\0' || bits < 0 || bits > 32)
        {
            return exon_set_error(EXON_E_ARGUMENT, "interface=%s: IPv4 prefix length not in 0..32", text);
        }
        prefix = (int)bits;
    }
    uint32_t mask = prefix == 0 ? 0 : 0xFFFFFFFFU << (32 - prefix);
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) < 0)
    {
        return exon_set_error(-errno, "interface=%s: getifaddrs: %s", text, strerror(errno));
    }
    bool found = false;
    for (struct ifaddrs *it = list; it; it = it->ifa_next)
    {
        if (NULL == it->ifa_addr || it->ifa_addr->sa_family != AF_INET)
        {
            continue;
        }
        const struct sockaddr_in *a = (const struct sockaddr_in *)it->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) & mask) == (ntohl(want.s_addr) & mask))
        {
            memset(out, 0, sizeof(*out));
            struct sockaddr_in *v4 = (struct sockaddr_in *)out->storage;
            v4->sin_family = AF_INET;
            v4->sin_addr = a->sin_addr;
            out->length = sizeof(*v4);
            if (NULL != name && name_length > 0)
            {
                snprintf(name, name_length, "%s", it->ifa_name);
            }
            found = true;
            break;
        }
    }
    freeifaddrs(list);
    if (!found)
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "interface=%s matches no local interface (no IPv4 address of this host is in %s/%d)", text, host, prefix);
    }
    return 0;
}

static int exon_mc_fail(int fd, const char *what, const exon_udp_addr_t *group)
{
    int err = errno;
    char text[EXON_UDP_ADDR_TEXT_MAX];
    exon_udp_addr_format(group, text, sizeof(text));
    close(fd);
    return exon_set_error(-err, "multicast channel %s: %s: %s", text, what, strerror(err));
}

int exon_udp_channel_open_multicast(
    exon_udp_channel_t *channel, const exon_udp_addr_t *group, const exon_udp_addr_t *iface, int32_t ttl,
    int32_t so_rcvbuf, int32_t so_sndbuf)
{
    if (NULL == channel || NULL == group || !exon_udp_addr_is_multicast(group))
    {
        return exon_set_error(EXON_E_ARGUMENT, "multicast channel: not an IPv4 multicast group");
    }
    memset(channel, 0, sizeof(*channel));
    channel->fd = -1;
    const struct sockaddr_in *g = (const struct sockaddr_in *)group->storage;
    struct in_addr local = { .s_addr = htonl(INADDR_ANY) };
    if (NULL != iface && ((const struct sockaddr *)iface->storage)->sa_family == AF_INET)
    {
        local = ((const struct sockaddr_in *)iface->storage)->sin_addr;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
    {
        return exon_set_error(-errno, "multicast channel: socket(): %s", strerror(errno));
    }
    int one = 1, zero = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
    {
        return exon_mc_fail(fd, "SO_REUSEADDR", group);
    }
    if (so_rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &so_rcvbuf, sizeof(so_rcvbuf)) < 0)
    {
        return exon_mc_fail(fd, "SO_RCVBUF", group);
    }
    if (so_sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &so_sndbuf, sizeof(so_sndbuf)) < 0)
    {
        return exon_mc_fail(fd, "SO_SNDBUF", group);
    }
    struct sockaddr_in bind_addr = { .sin_family = AF_INET, .sin_port = g->sin_port };
    bind_addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd, (const struct sockaddr *)&bind_addr, sizeof(bind_addr)) < 0)
    {
        return exon_mc_fail(fd, "bind", group);
    }
    struct ip_mreq mreq = { .imr_multiaddr = g->sin_addr, .imr_interface = local };
    if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) < 0)
    {
        return exon_mc_fail(fd, "IP_ADD_MEMBERSHIP (is there a route for the group?)", group);
    }
    if (local.s_addr != htonl(INADDR_ANY) && setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &local, sizeof(local)) < 0)
    {
        return exon_mc_fail(fd, "IP_MULTICAST_IF", group);
    }
    if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one)) < 0)
    {
        return exon_mc_fail(fd, "IP_MULTICAST_LOOP", group);
    }
    if (ttl > 0 && setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) < 0)
    {
        return exon_mc_fail(fd, "IP_MULTICAST_TTL", group);
    }
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero)); /* Linux only; best effort */
    socklen_t length = sizeof(channel->local.storage);
    if (getsockname(fd, (struct sockaddr *)channel->local.storage, &length) < 0)
    {
        return exon_mc_fail(fd, "getsockname", group);
    }
    channel->local.length = length;
    channel->family = AF_INET;
    int value = 0;
    socklen_t value_length = sizeof(value);
    if (0 == getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, &value_length))
    {
        channel->so_rcvbuf = value;
    }
    value_length = sizeof(value);
    if (0 == getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, &value_length))
    {
        channel->so_sndbuf = value;
    }
    channel->fd = fd;
    return 0;
}
