/*
 * exon_driver_conductor.c: commands, clients, client counters, subscriptions, UDP
 * (network) publications, liveness and the duty cycle. IPC publications live in
 * exon_conductor_ipc_publications.c, receive endpoints and images in
 * exon_conductor_receive_images.c (exon_conductor_internal.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/exon_common.h"
#include "common/exon_layout.h"
#include "concurrent/exon_doorbell.h"
#include "driver/exon_driver_conductor.h"
#include "common/exon_counter_command.h"
#include "uri/exon_uri.h"
#include "media/exon_udp_channel.h"
#include "media/exon_udp_multicast.h"
#include "driver/exon_network_publication.h"
#include "driver/exon_publication_image.h"
#include "driver/exon_conductor_internal.h"
#include <sys/epoll.h>

#define EXON_DC_COMMAND_LIMIT 16

static void exon_dc_release_net_publication(exon_driver_conductor_t *c, exon_dc_net_publication_t *pub, int64_t now_ns);
static void exon_dc_on_add_net_publication(exon_driver_conductor_t *c, const exon_publication_command_t *cmd,
    const exon_uri_t *uri, bool exclusive, exon_dc_client_t *client, int64_t now_ns);
static const exon_remove_command_t *exon_dc_remove_command(
    exon_driver_conductor_t *c, const char *name, const uint8_t *buf, int32_t length, int64_t now_ns);

/* ---- small helpers ------------------------------------------------------------------ */

int exon_dc_array_add(exon_dc_array_t *a, void *item)
{
    if (a->length == a->capacity)
    {
        int32_t capacity = a->capacity ? a->capacity * 2 : 8;
        void **items = realloc(a->items, sizeof(void *) * (size_t)capacity);
        if (NULL == items)
        {
            return exon_set_error(-ENOMEM, "driver conductor: out of memory");
        }
        a->items = items;
        a->capacity = capacity;
    }
    a->items[a->length++] = item;
    return 0;
}

static void exon_dc_array_remove_at(exon_dc_array_t *a, int32_t i)
{
    a->items[i] = a->items[a->length - 1];
    a->length--;
}

void exon_dc_array_remove(exon_dc_array_t *a, void *item)
{
    for (int32_t i = 0; i < a->length; i++)
    {
        if (a->items[i] == item)
        {
            exon_dc_array_remove_at(a, i);
            return;
        }
    }
}

static void exon_dc_array_free(exon_dc_array_t *a)
{
    for (int32_t i = 0; i < a->length; i++)
    {
        free(a->items[i]);
    }
    free(a->items);
    a->items = NULL;
    a->length = 0;
    a->capacity = 0;
}

