/*
 * exon_uri.c: channel URI parser; the rules and their order mirror
 * exon/transport/aeron/channel.py exactly (see the parity test).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/exon_layout.h"
#include "uri/exon_uri.h"

typedef struct
{
    const char *ptr;
    size_t len;
}
uri_str_t;

static const char *const known_keys[] = {
    "endpoint", "interface", "control", "control-mode", "ttl", "reliable", "mtu",
    "term-length", "init-term-id", "term-id", "term-offset", "session-id", "linger",
    "sparse", "eos", "tether", "tags", "alias", "group", "rejoin", "fc", "gtag", "cc",
    "ssc", "ats", "so-sndbuf", "so-rcvbuf", "rcv-wnd", "pub-wnd", "nak-delay",
    "max-resend", "stream-id", "response-correlation-id",
    "untethered-window-limit-timeout", "untethered-linger-timeout",
    "untethered-resting-timeout", "media-rcv-ts-offset", "channel-rcv-ts-offset",
    "channel-snd-ts-offset",
};
#define KEY_COUNT ((int)(sizeof(known_keys) / sizeof(known_keys[0])))

typedef struct
{
    bool present[KEY_COUNT];
    uri_str_t value[KEY_COUNT];
}
uri_params_t;

static int key_index(const char *name)
{
    for (int i = 0; i < KEY_COUNT; i++)
    {
        if (0 == strcmp(known_keys[i], name))
        {
            return i;
        }
    }
    return -1;
}

static bool str_eq(uri_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && 0 == memcmp(s.ptr, lit, n);
}

static int fail(exon_uri_t *out, const char *part, size_t part_len, const char *reason)
{
    size_t n = part_len > EXON_URI_PART_MAX ? EXON_URI_PART_MAX : part_len;
    memcpy(out->error_part, part, n);
    out->error_part[n] = '\0';
    return exon_set_error(EXON_E_URI, "invalid channel URI, %s [%s]", reason, out->error_part);
}

static int fail_key(exon_uri_t *out, const char *key, const char *reason)
{
    return fail(out, key, strlen(key), reason);
}

static const uri_str_t *param(const uri_params_t *p, const char *key)
{
    int i = key_index(key);
    return (i >= 0 && p->present[i]) ? &p->value[i] : NULL;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) ||
        c == '.' || c == '_' || c == '-';
}

static bool is_hex_or_v6(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
}

/* [0-9]{1,max_digits} as the whole string; value into *v. */
static bool parse_digits(uri_str_t s, size_t max_digits, int64_t *v)
{
    if (s.len < 1 || s.len > max_digits)
    {
        return false;
    }
    int64_t value = 0;
    for (size_t i = 0; i < s.len; i++)
    {
        if (!is_digit(s.ptr[i]))
        {
            return false;
        }
        value = value * 10 + (s.ptr[i] - '0');
    }
    *v = value;
    return true;
}

static bool parse_port(uri_str_t s, int32_t *port)
{
    int64_t v;
    if (!parse_digits(s, 18, &v) || s.len > 5 || v > 65535)
    {
        return false;
    }
    *port = (int32_t)v;
    return true;
}

