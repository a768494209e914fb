/*
 * exon_uri.h: channel URI parser for the driver ("aeron:ipc", "aeron:udp?endpoint=H:P|...").
 *
 * The C twin of exon/transport/aeron/channel.py: same grammar, same checks in the same
 * order, same "part" named on error (tests/transport/aeron/test_uri_parity.py runs both on
 * the same inputs). exon_uri_parse() fills an exon_uri_t by value (no allocation) and
 * returns 0, or EXON_E_URI with exon_set_error() text and out->error_part set.
 *
 * Thread-safety: pure function of its arguments; safe from any thread.
 */
#ifndef EXON_URI_H
#define EXON_URI_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/exon_common.h"

#define EXON_URI_MAX_LENGTH 4095
#define EXON_URI_PART_MAX 120
#define EXON_URI_HOST_MAX 256

#define EXON_URI_MEDIA_UDP 1
#define EXON_URI_MEDIA_IPC 2

/* fc= (multicast flow control): the slowest receiver, or the fastest. */
#define EXON_URI_FC_MIN 1
#define EXON_URI_FC_MAX 2

typedef struct exon_uri_endpoint_stct
{
    bool present;
    bool is_ipv6;
    char host[EXON_URI_HOST_MAX]; /* without brackets; NUL-terminated */
    int32_t port;                 /* 0..65535; 0 = any free port */
}
exon_uri_endpoint_t;

/* Optional numeric fields use has_* flags; booleans are -1 (absent), 0 or 1. */
typedef struct exon_uri_stct
{
    int32_t media;
    bool spy;
    exon_uri_endpoint_t endpoint;
    exon_uri_endpoint_t control;
    bool has_interface;
    char interface_name[EXON_URI_HOST_MAX + 8]; /* "HOST[:PORT][/PREFIX]" as written */
    int32_t mtu;                 /* 0 = absent */
    int32_t term_length;         /* 0 = absent */
    bool has_session_id;
    int32_t session_id;
    int64_t linger_ns;           /* -1 = absent */
    int64_t nak_delay_ns;        /* -1 = absent */
    bool has_init_term_id;
    int32_t init_term_id;
    bool has_term_id;
    int32_t term_id;
    int32_t term_offset;         /* -1 = absent */
    int32_t ttl;                 /* -1 = absent */
    int64_t so_sndbuf;           /* -1 = absent */
    int64_t so_rcvbuf;
    int64_t rcv_wnd;
    int64_t pub_wnd;
    int32_t max_resend;          /* 0 = absent */
    bool has_stream_id;
    int32_t stream_id;
    int8_t reliable, sparse, eos, tether, rejoin, group;
    int32_t fc;                  /* EXON_URI_FC_*: 0 = absent */
    int64_t fc_timeout_ns;       /* fc=min,t:DURATION; -1 = absent */
    char error_part[EXON_URI_PART_MAX + 1]; /* the bad part after a failure */
}
exon_uri_t;

int exon_uri_parse(const char *uri, size_t length, exon_uri_t *out);

#endif /* EXON_URI_H */