uint64_t exon_dc_random(exon_driver_conductor_t *c)
{
    /* xorshift64* */
    uint64_t x = c->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

void exon_driver_conductor_error(exon_driver_conductor_t *c, const char *fmt, ...)
{
    char text[1024];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    if (n < 0)
    {
        return;
    }
    if (n >= (int)sizeof(text))
    {
        n = (int)sizeof(text) - 1;
    }
    if (c->error_log_ready)
    {
        exon_error_log_record(&c->error_log, exon_epoch_ms(), text, n);
    }
    exon_counter_add(&c->counters, EXON_SYSTEM_COUNTER_ERRORS, 1);
}

void exon_dc_transmit(exon_driver_conductor_t *c, int32_t type, const void *msg, int32_t length)
{
    int rc = exon_broadcast_transmit(&c->to_clients, type, msg, length);
    if (rc < 0)
    {
        exon_driver_conductor_error(c, "to-clients broadcast of type 0x%x failed: %d", type, rc);
        return;
    }
    exon_cnc_header_t *h = c->cnc->header;
    EXON_FENCE_SEQ();
    if (EXON_LOAD_ACQ(&h->to_clients_waiters) > 0)
    {
        exon_doorbell_ring(&h->to_clients_doorbell);
    }
}

/* ON_(EXCLUSIVE_)PUBLICATION_READY for an IPC or a UDP publication: ids and the log's path. */
static void exon_dc_send_publication_ready(
    exon_driver_conductor_t *c, int64_t correlation_id, int64_t registration_id, int32_t session_id,
    int32_t stream_id, int32_t limit_counter_id, int32_t status_counter_id, const char *log_path,
    bool exclusive)
{
    exon_publication_ready_t *r = (exon_publication_ready_t *)c->msg;
    int32_t log_length = (int32_t)strlen(log_path);
    r->correlation_id = correlation_id;
    r->registration_id = registration_id;
    r->session_id = session_id;
    r->stream_id = stream_id;
    r->position_limit_counter_id = limit_counter_id;
    r->channel_status_counter_id = status_counter_id;
    r->log_file_length = log_length;
    memcpy(c->msg + sizeof(*r), log_path, (size_t)log_length);
    exon_dc_transmit(c,
        exclusive ? EXON_RSP_ON_EXCLUSIVE_PUBLICATION_READY : EXON_RSP_ON_PUBLICATION_READY,
        c->msg, (int32_t)sizeof(*r) + log_length);
}

static void exon_dc_send_error(
    exon_driver_conductor_t *c, int64_t correlation_id, int32_t code, const char *fmt, ...)
{
    char text[1024];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    if (n < 0)
    {
        n = 0;
    }
    if (n >= (int)sizeof(text))
    {
        n = (int)sizeof(text) - 1;
    }
    exon_error_response_t *r = (exon_error_response_t *)c->msg;
    r->offending_command_correlation_id = correlation_id;
    r->error_code = code;
    r->error_message_length = n;
    memcpy(c->msg + sizeof(*r), text, (size_t)n);
    exon_dc_transmit(c, EXON_RSP_ON_ERROR, c->msg, (int32_t)sizeof(*r) + n);
    exon_driver_conductor_error(c, "command %lld refused: %s", (long long)correlation_id, text);
}

static void exon_dc_send_success(exon_driver_conductor_t *c, int64_t correlation_id)
{
    exon_operation_succeeded_t r = { .correlation_id = correlation_id };
    exon_dc_transmit(c, EXON_RSP_ON_OPERATION_SUCCESS, &r, (int32_t)sizeof(r));
}

void exon_dc_ring_subscription(exon_driver_conductor_t *c, exon_dc_subscription_t *sub)
{
    if (sub->doorbell_id >= 0)
    {
        exon_doorbell_ring(exon_doorbell_word(c->counters.values, sub->doorbell_id));
    }
}

/* The driver refuses channel durations it would not accept as settings either. */
static int exon_dc_check_durations(
    const char *channel, int32_t length, const exon_uri_t *uri, char *why, size_t why_length)
{
    if (uri->linger_ns > EXON_DC_CHANNEL_DURATION_MAX_NS || uri->nak_delay_ns > EXON_DC_CHANNEL_DURATION_MAX_NS)
    {
        snprintf(why, why_length, "invalid channel '%.*s': %s is beyond 1 hour [%s]", length, channel,
            uri->linger_ns > EXON_DC_CHANNEL_DURATION_MAX_NS ? "linger" : "nak-delay",
            uri->linger_ns > EXON_DC_CHANNEL_DURATION_MAX_NS ? "linger" : "nak-delay");
        return EXON_DRIVER_ERR_INVALID_CHANNEL;
    }
    return 0;
}

/*
 * The value of a parameter of an aeron:ipc channel that the driver applies (`linger` if
 * `linger`, else `sparse`: the caller matched the key) into uri->linger_ns or uri->sparse,
 * checked by exon_uri_parse() on a channel of that parameter alone (one parser for every
 * channel). Returns 0, or EXON_DRIVER_ERR_INVALID_CHANNEL with `why` filled.
 */
static int exon_dc_ipc_param(const char *channel, int32_t length, bool linger, const char *value,
    int value_length, exon_uri_t *uri, char *why, size_t why_length)
{
    const char *key = linger ? "linger" : "sparse";
    char one[64];
    exon_uri_t parsed;
    if (linger ? uri->linger_ns >= 0 : uri->sparse >= 0)
    {
        snprintf(why, why_length, "invalid channel '%.*s': %s appears twice [%s]", length, channel, key, key);
        return EXON_DRIVER_ERR_INVALID_CHANNEL;
    }
    if (value_length > 40)
    {
        snprintf(why, why_length, "invalid channel '%.*s': %s value is too long [%s]", length, channel, key, key);
        return EXON_DRIVER_ERR_INVALID_CHANNEL;
    }
    int n = snprintf(one, sizeof(one), "aeron:ipc?%s=%.*s", key, value_length, value);
    if (exon_uri_parse(one, (size_t)n, &parsed) < 0)
    {
        snprintf(why, why_length, "invalid channel '%.*s': %s", length, channel, exon_last_error());
        return EXON_DRIVER_ERR_INVALID_CHANNEL;
    }
    if (linger)
    {
        uri->linger_ns = parsed.linger_ns;
    }
    else
    {
        uri->sparse = parsed.sparse;
    }
    return 0;
}

/*
 * Channel check for what the conductor supports now. Returns 0 for IPC (only `media`,
 * `linger_ns` and `sparse` of `uri` filled; sparse -1 when absent), EXON_DC_CHANNEL_UDP (`uri` filled), or an EXON_DRIVER_ERR_*
 * code (> 0) with `why` filled.
 */
static int exon_dc_parse_channel(
    const char *channel, int32_t length, char *why, size_t why_length, exon_uri_t *uri)
{
    if (length <= 0 || length > EXON_MAX_CHANNEL_LENGTH)
    {
        snprintf(why, why_length, "channel length %d is not in [1, %d]", length, EXON_MAX_CHANNEL_LENGTH);
        return EXON_DRIVER_ERR_INVALID_CHANNEL;
    }
    if (length >= 9 && 0 == memcmp(channel, "aeron:ipc", 9) && (length == 9 || channel[9] == '?'))
    {
        /* parameters are validated for shape only (k=v pairs separated by '|'), except
         * `linger` and `sparse`, which the driver applies */
        memset(uri, 0, sizeof(*uri));
        uri->media = EXON_URI_MEDIA_IPC;
        uri->linger_ns = -1;
        uri->sparse = -1;
        uri->nak_delay_ns = -1;
        const char *p = channel + 10;
        const char *end = channel + length;
        while (length > 9 && p < end)
        {
            const char *bar = memchr(p, '|', (size_t)(end - p));
            const char *stop = bar ? bar : end;
            const char *eq = memchr(p, '=', (size_t)(stop - p));
            if (NULL == eq || eq == p || eq + 1 == stop)
            {
                snprintf(why, why_length, "malformed parameter '%.*s' in channel '%.*s' (want key=value)",
                    (int)(stop - p), p, length, channel);
                return EXON_DRIVER_ERR_INVALID_CHANNEL;
            }
            bool linger = eq - p == 6 && 0 == memcmp(p, "linger", 6);
            if (linger || (eq - p == 6 && 0 == memcmp(p, "sparse", 6)))
            {
                int err = exon_dc_ipc_param(channel, length, linger, eq + 1, (int)(stop - eq - 1), uri, why, why_length);
                if (err > 0)
                {
                    return err;
                }
            }
            p = stop + 1;
        }
        return exon_dc_check_durations(channel, length, uri, why, why_length);
    }
    if (length >= 9 && 0 == memcmp(channel, "aeron:udp", 9))
    {
        if (exon_uri_parse(channel, (size_t)length, uri) < 0)
        {
            snprintf(why, why_length, "invalid channel '%.*s': %s", length, channel, exon_last_error());
            return EXON_DRIVER_ERR_INVALID_CHANNEL;
        }
        if (uri->media != EXON_URI_MEDIA_UDP)
        {
            snprintf(why, why_length, "invalid channel '%.*s': not udp", length, channel);
            return EXON_DRIVER_ERR_INVALID_CHANNEL;
        }
        if (!uri->endpoint.present)
        {
            snprintf(why, why_length, "invalid channel '%.*s': endpoint is required (endpoint=HOST:PORT)",
                length, channel);
            return EXON_DRIVER_ERR_INVALID_CHANNEL;
        }
        int err = exon_dc_check_durations(channel, length, uri, why, why_length);
        return err > 0 ? err : EXON_DC_CHANNEL_UDP;
    }
    snprintf(why, why_length, "invalid channel '%.*s' (want aeron:ipc or aeron:udp?endpoint=...)", length, channel);
    return EXON_DRIVER_ERR_INVALID_CHANNEL;
}

/* ---- clients ------------------------------------------------------------------------ */

static exon_dc_client_t *exon_dc_find_client(exon_driver_conductor_t *c, int64_t client_id)
{
    for (int32_t i = 0; i < c->clients.length; i++)
    {
        exon_dc_client_t *client = c->clients.items[i];
        if (client->client_id == client_id)
        {
            return client;
        }
    }
    return NULL;
}

static exon_dc_client_t *exon_dc_client_seen(exon_driver_conductor_t *c, int64_t client_id, int64_t now_ns)
{
    exon_dc_client_t *client = exon_dc_find_client(c, client_id);
    if (NULL == client)
    {
        client = calloc(1, sizeof(*client));
        if (NULL == client)
        {
            return NULL;
        }
        client->client_id = client_id;
        char label[128];
        int n = snprintf(label, sizeof(label), "client-heartbeat: id=%lld", (long long)client_id);
        client->heartbeat_counter_id = exon_counters_allocate(
            &c->counters, EXON_COUNTER_TYPE_CLIENT_HEARTBEAT, NULL, 0, label, n, client_id, client_id,
            exon_epoch_ms());
        if (exon_dc_array_add(&c->clients, client) < 0)
        {
            free(client);
            return NULL;
        }
    }
    client->last_keepalive_ns = now_ns;
    if (client->heartbeat_counter_id >= 0)
    {
        exon_counter_set(&c->counters, client->heartbeat_counter_id, exon_epoch_ms());
    }
    return client;
}

/* ---- publication links ------------------------------------------------------------ */

static void exon_dc_remove_publication_link(exon_driver_conductor_t *c, exon_dc_publication_link_t *link, int64_t now_ns)
{
    exon_dc_ipc_publication_t *pub = link->publication;
    exon_dc_net_publication_t *net = link->net;
    exon_dc_array_remove(&c->publication_links, link);
    free(link);
    if (NULL != net)
    {
        exon_dc_release_net_publication(c, net, now_ns);
        return;
    }
    exon_dc_release_ipc_publication(c, pub, now_ns);
}

/* ---- subscriptions ------------------------------------------------------------------ */

static void exon_dc_remove_subscription(exon_driver_conductor_t *c, exon_dc_subscription_t *sub)
{
    if (sub->udp)
    {
        exon_dc_remove_udp_subscription(c, sub);
    }
    exon_dc_ipc_unlink_subscription(c, sub);
    if (sub->doorbell_owned && sub->doorbell_id >= 0)
    {
        exon_counters_free(&c->counters, sub->doorbell_id, exon_epoch_ms());
    }
    exon_dc_array_remove(&c->subscriptions, sub);
    free(sub);
}

/* ---- counters of clients (ADD_COUNTER / REMOVE_COUNTER) ------------------------------ */

/* Free a client's counter (reusable after the free-to-reuse timeout), acknowledge the
 * REMOVE_COUNTER `ack` (NULL: none) once it is freed, tell every client with
 * ON_UNAVAILABLE_COUNTER, forget it. */
static void exon_dc_free_client_counter(
    exon_driver_conductor_t *c, exon_dc_client_counter_t *counter, const int64_t *ack)
{
    exon_counters_free(&c->counters, counter->counter_id, exon_epoch_ms());
    if (NULL != ack)
    {
        exon_dc_send_success(c, *ack);
    }
    exon_counter_update_t m = { .correlation_id = counter->registration_id, .counter_id = counter->counter_id };
    exon_dc_transmit(c, EXON_RSP_ON_UNAVAILABLE_COUNTER, &m, (int32_t)sizeof(m));
    exon_dc_array_remove(&c->client_counters, counter);
    free(counter);
}

static void exon_dc_on_add_counter(exon_driver_conductor_t *c, const uint8_t *buf, int32_t length, int64_t now_ns)
{
    const exon_correlated_command_t *corr = (const exon_correlated_command_t *)buf;
    int64_t correlation_id = corr->correlation_id;
    exon_counter_command_fields_t fields;
    if (exon_counter_command_parse(buf, length, &fields) < 0)
    {
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_MALFORMED_COMMAND, "%s", exon_last_error());
        return;
    }
    exon_dc_client_t *client = exon_dc_client_seen(c, fields.client_id, now_ns);
    exon_dc_client_counter_t *counter = calloc(1, sizeof(*counter));
    if (NULL == client || NULL == counter || exon_dc_array_add(&c->client_counters, counter) < 0)
    {
        free(counter);
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
        return;
    }
    int32_t id = exon_counters_allocate(&c->counters, fields.type_id, buf + fields.key_offset, fields.key_length,
        (const char *)buf + fields.label_offset, fields.label_length, correlation_id, client->client_id,
        exon_epoch_ms());
    if (id < 0)
    {
        exon_dc_array_remove(&c->client_counters, counter);
        free(counter);
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_STORAGE_SPACE,
            "no counter left for ADD_COUNTER %lld (type %d): %s", (long long)correlation_id, fields.type_id,
            exon_last_error());
        return;
    }
    counter->registration_id = correlation_id;
    counter->client_id = client->client_id;
    counter->counter_id = id;
    exon_counter_update_t r = { .correlation_id = correlation_id, .counter_id = id };
    exon_dc_transmit(c, EXON_RSP_ON_COUNTER_READY, &r, (int32_t)sizeof(r));
}