static bool parse_size(uri_str_t s, int64_t *out)
{
    int64_t scale = 1;
    if (s.len > 0)
    {
        switch (s.ptr[s.len - 1])
        {
            case 'k': case 'K': scale = 1LL << 10; s.len--; break;
            case 'm': case 'M': scale = 1LL << 20; s.len--; break;
            case 'g': case 'G': scale = 1LL << 30; s.len--; break;
            default: break;
        }
    }
    int64_t v;
    if (!parse_digits(s, 12, &v))
    {
        return false;
    }
    v *= scale; /* at most 12 digits times 2^30: fits in int64 */
    if (v > INT32_MAX)
    {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_duration(uri_str_t s, int64_t *out)
{
    int64_t scale = 1;
    if (s.len >= 2 && 0 == memcmp(s.ptr + s.len - 2, "ns", 2))
    {
        s.len -= 2;
    }
    else if (s.len >= 2 && 0 == memcmp(s.ptr + s.len - 2, "us", 2))
    {
        scale = 1000; s.len -= 2;
    }
    else if (s.len >= 2 && 0 == memcmp(s.ptr + s.len - 2, "ms", 2))
    {
        scale = 1000000; s.len -= 2;
    }
    else if (s.len >= 1 && s.ptr[s.len - 1] == 's')
    {
        scale = 1000000000; s.len -= 1;
    }
    int64_t v;
    if (!parse_digits(s, 18, &v) || v > INT64_MAX / scale)
    {
        return false;
    }
    *out = v * scale;
    return true;
}

static bool parse_int32(uri_str_t s, int32_t *out)
{
    bool negative = s.len > 0 && s.ptr[0] == '-';
    uri_str_t digits = { s.ptr + (negative ? 1 : 0), s.len - (negative ? 1 : 0) };
    int64_t v;
    if (!parse_digits(digits, 11, &v))
    {
        return false;
    }
    v = negative ? -v : v;
    if (v < INT32_MIN || v > INT32_MAX)
    {
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static bool ipv6_ok(uri_str_t s)
{
    size_t i = 0;
    while (i < s.len && is_hex_or_v6(s.ptr[i]))
    {
        i++;
    }
    size_t address_len = i;
    if (address_len < 2 || address_len > 45)
    {
        return false;
    }
    if (i < s.len)
    {
        if (s.ptr[i] != '%')
        {
            return false;
        }
        size_t zone = s.len - i - 1;
        if (zone < 1 || zone > 15)
        {
            return false;
        }
        for (size_t j = i + 1; j < s.len; j++)
        {
            if (!is_name_char(s.ptr[j]))
            {
                return false;
            }
        }
    }
    char text[64];
    memcpy(text, s.ptr, address_len);
    text[address_len] = '\0';
    struct in6_addr addr;
    return 1 == inet_pton(AF_INET6, text, &addr);
}

/* HOST:PORT, [V6]:PORT, or (port optional) HOST / [V6]. port = -1 when absent. */
static bool parse_host_port(uri_str_t s, bool port_required, exon_uri_endpoint_t *ep)
{
    uri_str_t host, rest;
    bool v6 = s.len > 0 && s.ptr[0] == '[';
    if (v6)
    {
        const char *close = memchr(s.ptr, ']', s.len);
        if (NULL == close)
        {
            return false;
        }
        host.ptr = s.ptr + 1;
        host.len = (size_t)(close - s.ptr) - 1;
        rest.ptr = close + 1;
        rest.len = s.len - (size_t)(close - s.ptr) - 1;
        if (!ipv6_ok(host))
        {
            return false;
        }
    }
    else
    {
        size_t colon = s.len;
        for (size_t i = s.len; i > 0; i--)
        {
            if (s.ptr[i - 1] == ':')
            {
                colon = i - 1;
                break;
            }
        }
        host.ptr = s.ptr;
        host.len = colon;
        rest.ptr = s.ptr + colon;
        rest.len = s.len - colon;
        if (host.len < 1 || host.len > 255)
        {
            return false;
        }
        for (size_t i = 0; i < host.len; i++)
        {
            if (!is_name_char(host.ptr[i]))
            {
                return false;
            }
        }
    }
    int32_t port = -1;
    if (rest.len == 0)
    {
        if (port_required)
        {
            return false;
        }
    }
    else
    {
        if (rest.ptr[0] != ':')
        {
            return false;
        }
        uri_str_t digits = { rest.ptr + 1, rest.len - 1 };
        if (!parse_port(digits, &port))
        {
            return false;
        }
    }
    if (NULL != ep)
    {
        ep->present = true;
        ep->is_ipv6 = v6;
        memcpy(ep->host, host.ptr, host.len);
        ep->host[host.len] = '\0';
        ep->port = port;
    }
    return true;
}

static void init_uri(exon_uri_t *out)
{
    memset(out, 0, sizeof(*out));
    out->linger_ns = -1;
    out->nak_delay_ns = -1;
    out->term_offset = -1;
    out->ttl = -1;
    out->fc_timeout_ns = -1;
    out->so_sndbuf = out->so_rcvbuf = out->rcv_wnd = out->pub_wnd = -1;
    out->reliable = out->sparse = out->eos = out->tether = out->rejoin = out->group = -1;
}

static int typed(exon_uri_t *out, const uri_params_t *p)
{
    static const char *const udp_only[] = { "endpoint", "control", "interface", "ttl" };
    const uri_str_t *v;

    if (out->media == EXON_URI_MEDIA_IPC)
    {
        for (int i = 0; i < 4; i++)
        {
            if (param(p, udp_only[i]))
            {
                return fail_key(out, udp_only[i], "not a parameter of an ipc channel");
            }
        }
    }
    if ((v = param(p, "endpoint")) && !parse_host_port(*v, true, &out->endpoint))
    {
        return fail_key(out, "endpoint", "expected HOST:PORT with PORT in 0..65535");
    }
    if ((v = param(p, "control")) && !parse_host_port(*v, true, &out->control))
    {
        return fail_key(out, "control", "expected HOST:PORT with PORT in 0..65535");
    }
    if ((v = param(p, "interface")))
    {
        const char *slash = memchr(v->ptr, '/', v->len);
        uri_str_t text = *v;
        if (NULL != slash)
        {
            uri_str_t prefix = { slash + 1, v->len - (size_t)(slash - v->ptr) - 1 };
            int64_t bits;
            if (!parse_digits(prefix, 18, &bits) || prefix.len > 3 || bits > 128)
            {
                return fail_key(out, "interface", "bad prefix length");
            }
            text.len = (size_t)(slash - v->ptr);
        }
        exon_uri_endpoint_t scratch;
        if (!parse_host_port(text, false, &scratch))
        {
            return fail_key(out, "interface", "expected HOST[:PORT][/PREFIX]");
        }
        if (v->len >= sizeof(out->interface_name))
        {
            return fail_key(out, "interface", "too long");
        }
        out->has_interface = true;
        memcpy(out->interface_name, v->ptr, v->len);
        out->interface_name[v->len] = '\0';
    }
    if (out->media == EXON_URI_MEDIA_UDP && !out->endpoint.present && !out->control.present)
    {
        return fail_key(out, "endpoint", "a udp channel needs endpoint or control");
    }
    int64_t n;
    if ((v = param(p, "mtu")))
    {
        if (!parse_size(*v, &n) || n % EXON_FRAME_ALIGNMENT || n <= 32 ||
            n > EXON_MAX_UDP_PAYLOAD_LENGTH)
        {
            return fail_key(out, "mtu", "expected a multiple of 32 in (32, 65504]");
        }
        out->mtu = (int32_t)n;
    }
    if ((v = param(p, "term-length")))
    {
        if (!parse_size(*v, &n) || n < EXON_TERM_MIN_LENGTH || n > EXON_TERM_MAX_LENGTH ||
            (n & (n - 1)))
        {
            return fail_key(out, "term-length", "expected a power of two in [64k, 1g]");
        }
        out->term_length = (int32_t)n;
    }
    static const char *const size_keys[] = { "so-sndbuf", "so-rcvbuf", "rcv-wnd", "pub-wnd" };
    int64_t *size_fields[] = { &out->so_sndbuf, &out->so_rcvbuf, &out->rcv_wnd, &out->pub_wnd };
    for (int i = 0; i < 4; i++)
    {
        if ((v = param(p, size_keys[i])))
        {
            if (!parse_size(*v, size_fields[i]))
            {
                return fail_key(out, size_keys[i], "expected a size (digits with optional k/m/g)");
            }
        }
    }
    static const char *const duration_keys[] = {
        "linger", "nak-delay", "untethered-window-limit-timeout", "untethered-linger-timeout",
        "untethered-resting-timeout",
    };
    for (int i = 0; i < 5; i++)
    {
        if ((v = param(p, duration_keys[i])))
        {
            if (!parse_duration(*v, &n))
            {
                return fail_key(out, duration_keys[i],
                    "expected a duration (digits with optional ns/us/ms/s)");
            }
            if (i == 0)
            {
                out->linger_ns = n;
            }
            else if (i == 1)
            {
                out->nak_delay_ns = n;
            }
        }
    }
    static const char *const int_keys[] = { "session-id", "init-term-id", "term-id", "stream-id" };
    int32_t *int_fields[] = { &out->session_id, &out->init_term_id, &out->term_id, &out->stream_id };
    bool *has_fields[] = {
        &out->has_session_id, &out->has_init_term_id, &out->has_term_id, &out->has_stream_id,
    };
    for (int i = 0; i < 4; i++)
    {
        if ((v = param(p, int_keys[i])))
        {
            if (!parse_int32(*v, int_fields[i]))
            {
                return fail_key(out, int_keys[i], "expected a 32-bit integer");
            }
            *has_fields[i] = true;
        }
    }
    static const char *const bool_keys[] = { "reliable", "sparse", "eos", "tether", "rejoin", "group" };
    int8_t *bool_fields[] = {
        &out->reliable, &out->sparse, &out->eos, &out->tether, &out->rejoin, &out->group,
    };
    for (int i = 0; i < 6; i++)
    {
        if ((v = param(p, bool_keys[i])))
        {
            if (str_eq(*v, "true"))
            {
                *bool_fields[i] = 1;
            }
            else if (str_eq(*v, "false"))
            {
                *bool_fields[i] = 0;
            }
            else
            {
                return fail_key(out, bool_keys[i], "expected true or false");
            }
        }
    }
    int32_t small;
    if ((v = param(p, "ttl")))
    {
        if (!parse_port(*v, &small) || small > 255)
        {
            return fail_key(out, "ttl", "expected 0..255");
        }
        out->ttl = small;
    }
    if ((v = param(p, "max-resend")))
    {
        if (!parse_port(*v, &small) || small < 1 || small > 256)
        {
            return fail_key(out, "max-resend", "expected 1..256");
        }
        out->max_resend = small;
    }
    if ((v = param(p, "fc")))
    {
        /* min | max | min,t:DURATION (the receiver timeout of fc=min) */
        uri_str_t head = { v->ptr, v->len };
        const char *comma = memchr(v->ptr, ',', v->len);
        if (NULL != comma)
        {
            head.len = (size_t)(comma - v->ptr);
        }
        bool is_min = str_eq(head, "min");
        if (!is_min && !str_eq(head, "max"))
        {
            return fail_key(out, "fc", "expected min, max or min,t:DURATION");
        }
        out->fc = is_min ? EXON_URI_FC_MIN : EXON_URI_FC_MAX;
        if (NULL != comma)
        {
            uri_str_t tail = { comma + 1, v->len - head.len - 1 };
            uri_str_t duration = { tail.ptr + 2, tail.len >= 2 ? tail.len - 2 : 0 };
            if (!is_min || tail.len < 2 || 0 != memcmp(tail.ptr, "t:", 2) ||
                !parse_duration(duration, &n))
            {
                return fail_key(out, "fc", "expected min, max or min,t:DURATION");
            }
            out->fc_timeout_ns = n;
        }
    }
    if ((v = param(p, "control-mode")) &&
        !(str_eq(*v, "manual") || str_eq(*v, "dynamic") || str_eq(*v, "response")))
    {
        return fail_key(out, "control-mode", "expected manual, dynamic or response");
    }
    if ((v = param(p, "term-offset")))
    {
        if (!parse_size(*v, &n) || n % EXON_FRAME_ALIGNMENT)
        {
            return fail_key(out, "term-offset", "expected a multiple of 32");
        }
        int64_t limit = out->term_length ? out->term_length : EXON_TERM_MAX_LENGTH;
        if (n > limit)
        {
            return fail_key(out, "term-offset", "beyond term-length");
        }
        out->term_offset = (int32_t)n;
    }
    static const char *const trio[] = { "init-term-id", "term-id", "term-offset" };
    int given = 0;
    for (int i = 0; i < 3; i++)
    {
        given += param(p, trio[i]) ? 1 : 0;
    }
    if (given != 0 && given != 3)
    {
        for (int i = 0; i < 3; i++)
        {
            if (!param(p, trio[i]))
            {
                return fail_key(out, trio[i], "init-term-id, term-id and term-offset come together");
            }
        }
    }
    return 0;
}

int exon_uri_parse(const char *uri, size_t length, exon_uri_t *out)
{
    if (NULL == out)
    {
        return exon_set_error(EXON_E_ARGUMENT, "exon_uri_parse: out is NULL");
    }
    init_uri(out);
    if (NULL == uri || 0 == length)
    {
        return fail_key(out, "uri", "empty");
    }
    if (length > EXON_URI_MAX_LENGTH)
    {
        return fail_key(out, "uri", "longer than 4095 characters");
    }
    for (size_t i = 0; i < length; i++)
    {
        unsigned char c = (unsigned char)uri[i];
        if (c < 0x21 || c > 0x7E)
        {
            return fail_key(out, "uri", "characters outside printable ASCII");
        }
    }
    uri_str_t rest = { uri, length };
    if (rest.len >= 10 && 0 == memcmp(rest.ptr, "aeron-spy:", 10))
    {
        out->spy = true;
        rest.ptr += 10;
        rest.len -= 10;
    }
    if (rest.len < 6 || 0 != memcmp(rest.ptr, "aeron:", 6))
    {
        return fail_key(out, "scheme", "expected 'aeron:'");
    }
    rest.ptr += 6;
    rest.len -= 6;
    const char *q = memchr(rest.ptr, '?', rest.len);
    uri_str_t media = { rest.ptr, q ? (size_t)(q - rest.ptr) : rest.len };
    if (str_eq(media, "udp"))
    {
        out->media = EXON_URI_MEDIA_UDP;
    }
    else if (str_eq(media, "ipc"))
    {
        out->media = EXON_URI_MEDIA_IPC;
    }
    else
    {
        return fail_key(out, "media", "unknown media, expected udp or ipc");
    }
    uri_params_t params;
    memset(&params, 0, sizeof(params));
    if (NULL != q)
    {
        const char *pos = q + 1;
        const char *end = rest.ptr + rest.len;
        while (true)
        {
            const char *bar = memchr(pos, '|', (size_t)(end - pos));
            const char *pair_end = bar ? bar : end;
            size_t pair_len = (size_t)(pair_end - pos);
            const char *eq = memchr(pos, '=', pair_len);
            if (NULL == eq || eq == pos)
            {
                return fail(out, pos, pair_len, "expected key=value");
            }
            size_t key_len = (size_t)(eq - pos);
            char key[64];
            bool key_fits = key_len < sizeof(key);
            if (key_fits)
            {
                memcpy(key, pos, key_len);
                key[key_len] = '\0';
            }
            if (eq + 1 == pair_end)
            {
                return fail(out, pos, key_len, "empty value");
            }
            int index = key_fits ? key_index(key) : -1;
            if (index < 0)
            {
                return fail(out, pos, key_len, "unknown parameter");
            }
            if (params.present[index])
            {
                return fail(out, pos, key_len, "parameter given twice");
            }
            params.present[index] = true;
            params.value[index].ptr = eq + 1;
            params.value[index].len = (size_t)(pair_end - eq - 1);
            if (NULL == bar)
            {
                break;
            }
            pos = bar + 1;
        }
    }
    return typed(out, &params);
}
