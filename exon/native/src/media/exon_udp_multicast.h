/*
 * exon_udp_multicast.h: IPv4 multicast channels (Aeron's rules) over exon_udp_channel.
 *
 * A multicast channel names its data group: aeron:udp?endpoint=224.x.y.z:PORT. As in Aeron,
 * the group's last byte must be odd; the control group (SMs, NAKs, RTT requests) is the
 * data group with the last byte + 1, on the same port. Publishers send DATA/SETUP to the
 * data group and listen on the control group; subscribers listen on the data group and
 * send their control frames to the control group.
 *
 * interface=ADDRESS[/PREFIX] picks the local interface: the first local IPv4 address within
 * ADDRESS/PREFIX (PREFIX 32 when absent), as Aeron's interface search does. An address that
 * matches no local interface is an error that names it. Without interface= the kernel
 * picks (by its routes) and the group is joined on INADDR_ANY.
 *
 * exon_udp_channel_open_multicast() opens the socket: SO_REUSEADDR (several drivers and
 * publications on one host share the port), bound to INADDR_ANY:PORT, IP_ADD_MEMBERSHIP of
 * the group on the interface, IP_MULTICAST_IF, IP_MULTICAST_LOOP on (peers on this host
 * hear it), IP_MULTICAST_TTL (ttl= when > 0; else the OS default of 1) and
 * IP_MULTICAST_ALL off (only the groups this socket joined arrive, not every group some
 * other socket of the host joined on that port).
 *
 * Thread-safety: pure functions of their arguments, safe from any thread.
 */
#ifndef EXON_UDP_MULTICAST_H
#define EXON_UDP_MULTICAST_H

#include <stdint.h>
#include <stdbool.h>

#include "common/exon_common.h"
#include "media/exon_udp_channel.h"

/* An IPv4 address in 224.0.0.0/4 (IPv6 multicast is not supported). */
bool exon_udp_addr_is_multicast(const exon_udp_addr_t *addr);

/* The control group of a data group (last byte + 1, same port); EXON_E_ARGUMENT when the
 * data group's last byte is even. */
int exon_udp_multicast_control_addr(const exon_udp_addr_t *data, exon_udp_addr_t *control);

/*
 * The local IPv4 address of the interface matching "ADDRESS[:PORT][/PREFIX]" (PORT is
 * ignored) into *out (port 0), and its name into name[0..name_length). EXON_E_ARGUMENT when
 * the text is not an IPv4 address or no interface of this host has an address in range.
 */
int exon_udp_interface_resolve(const char *text, exon_udp_addr_t *out, char *name, size_t name_length);

/* Open a socket joined to `group` (its port is bound) on `iface` (NULL or family 0 = the
 * kernel's choice); ttl > 0 sets IP_MULTICAST_TTL. */
int exon_udp_channel_open_multicast(
    exon_udp_channel_t *channel, const exon_udp_addr_t *group, const exon_udp_addr_t *iface, int32_t ttl,
    int32_t so_rcvbuf, int32_t so_sndbuf);

#endif /* EXON_UDP_MULTICAST_H */