static void exon_dc_on_remove_counter(exon_driver_conductor_t *c, const uint8_t *buf, int32_t length, int64_t now_ns)
{
    const exon_remove_command_t *cmd = exon_dc_remove_command(c, "REMOVE_COUNTER", buf, length, now_ns);
    if (NULL == cmd)
    {
        return;
    }
    for (int32_t i = 0; i < c->client_counters.length; i++)
    {
        exon_dc_client_counter_t *counter = c->client_counters.items[i];
        if (counter->registration_id == cmd->registration_id && counter->client_id == cmd->correlated.client_id)
        {
            exon_dc_free_client_counter(c, counter, &cmd->correlated.correlation_id);
            return;
        }
    }
    exon_dc_send_error(c, cmd->correlated.correlation_id, EXON_DRIVER_ERR_UNKNOWN_COUNTER,
        "unknown counter %lld", (long long)cmd->registration_id);
}

static void exon_dc_remove_client(exon_driver_conductor_t *c, exon_dc_client_t *client, int64_t now_ns)
{
    int64_t client_id = client->client_id;
    for (int32_t i = c->publication_links.length - 1; i >= 0; i--)
    {
        exon_dc_publication_link_t *link = c->publication_links.items[i];
        if (link->client_id == client_id)
        {
            exon_dc_remove_publication_link(c, link, now_ns);
            i = c->publication_links.length;
        }
    }
    for (int32_t i = c->subscriptions.length - 1; i >= 0; i--)
    {
        exon_dc_subscription_t *sub = c->subscriptions.items[i];
        if (sub->client_id == client_id)
        {
            exon_dc_remove_subscription(c, sub);
            i = c->subscriptions.length;
        }
    }
    for (int32_t i = c->client_counters.length - 1; i >= 0; i--)
    {
        exon_dc_client_counter_t *counter = c->client_counters.items[i];
        if (counter->client_id == client_id)
        {
            exon_dc_free_client_counter(c, counter, NULL);
        }
    }
    int64_t now_ms = exon_epoch_ms();
    if (client->heartbeat_counter_id >= 0)
    {
        exon_counters_free(&c->counters, client->heartbeat_counter_id, now_ms);
    }
    exon_counters_free_by_owner(&c->counters, client_id, now_ms);
    exon_dc_array_remove(&c->clients, client);
    free(client);
}

/* ---- commands ----------------------------------------------------------------------- */

/* A new link of `client_id` to a publication (set by the caller), registered as
 * `registration_id` and held in c->publication_links; NULL when out of memory. */
static exon_dc_publication_link_t *exon_dc_new_publication_link(
    exon_driver_conductor_t *c, int64_t registration_id, int64_t client_id)
{
    exon_dc_publication_link_t *link = calloc(1, sizeof(*link));
    if (NULL == link || exon_dc_array_add(&c->publication_links, link) < 0)
    {
        free(link);
        return NULL;
    }
    link->registration_id = registration_id;
    link->client_id = client_id;
    return link;
}

/*
 * The channel of an ADD_PUBLICATION / ADD_SUBSCRIPTION command of `length` bytes: `fixed`
 * bytes of command (with *channel_length in it, read only once `length` covers it), then
 * the channel. Returns EXON_DC_CHANNEL_* (<= 0, `uri` filled for UDP), or an
 * EXON_DRIVER_ERR_* code (> 0) once the error has been sent to the client.
 */
static int exon_dc_command_channel(
    exon_driver_conductor_t *c, const char *name, int64_t correlation_id, const uint8_t *buf, int32_t length,
    int32_t fixed, const int32_t *channel_length, char *why, size_t why_length, exon_uri_t *uri)
{
    if (length < fixed || *channel_length < 0 || *channel_length > length - fixed)
    {
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_MALFORMED_COMMAND,
            "%s of %d bytes is malformed", name, length);
        return EXON_DRIVER_ERR_MALFORMED_COMMAND;
    }
    int err = exon_dc_parse_channel((const char *)buf + fixed, *channel_length, why, why_length, uri);
    if (err > 0)
    {
        exon_dc_send_error(c, correlation_id, err, "%s", why);
    }
    return err;
}

static void exon_dc_on_add_publication(
    exon_driver_conductor_t *c, const uint8_t *buf, int32_t length, bool exclusive, int64_t now_ns)
{
    const exon_publication_command_t *cmd = (const exon_publication_command_t *)buf;
    int64_t correlation_id = cmd->correlated.correlation_id;
    char why[512];
    exon_uri_t uri;
    int err = exon_dc_command_channel(c, "ADD_PUBLICATION", correlation_id, buf, length, (int32_t)sizeof(*cmd),
        &cmd->channel_length, why, sizeof(why), &uri);
    if (err > 0)
    {
        return;
    }
    exon_dc_client_t *client = exon_dc_client_seen(c, cmd->correlated.client_id, now_ns);
    if (NULL == client)
    {
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
        return;
    }
    if (err == EXON_DC_CHANNEL_UDP)
    {
        exon_dc_on_add_net_publication(c, cmd, &uri, exclusive, client, now_ns);
        return;
    }

    exon_dc_ipc_publication_t *pub = exclusive ? NULL : exon_dc_find_ipc_publication(c, cmd->stream_id);
    bool created = false;
    if (NULL != pub)
    {
        pub->refcount++;
    }
    if (NULL == pub)
    {
        pub = exon_dc_create_ipc_publication(c, correlation_id, cmd->stream_id, exclusive, uri.linger_ns, uri.sparse,
            why, sizeof(why));
        if (NULL == pub)
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_STORAGE_SPACE, "%s", why);
            return;
        }
        created = true;
    }
    exon_dc_publication_link_t *link = exon_dc_new_publication_link(c, correlation_id, client->client_id);
    if (NULL == link)
    {
        exon_dc_release_ipc_publication(c, pub, now_ns);
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
        return;
    }
    link->publication = pub;

    exon_dc_send_publication_ready(c, correlation_id, pub->registration_id, pub->session_id,
        pub->stream_id, pub->pub_lmt_id, pub->pub_pos_id, pub->log.path, exclusive);

    if (created)
    {
        exon_dc_ipc_link_subscriptions(c, pub);
    }
}

/* A REMOVE_* command of `length` bytes (its client counted as seen), or NULL once logged as malformed. */
static const exon_remove_command_t *exon_dc_remove_command(
    exon_driver_conductor_t *c, const char *name, const uint8_t *buf, int32_t length, int64_t now_ns)
{
    const exon_remove_command_t *cmd = (const exon_remove_command_t *)buf;
    if (length < (int32_t)sizeof(*cmd))
    {
        exon_driver_conductor_error(c, "%s of %d bytes is malformed", name, length);
        return NULL;
    }
    exon_dc_client_seen(c, cmd->correlated.client_id, now_ns);
    return cmd;
}

static void exon_dc_on_remove_publication(exon_driver_conductor_t *c, const uint8_t *buf, int32_t length, int64_t now_ns)
{
    const exon_remove_command_t *cmd = exon_dc_remove_command(c, "REMOVE_PUBLICATION", buf, length, now_ns);
    if (NULL == cmd)
    {
        return;
    }
    for (int32_t i = 0; i < c->publication_links.length; i++)
    {
        exon_dc_publication_link_t *link = c->publication_links.items[i];
        if (link->registration_id == cmd->registration_id && link->client_id == cmd->correlated.client_id)
        {
            exon_dc_remove_publication_link(c, link, now_ns);
            exon_dc_send_success(c, cmd->correlated.correlation_id);
            return;
        }
    }
    exon_dc_send_error(c, cmd->correlated.correlation_id, EXON_DRIVER_ERR_UNKNOWN_PUBLICATION,
        "unknown publication %lld", (long long)cmd->registration_id);
}

static void exon_dc_on_add_subscription(exon_driver_conductor_t *c, const uint8_t *buf, int32_t length, int64_t now_ns)
{
    const exon_subscription_command_t *cmd = (const exon_subscription_command_t *)buf;
    int64_t correlation_id = cmd->correlated.correlation_id;
    char why[512];
    exon_uri_t uri;
    int err = exon_dc_command_channel(c, "ADD_SUBSCRIPTION", correlation_id, buf, length, (int32_t)sizeof(*cmd),
        &cmd->channel_length, why, sizeof(why), &uri);
    if (err > 0)
    {
        return;
    }
    exon_dc_client_t *client = exon_dc_client_seen(c, cmd->correlated.client_id, now_ns);
    exon_dc_subscription_t *sub = calloc(1, sizeof(*sub));
    if (NULL == client || NULL == sub)
    {
        free(sub);
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
        return;
    }
    sub->registration_id = correlation_id;
    sub->client_id = client->client_id;
    sub->stream_id = cmd->stream_id;
    sub->doorbell_id = cmd->doorbell_counter_id;
    sub->nak_delay_ns = uri.nak_delay_ns;
    if (sub->doorbell_id < 0)
    {
        char label[128];
        int n = snprintf(label, sizeof(label), "doorbell: subscription %lld stream %d",
            (long long)correlation_id, cmd->stream_id);
        sub->doorbell_id = exon_counters_allocate(&c->counters, EXON_COUNTER_TYPE_DOORBELL, NULL, 0,
            label, n, correlation_id, client->client_id, exon_epoch_ms());
        if (sub->doorbell_id < 0)
        {
            free(sub);
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_STORAGE_SPACE,
                "no counter left for the doorbell of subscription %lld", (long long)correlation_id);
            return;
        }
        sub->doorbell_owned = true;
    }
    else if (exon_counters_state(&c->counters, sub->doorbell_id) != EXON_COUNTER_STATE_ALLOCATED ||
        exon_counters_type_id(&c->counters, sub->doorbell_id) != EXON_COUNTER_TYPE_DOORBELL)
    {
        int32_t id = sub->doorbell_id;
        free(sub);
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_UNKNOWN_COUNTER,
            "doorbell counter %d is not an allocated doorbell", id);
        return;
    }
    if (exon_dc_array_add(&c->subscriptions, sub) < 0)
    {
        if (sub->doorbell_owned)
        {
            exon_counters_free(&c->counters, sub->doorbell_id, exon_epoch_ms());
        }
        free(sub);
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
        return;
    }

    int32_t sub_error = EXON_DRIVER_ERR_CHANNEL_ENDPOINT;
    if (err == EXON_DC_CHANNEL_UDP && uri.control.present)
    {
        /* Aeron uses control on a subscription for multi-destination (MDC) only */
        snprintf(why, sizeof(why), "invalid channel: control=%s:%d on a subscription is not supported "
            "(multi-destination); use endpoint=HOST:PORT", uri.control.host, uri.control.port);
        sub_error = EXON_DRIVER_ERR_INVALID_CHANNEL;
    }
    int setup = 0;
    if (err == EXON_DC_CHANNEL_UDP && sub_error != EXON_DRIVER_ERR_INVALID_CHANNEL)
    {
        setup = exon_dc_setup_udp_subscription(c, sub, &uri, why, sizeof(why));
        sub_error = setup == -2 ? EXON_DRIVER_ERR_INVALID_CHANNEL : sub_error; /* a channel rule, not a socket */
    }
    if (err == EXON_DC_CHANNEL_UDP && (sub_error == EXON_DRIVER_ERR_INVALID_CHANNEL || setup < 0))
    {
        exon_dc_array_remove(&c->subscriptions, sub);
        if (sub->doorbell_owned)
        {
            exon_counters_free(&c->counters, sub->doorbell_id, exon_epoch_ms());
        }
        free(sub);
        exon_dc_send_error(c, correlation_id, sub_error, "%s", why);
        return;
    }

    exon_subscription_ready_t *r = (exon_subscription_ready_t *)c->msg;
    r->correlation_id = correlation_id;
    r->channel_status_counter_id = -1;
    r->doorbell_counter_id = sub->doorbell_id;
    r->bound_endpoint_length = 0;
    if (sub->udp)
    {
        int32_t n = (int32_t)strlen(sub->endpoint->bound_text);
        memcpy(c->msg + sizeof(*r), sub->endpoint->bound_text, (size_t)n);
        r->bound_endpoint_length = n;
    }
    exon_dc_transmit(c, EXON_RSP_ON_SUBSCRIPTION_READY, c->msg, (int32_t)sizeof(*r) + r->bound_endpoint_length);
    if (sub->udp)
    {
        exon_dc_link_images(c, sub);
        return;
    }
    exon_dc_ipc_link_publications(c, sub);
}

static void exon_dc_on_remove_subscription(exon_driver_conductor_t *c, const uint8_t *buf, int32_t length, int64_t now_ns)
{
    const exon_remove_command_t *cmd = exon_dc_remove_command(c, "REMOVE_SUBSCRIPTION", buf, length, now_ns);
    if (NULL == cmd)
    {
        return;
    }
    for (int32_t i = 0; i < c->subscriptions.length; i++)
    {
        exon_dc_subscription_t *sub = c->subscriptions.items[i];
        if (sub->registration_id == cmd->registration_id && sub->client_id == cmd->correlated.client_id)
        {
            exon_dc_remove_subscription(c, sub);
            exon_dc_send_success(c, cmd->correlated.correlation_id);
            return;
        }
    }
    exon_dc_send_error(c, cmd->correlated.correlation_id, EXON_DRIVER_ERR_UNKNOWN_SUBSCRIPTION,
        "unknown subscription %lld", (long long)cmd->registration_id);
}

static void exon_dc_on_command(
    exon_driver_conductor_t *c, int32_t type, const uint8_t *buf, int32_t length, int64_t now_ns)
{
    if (length < (int32_t)sizeof(exon_correlated_command_t))
    {
        exon_driver_conductor_error(c, "command type 0x%x of %d bytes is too short", type, length);
        return;
    }
    const exon_correlated_command_t *corr = (const exon_correlated_command_t *)buf;
    switch (type)
    {
        case EXON_CMD_ADD_PUBLICATION:
            exon_dc_on_add_publication(c, buf, length, false, now_ns);
            break;
        case EXON_CMD_ADD_EXCLUSIVE_PUBLICATION:
            exon_dc_on_add_publication(c, buf, length, true, now_ns);
            break;
        case EXON_CMD_REMOVE_PUBLICATION:
            exon_dc_on_remove_publication(c, buf, length, now_ns);
            break;
        case EXON_CMD_ADD_SUBSCRIPTION:
            exon_dc_on_add_subscription(c, buf, length, now_ns);
            break;
        case EXON_CMD_REMOVE_SUBSCRIPTION:
            exon_dc_on_remove_subscription(c, buf, length, now_ns);
            break;
        case EXON_CMD_ADD_COUNTER:
            exon_dc_on_add_counter(c, buf, length, now_ns);
            break;
        case EXON_CMD_REMOVE_COUNTER:
            exon_dc_on_remove_counter(c, buf, length, now_ns);
            break;
        case EXON_CMD_CLIENT_KEEPALIVE:
            exon_dc_client_seen(c, corr->client_id, now_ns);
            break;
        case EXON_CMD_CLIENT_CONNECT:
        {
            exon_dc_client_t *client = exon_dc_client_seen(c, corr->client_id, now_ns);
            if (NULL != client && length >= (int32_t)sizeof(exon_client_connect_command_t))
            {
                client->pid = ((const exon_client_connect_command_t *)buf)->pid;
            }
            exon_dc_send_success(c, corr->correlation_id);
            break;
        }
        case EXON_CMD_CLIENT_CLOSE:
        {
            exon_dc_client_t *client = exon_dc_find_client(c, corr->client_id);
            if (NULL != client)
            {
                exon_dc_remove_client(c, client, now_ns);
            }
            break;
        }
        case EXON_CMD_TERMINATE_DRIVER:
            exon_dc_client_seen(c, corr->client_id, now_ns);
            EXON_STORE_REL(&c->terminate_requested, 1);
            exon_dc_send_success(c, corr->correlation_id);
            break;
        default:
            exon_dc_send_error(c, corr->correlation_id, EXON_DRIVER_ERR_UNKNOWN_COMMAND,
                "unknown command type 0x%x", type);
            break;
    }
}

/* ---- UDP: network publications -------------------------------------------------------- */

void exon_dc_epoll_add(int epoll_fd, int fd)
{
    if (epoll_fd >= 0 && fd >= 0)
    {
        struct epoll_event ev = { .events = EPOLLIN, .data = { .fd = fd } };
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
}

void exon_dc_epoll_del(int epoll_fd, int fd)
{
    if (epoll_fd >= 0 && fd >= 0)
    {
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, NULL);
    }
}

/* Free a publication the sender no longer holds (released, never added, or agents stopped). */
static void exon_dc_free_net_publication(exon_driver_conductor_t *c, exon_dc_net_publication_t *pub)
{
    exon_dc_array_remove(&c->net_publications, pub);
    exon_dc_epoll_del(c->sender->epoll_fd, pub->np.channel.fd);
    exon_udp_channel_close(&pub->np.channel);
    int64_t now_ms = exon_epoch_ms();
    exon_counters_free(&c->counters, pub->pub_lmt_id, now_ms);
    exon_counters_free(&c->counters, pub->pub_pos_id, now_ms);
    exon_counters_free(&c->counters, pub->snd_pos_id, now_ms);
    exon_counters_free(&c->counters, pub->snd_lmt_id, now_ms);
    char path[EXON_LOG_PATH_MAX];
    snprintf(path, sizeof(path), "%s", pub->log.path);
    exon_log_close(&pub->log);
    exon_log_unlink(path);
    free(pub);
}

static void exon_dc_release_net_publication(exon_driver_conductor_t *c, exon_dc_net_publication_t *pub, int64_t now_ns)
{
    if (--pub->refcount > 0 || pub->state != EXON_NP_ACTIVE)
    {
        return;
    }
    int64_t eos = exon_log_producer_position(&pub->log);
    pub->np.end_of_stream_position = eos;
    exon_log_set_end_of_stream(&pub->log, eos);
    pub->drain_deadline_ns =
        exon_dc_add_ns(exon_dc_add_ns(now_ns, pub->linger_timeout_ns), c->config.publication_connection_timeout_ns);
    pub->state = EXON_NP_DRAINING;
    EXON_STORE_REL(&pub->np.state, EXON_NP_DRAINING);
}

int32_t exon_dc_alloc_counter(exon_driver_conductor_t *c, int32_t type, const char *what,
    int64_t registration_id, int32_t session_id, int32_t stream_id, const char *channel)
{
    char label[256];
    int n = snprintf(label, sizeof(label), "%s: %lld %d %d aeron:udp?endpoint=%s", what, (long long)registration_id,
        session_id, stream_id, channel);
    if (n >= (int)sizeof(label))
    {
        n = (int)sizeof(label) - 1;
    }
    return exon_counters_allocate(&c->counters, type, NULL, 0, label, n, registration_id,
        EXON_COUNTER_OWNER_DRIVER, exon_epoch_ms());
}

/*
 * The multicast rules of a UDP channel whose endpoint resolved to `dest` (exon_udp_multicast.h).
 * Returns 1 for a multicast group (*control = its control group, *iface = the interface=
 * address, family 0 without one), 0 for unicast, or -1 with `why` filled: an even group, a
 * group without port, control= beside a group, an interface= this host does not have, or
 * ttl=/fc= on a unicast endpoint.
 */
int exon_dc_multicast_check(const exon_uri_t *uri, const exon_udp_addr_t *dest, exon_udp_addr_t *control,
    exon_udp_addr_t *iface, char *why, size_t why_length)
{
    memset(iface, 0, sizeof(*iface));
    if (!exon_udp_addr_is_multicast(dest))
    {
        if (uri->ttl >= 0 || uri->fc != 0)
        {
            snprintf(why, why_length, "%s applies to a multicast endpoint only (endpoint=%s:%d is unicast)",
                uri->ttl >= 0 ? "ttl=" : "fc=", uri->endpoint.host, uri->endpoint.port);
            return -1;
        }
        return 0;
    }
    if (uri->endpoint.port == 0)
    {
        snprintf(why, why_length, "a multicast endpoint needs a port (endpoint=%s:0 given)", uri->endpoint.host);
        return -1;
    }
    if (uri->control.present)
    {
        snprintf(why, why_length, "control= is not used with a multicast endpoint (endpoint=%s:%d): "
            "the control group is the data group + 1", uri->endpoint.host, uri->endpoint.port);
        return -1;
    }
    if (exon_udp_multicast_control_addr(dest, control) < 0 ||
        (uri->has_interface && exon_udp_interface_resolve(uri->interface_name, iface, NULL, 0) < 0))
    {
        snprintf(why, why_length, "%s", exon_last_error());
        return -1;
    }
    return 1;
}

static void exon_dc_on_add_net_publication(exon_driver_conductor_t *c, const exon_publication_command_t *cmd,
    const exon_uri_t *uri, bool exclusive, exon_dc_client_t *client, int64_t now_ns)
{
    int64_t correlation_id = cmd->correlated.correlation_id;
    exon_udp_addr_t dest;
    if (uri->endpoint.port == 0)
    {
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_INVALID_CHANNEL,
            "publication channel needs an endpoint port (endpoint=%s:0 given)", uri->endpoint.host);
        return;
    }
    if (exon_udp_addr_resolve(&dest, uri->endpoint.host, uri->endpoint.port) < 0)
    {
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_INVALID_CHANNEL,
            "cannot resolve endpoint '%s': %s", uri->endpoint.host, exon_last_error());
        return;
    }
    exon_udp_addr_t mc_control, mc_iface;
    char mc_why[256];
    int multicast = exon_dc_multicast_check(uri, &dest, &mc_control, &mc_iface, mc_why, sizeof(mc_why));
    if (multicast < 0)
    {
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_INVALID_CHANNEL, "%s", mc_why);
        return;
    }
    char key[EXON_UDP_ADDR_TEXT_MAX];
    exon_udp_addr_format(&dest, key, sizeof(key));
    /* control = the local address the send socket binds (SMs, NAKs and RTTMs come back to
     * it); port 0 = an ephemeral port */
    exon_udp_addr_t control;
    char control_key[EXON_UDP_ADDR_TEXT_MAX] = "";
    if (uri->control.present)
    {
        if (exon_udp_addr_resolve(&control, uri->control.host, uri->control.port) < 0)
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_INVALID_CHANNEL,
                "cannot resolve control '%s': %s", uri->control.host, exon_last_error());
            return;
        }
        if (((const struct sockaddr *)control.storage)->sa_family !=
            ((const struct sockaddr *)dest.storage)->sa_family)
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_INVALID_CHANNEL,
                "control '%s' and endpoint '%s' are of different address families", uri->control.host,
                uri->endpoint.host);
            return;
        }
        exon_udp_addr_format(&control, control_key, sizeof(control_key));
    }

    exon_dc_net_publication_t *pub = NULL;
    for (int32_t i = 0; uri->has_session_id && i < c->net_publications.length; i++)
    {
        exon_dc_net_publication_t *other = c->net_publications.items[i];
        if (other->stream_id == cmd->stream_id && other->session_id == uri->session_id &&
            0 == strcmp(other->key, key))
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC,
                "session-id=%d clashes with publication %lld on %s stream %d", uri->session_id,
                (long long)other->registration_id, key, cmd->stream_id);
            return;
        }
    }
    if (!exclusive && !uri->has_session_id)
    {
        for (int32_t i = 0; i < c->net_publications.length; i++)
        {
            exon_dc_net_publication_t *candidate = c->net_publications.items[i];
            if (!candidate->exclusive && candidate->state == EXON_NP_ACTIVE &&
                candidate->stream_id == cmd->stream_id && 0 == strcmp(candidate->key, key) &&
                0 == strcmp(candidate->control_key, control_key))
            {
                pub = candidate;
                pub->refcount++;
                break;
            }
        }
    }
    if (NULL == pub)
    {
        int32_t term_length = uri->term_length > 0 ? uri->term_length : c->config.term_buffer_length;
        int32_t mtu = uri->mtu > 0 ? uri->mtu : c->config.mtu_length;
        pub = calloc(1, sizeof(*pub));
        if (NULL == pub)
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
            return;
        }
        pub->registration_id = correlation_id;
        pub->stream_id = cmd->stream_id;
        pub->session_id = uri->has_session_id ? uri->session_id : exon_dc_next_session_id(c, cmd->stream_id);
        pub->exclusive = exclusive;
        pub->state = EXON_NP_ACTIVE;
        pub->refcount = 1;
        pub->linger_timeout_ns = uri->linger_ns >= 0 ? uri->linger_ns : c->config.publication_linger_timeout_ns;
        pub->np.channel.fd = -1;
        snprintf(pub->key, sizeof(pub->key), "%s", key);
        snprintf(pub->control_key, sizeof(pub->control_key), "%s", control_key);
        int32_t window = c->config.publication_term_window_length;
        pub->window = (window > 0 && window < term_length / 2) ? window : term_length / 2;

        char path[EXON_LOG_PATH_MAX];
        if (exon_log_path_format(path, sizeof(path), c->config.dir, "publications", correlation_id) < 0)
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "%s", exon_last_error());
            free(pub);
            return;
        }
        exon_log_params_t params;
        memset(&params, 0, sizeof(params));
        params.term_length = term_length;
        params.mtu = mtu;
        params.page_size = c->config.file_page_size;
        params.initial_term_id = (int32_t)(uint32_t)exon_dc_random(c);
        params.session_id = pub->session_id;
        params.stream_id = cmd->stream_id;
        params.correlation_id = correlation_id;
        params.publication_window_length = pub->window;
        params.type = exclusive ? EXON_LOG_TYPE_EXCLUSIVE_PUBLICATION : EXON_LOG_TYPE_CONCURRENT_PUBLICATION;
        params.is_connected = 0;
        params.sparse = exon_dc_publication_sparse(c, uri->sparse);
        params.file_mode = c->config.dir_mode;
        if (exon_log_create(&pub->log, path, &params) < 0)
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_INVALID_CHANNEL, "cannot create log for %s: %s",
                key, exon_last_error());
            free(pub);
            return;
        }
        pub->log.meta->linger_timeout_ns = pub->linger_timeout_ns;
        pub->log.meta->signal_eos = 1;
        /* the sender sleeps on its agent doorbell: every commit may ring it */
        exon_log_add_doorbell(pub->log.meta, EXON_DOORBELL_SENDER);
        EXON_STORE_REL(&pub->log.meta->exon_waiters, 1);

        exon_udp_addr_t bind_addr;
        char bind_host[EXON_URI_HOST_MAX + 8];
        if (uri->has_interface)
        {
            snprintf(bind_host, sizeof(bind_host), "%s", uri->interface_name);
            char *cut = bind_host[0] == '[' ? strchr(bind_host, ']') : strpbrk(bind_host, ":/");
            if (bind_host[0] == '[' && cut)
            {
                *cut = '\0';
                memmove(bind_host, bind_host + 1, strlen(bind_host));
            }
            else if (cut)
            {
                *cut = '\0';
            }
        }
        else
        {
            snprintf(bind_host, sizeof(bind_host), "%s", uri->endpoint.is_ipv6 ? "::" : "0.0.0.0");
        }
        int rc = 0;
        if (multicast)
        {
            /* the socket listens on the control group; DATA goes to the data group */
            rc = exon_udp_channel_open_multicast(&pub->np.channel, &mc_control, &mc_iface, uri->ttl,
                c->config.socket_rcvbuf_length, c->config.socket_sndbuf_length);
        }
        else if (uri->control.present)
        {
            bind_addr = control;
        }
        else
        {
            rc = exon_udp_addr_resolve(&bind_addr, bind_host, 0);
        }
        if (rc >= 0 && !multicast)
        {
            rc = exon_udp_channel_open(&pub->np.channel, &bind_addr, c->config.socket_rcvbuf_length,
                c->config.socket_sndbuf_length);
        }
        if (rc >= 0 && c->config.udp_gso)
        {
            exon_udp_channel_enable_gso(&pub->np.channel); /* left off where the kernel has none */
        }
        pub->pub_lmt_id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_PUBLISHER_LIMIT, "pub-lmt", correlation_id,
            pub->session_id, pub->stream_id, key);
        pub->pub_pos_id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_PUBLISHER_POSITION, "pub-pos",
            correlation_id, pub->session_id, pub->stream_id, key);
        pub->snd_pos_id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_SENDER_POSITION, "snd-pos", correlation_id,
            pub->session_id, pub->stream_id, key);
        pub->snd_lmt_id = exon_dc_alloc_counter(c, EXON_COUNTER_TYPE_SENDER_LIMIT, "snd-lmt", correlation_id,
            pub->session_id, pub->stream_id, key);
        if (rc < 0 || pub->pub_lmt_id < 0 || pub->pub_pos_id < 0 || pub->snd_pos_id < 0 || pub->snd_lmt_id < 0)
        {
            char saved[512];
            snprintf(saved, sizeof(saved), "%s", rc < 0 ? exon_last_error() : "no counters left");
            int64_t now_ms = exon_epoch_ms();
            if (pub->pub_lmt_id >= 0) exon_counters_free(&c->counters, pub->pub_lmt_id, now_ms);
            if (pub->pub_pos_id >= 0) exon_counters_free(&c->counters, pub->pub_pos_id, now_ms);
            if (pub->snd_pos_id >= 0) exon_counters_free(&c->counters, pub->snd_pos_id, now_ms);
            if (pub->snd_lmt_id >= 0) exon_counters_free(&c->counters, pub->snd_lmt_id, now_ms);
            exon_udp_channel_close(&pub->np.channel);
            exon_log_close(&pub->log);
            exon_log_unlink(path);
            free(pub);
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_CHANNEL_ENDPOINT,
                "cannot open the send channel for %s: %s", key, saved);
            return;
        }
        exon_counter_set(&c->counters, pub->pub_lmt_id, 0);
        exon_counter_set(&c->counters, pub->pub_pos_id, exon_log_producer_position(&pub->log));
        exon_network_publication_params_t np_params = {
            .connection_timeout_ns = c->config.publication_connection_timeout_ns,
            .heartbeat_interval_ns = c->config.heartbeat_interval_ns,
            .setup_interval_ns = c->config.setup_interval_ns,
            .retransmit_delay_ns = c->config.retransmit_delay_ns,
            .retransmit_linger_ns = c->config.retransmit_linger_ns,
            .max_resend = uri->max_resend > 0 ? uri->max_resend : c->config.max_resend,
            .multicast = multicast > 0,
            .ttl = uri->ttl > 0 ? uri->ttl : 0,
            .flow_control = uri->fc == EXON_URI_FC_MAX ? EXON_FC_MAX : EXON_FC_MIN,
            .fc_receiver_timeout_ns = uri->fc_timeout_ns > 0 ? uri->fc_timeout_ns : 0,
        };
        if (exon_network_publication_init(&pub->np, &pub->log, &c->counters, &dest, pub->snd_pos_id,
            pub->snd_lmt_id, &np_params, c->sender->send_loss_enabled ? &c->sender->send_loss : NULL, now_ns) < 0)
        {
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_INVALID_CHANNEL, "%s", exon_last_error());
            exon_udp_channel_close(&pub->np.channel);
            int64_t now_ms = exon_epoch_ms();
            exon_counters_free(&c->counters, pub->pub_lmt_id, now_ms);
            exon_counters_free(&c->counters, pub->pub_pos_id, now_ms);
            exon_counters_free(&c->counters, pub->snd_pos_id, now_ms);
            exon_counters_free(&c->counters, pub->snd_lmt_id, now_ms);
            exon_log_close(&pub->log);
            exon_log_unlink(path);
            free(pub);
            return;
        }
        exon_dc_epoll_add(c->sender->epoll_fd, pub->np.channel.fd);
        if (exon_dc_array_add(&c->net_publications, pub) < 0 ||
            exon_command_queue_offer(&c->sender->commands, EXON_AGENT_CMD_ADD_PUBLICATION, 0, &pub->np) < 0)
        {
            exon_dc_free_net_publication(c, pub);
            exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
            return;
        }
    }
    exon_dc_publication_link_t *link = exon_dc_new_publication_link(c, correlation_id, client->client_id);
    if (NULL == link)
    {
        exon_dc_release_net_publication(c, pub, now_ns);
        exon_dc_send_error(c, correlation_id, EXON_DRIVER_ERR_GENERIC, "out of memory");
        return;
    }
    link->net = pub;

    exon_dc_send_publication_ready(c, correlation_id, pub->registration_id, pub->session_id,
        pub->stream_id, pub->pub_lmt_id, pub->snd_pos_id, pub->log.path, exclusive);
}

static int exon_dc_update_net_publications(exon_driver_conductor_t *c, int64_t now_ns)
{
    int work = 0;
    for (int32_t i = c->net_publications.length - 1; i >= 0; i--)
    {
        exon_dc_net_publication_t *pub = c->net_publications.items[i];
        int64_t snd_pos = exon_counter_get(&c->counters, pub->snd_pos_id);
        bool connected = 0 != EXON_LOAD_ACQ(&pub->log.meta->is_connected);
        exon_counter_set(&c->counters, pub->pub_pos_id, exon_log_producer_position(&pub->log));
        if (pub->state == EXON_NP_ACTIVE)
        {
            int64_t clean_to = snd_pos - pub->log.term_length;
            if (clean_to > pub->clean_position)
            {
                exon_log_clean_to(&pub->log, &pub->clean_position, clean_to);
            }
            int64_t limit = exon_counter_get(&c->counters, pub->pub_lmt_id);
            int64_t new_limit = connected ? snd_pos + pub->window : snd_pos;
            if (new_limit != limit)
            {
                exon_counter_set(&c->counters, pub->pub_lmt_id, new_limit);
                if (exon_log_producer_position(&pub->log) >= limit - pub->window / 2)
                {
                    work++;
                }
            }
        }
        else if (pub->state == EXON_NP_DRAINING)
        {
            if (snd_pos >= pub->np.end_of_stream_position || !connected || now_ns >= pub->drain_deadline_ns)
            {
                pub->state = EXON_NP_LINGER;
                EXON_STORE_REL(&pub->np.state, EXON_NP_LINGER);
                pub->linger_deadline_ns = exon_dc_add_ns(now_ns, pub->linger_timeout_ns);
                work++;
            }
        }
        else if (pub->state == EXON_NP_LINGER && now_ns >= pub->linger_deadline_ns)
        {
            /* the sender drops it at its next duty cycle; freed once it says so */
            if (exon_command_queue_offer(&c->sender->commands, EXON_AGENT_CMD_REMOVE_PUBLICATION, 0, &pub->np) >= 0)
            {
                pub->state = EXON_NP_CLOSED;
                work++;
            }
        }
        else if (pub->state == EXON_NP_CLOSED && EXON_LOAD_ACQ(&pub->np.sender_released))
        {
            exon_dc_free_net_publication(c, pub);
            work++;
        }
    }
    return work;
}

static int exon_dc_update_udp(exon_driver_conductor_t *c, int64_t now_ns)
{
    int work = exon_dc_update_net_publications(c, now_ns);
    if (c->sender->commands.backlog_length > 0)
    {
        exon_command_queue_flush(&c->sender->commands); /* what the full ring left behind */
    }
    work += exon_dc_update_images(c, now_ns);
    return work;
}

static void exon_dc_close_udp(exon_driver_conductor_t *c)
{
    while (c->net_publications.length > 0)
    {
        exon_dc_free_net_publication(c, c->net_publications.items[0]);
    }
    exon_dc_close_receive_endpoints(c);
    free(c->net_publications.items);
    memset(&c->net_publications, 0, sizeof(c->net_publications));
}

/* ---- duty cycle --------------------------------------------------------------------- */

static int exon_dc_check_liveness(exon_driver_conductor_t *c, int64_t now_ns)
{
    int work = 0;
    for (int32_t i = c->clients.length - 1; i >= 0; i--)
    {
        exon_dc_client_t *client = c->clients.items[i];
        if (now_ns - client->last_keepalive_ns > c->config.client_liveness_timeout_ns)
        {
            exon_client_timeout_t m = { .client_id = client->client_id };
            exon_driver_conductor_error(c, "client %lld (pid %lld) timed out: no keepalive for %lld ms",
                (long long)client->client_id, (long long)client->pid,
                (long long)((now_ns - client->last_keepalive_ns) / 1000000));
            exon_dc_remove_client(c, client, now_ns);
            exon_counter_add(&c->counters, EXON_SYSTEM_COUNTER_CLIENT_TIMEOUTS, 1);
            exon_dc_transmit(c, EXON_RSP_ON_CLIENT_TIMEOUT, &m, (int32_t)sizeof(m));
            i = c->clients.length;
            work++;
        }
    }
    exon_ring_check_unblock(&c->to_driver, now_ns, c->config.client_liveness_timeout_ns);
    return work;
}

int exon_driver_conductor_do_work(void *state, int64_t now_ns)
{
    exon_driver_conductor_t *c = (exon_driver_conductor_t *)state;
    int work = 0;

    int64_t now_ms = exon_epoch_ms();
    if (now_ms != c->last_heartbeat_ms)
    {
        exon_cnc_set_driver_heartbeat_ms(c->cnc, now_ms);
        c->last_heartbeat_ms = now_ms;
    }

    exon_ring_batch_t batch;
    if (exon_ring_read_begin(&c->to_driver, &batch, EXON_DC_COMMAND_LIMIT) >= 0)
    {
        int32_t type, offset, length;
        while (1 == exon_ring_read_next(&c->to_driver, &batch, &type, &offset, &length))
        {
            exon_dc_on_command(c, type, c->to_driver.buffer + offset, length, now_ns);
            work++;
        }
        exon_ring_read_end(&c->to_driver, &batch);
    }

    work += exon_dc_update_ipc_publications(c, now_ns);
    work += exon_dc_update_udp(c, now_ns);

    if (now_ns >= c->next_timer_ns)
    {
        c->next_timer_ns = now_ns + c->timer_interval_ns;
        work += exon_dc_check_liveness(c, now_ns);
    }
    return work;
}

int exon_driver_conductor_init(exon_driver_conductor_t *c, exon_cnc_t *cnc,
    const exon_driver_context_t *config, exon_sender_t *sender, exon_receiver_t *receiver)
{
    memset(c, 0, sizeof(*c));
    c->config = *config;
    c->cnc = cnc;
    c->sender = sender;
    c->receiver = receiver;
    int rc;
    if ((rc = exon_cnc_to_driver_ring(cnc, &c->to_driver)) < 0 ||
        (rc = exon_cnc_to_clients_transmitter(cnc, &c->to_clients)) < 0 ||
        (rc = exon_cnc_counters(cnc, &c->counters, 1000)) < 0)
    {
        return rc;
    }
    if (exon_cnc_error_log(cnc, &c->error_log) >= 0)
    {
        c->error_log_ready = true;
    }
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
    {
        seed = (uint64_t)exon_nano_clock() ^ ((uint64_t)getpid() << 32);
    }
    c->rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
    c->receiver_id = (int64_t)(exon_dc_random(c) & 0x7FFFFFFFFFFFFFFFULL);

    int64_t interval = config->timer_interval_ns;
    int64_t quarter = config->client_liveness_timeout_ns / 4;
    if (interval <= 0 || (quarter > 0 && quarter < interval))
    {
        interval = quarter > 0 ? quarter : 1000000;
    }
    if (interval > 100000000LL)
    {
        interval = 100000000LL;
    }
    c->timer_interval_ns = interval;

    char path[EXON_MAX_PATH_LENGTH + 32];
    mode_t dir_mode = config->dir_mode > 0 ? (mode_t)(config->dir_mode & 07777) : 0700;
    static const char *const subdirs[] = { "publications", "images" };
    for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++)
    {
        snprintf(path, sizeof(path), "%s/%s", config->dir, subdirs[i]);
        if (mkdir(path, dir_mode) < 0 && errno != EEXIST)
        {
            return exon_set_error(-errno, "cannot create %s: %s", path, strerror(errno));
        }
        if (chmod(path, dir_mode) < 0) /* exactly dir_mode, whatever the umask */
        {
            return exon_set_error(-errno, "cannot chmod %s: %s", path, strerror(errno));
        }
    }
    exon_cnc_set_driver_heartbeat_ms(cnc, exon_epoch_ms());
    return 0;
}

void exon_driver_conductor_close(exon_driver_conductor_t *c)
{
    exon_dc_close_udp(c); /* the agents are stopped: the sender's and receiver's queues
                           * and lists are theirs, freed by the driver after this */
    while (c->publications.length > 0)
    {
        exon_dc_ipc_publication_t *pub = c->publications.items[0];
        exon_dc_free_ipc_publication(c, pub);
    }
    exon_dc_array_free(&c->subscriber_positions);
    exon_dc_array_free(&c->client_counters);
    exon_dc_array_free(&c->publication_links);
    exon_dc_array_free(&c->subscriptions);
    exon_dc_array_free(&c->clients);
    exon_dc_array_free(&c->publications);
    if (c->error_log_ready)
    {
        exon_error_log_close(&c->error_log);
        c->error_log_ready = false;
    }
}
