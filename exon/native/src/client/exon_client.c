/* exon_client.c: the client conductor: connect, keepalives, commands, image events. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/exon_common.h"
#include "concurrent/exon_agent.h"
#include "concurrent/exon_doorbell.h"
#include "client/exon_client.h"
#include "common/exon_counter_command.h"

#define EXON_CLIENT_MAX_WAIT_SLICE_NS 100000000LL

typedef struct exon_client_pending_stct
{
    int64_t correlation_id;
    int32_t done;
    int32_t response_type;
    int32_t error_code;        /* ON_ERROR's code */
    int32_t payload_length;
    uint8_t payload[EXON_MAX_PATH_LENGTH + 256];
    struct exon_client_pending_stct *next;
}
exon_client_pending_t;

typedef struct exon_client_sub_stct
{
    int64_t registration_id;
    int64_t event_count;
    exon_image_event_t *events;
    int32_t head;
    int32_t length;
    int32_t capacity;
    struct exon_client_sub_stct *next;
}
exon_client_sub_t;

struct exon_client_stct
{
    exon_cnc_t cnc;
    exon_ring_t ring;
    exon_broadcast_receiver_t rx;
    exon_counters_t counters;
    int64_t client_id;
    int64_t driver_timeout_ms;
    int64_t keepalive_interval_ns;
    int64_t driver_pid;
    int64_t instance_id;
    int32_t conductor_thread_index;
    volatile int32_t running;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int32_t failed_code;
    char failed_text[768];
    exon_client_pending_t *pending;
    exon_client_sub_t *subs;
    volatile int64_t heartbeat_age_ms;
    volatile int64_t keepalives_sent;
    uint8_t *rx_buf;
    int32_t rx_buf_length;
    char dir[EXON_MAX_PATH_LENGTH];
};

/* ---- helpers ------------------------------------------------------------------------ */

static void exon_client_deadline(struct timespec *ts, int64_t timeout_ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    int64_t ns = ts->tv_nsec + timeout_ns % 1000000000LL;
    ts->tv_sec += timeout_ns / 1000000000LL + ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
}

/* Mark the client failed (first reason wins) and wake every waiter. Lock NOT held. */
static void exon_client_fail(exon_client_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void exon_client_fail(exon_client_t *c, int code, const char *fmt, ...)
{
    pthread_mutex_lock(&c->lock);
    if (0 == c->failed_code)
    {
        va_list args;
        va_start(args, fmt);
        vsnprintf(c->failed_text, sizeof(c->failed_text), fmt, args);
        va_end(args);
        c->failed_code = code;
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Copy the failure into this thread's error text. Lock held. */
static int exon_client_failure_locked(exon_client_t *c)
{
    return exon_set_error(c->failed_code, "%s", c->failed_text);
}

static int exon_client_send(exon_client_t *c, int32_t type, const void *msg, int32_t length, int64_t deadline_ns)
{
    while (true)
    {
        int rc = exon_ring_write(&c->ring, type, msg, length);
        if (rc >= 0)
        {
            exon_agent_doorbell_ring(c->instance_id, c->conductor_thread_index,
                &c->cnc.header->agent_state[c->conductor_thread_index].sleeping);
            return 0;
        }
        if (rc != EXON_E_FULL)
        {
            return rc;
        }
        if (exon_nano_clock() >= deadline_ns)
        {
            return exon_set_error(EXON_E_DRIVER_TIMEOUT,
                "the driver's command ring in %s stayed full: is the driver stuck?", c->dir);
        }
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

static exon_client_sub_t *exon_client_find_sub_locked(exon_client_t *c, int64_t registration_id)
{
    for (exon_client_sub_t *s = c->subs; NULL != s; s = s->next)
    {
        if (s->registration_id == registration_id)
        {
            return s;
        }
    }
    return NULL;
}

static void exon_client_push_event_locked(exon_client_sub_t *s, const exon_image_event_t *event)
{
    if (s->length == s->capacity)
    {
        int32_t capacity = s->capacity ? s->capacity * 2 : 4;
        exon_image_event_t *events = malloc(sizeof(*events) * (size_t)capacity);
        if (NULL == events)
        {
            return;
        }
        for (int32_t i = 0; i < s->length; i++)
        {
            events[i] = s->events[(s->head + i) % s->capacity];
        }
        free(s->events);
        s->events = events;
        s->head = 0;
        s->capacity = capacity;
    }
    s->events[(s->head + s->length) % s->capacity] = *event;
    s->length++;
    EXON_STORE_REL(&s->event_count, s->event_count + 1);
}

/* ---- broadcast dispatch (conductor thread) ----------------------------------------- */

static void exon_client_complete(exon_client_t *c, int64_t correlation_id, int32_t type, const uint8_t *buf, int32_t length, int32_t error_code)
{
    pthread_mutex_lock(&c->lock);
    for (exon_client_pending_t *p = c->pending; NULL != p; p = p->next)
    {
        if (p->correlation_id == correlation_id && !p->done)
        {
            int32_t n = length < (int32_t)sizeof(p->payload) ? length : (int32_t)sizeof(p->payload);
            memcpy(p->payload, buf, (size_t)n);
            p->payload_length = n;
            p->response_type = type;
            p->error_code = error_code;
            p->done = 1;
            pthread_cond_broadcast(&c->cond);
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
}

static void exon_client_on_image(exon_client_t *c, int32_t type, const uint8_t *buf, int32_t length)
{
    exon_image_event_t event;
    memset(&event, 0, sizeof(event));
    if (type == EXON_RSP_ON_AVAILABLE_IMAGE)
    {
        if (length < (int32_t)sizeof(exon_image_ready_t))
        {
            return;
        }
        const exon_image_ready_t *m = (const exon_image_ready_t *)buf;
        if (m->log_file_length < 0 || m->log_file_length >= EXON_MAX_PATH_LENGTH ||
            (int32_t)sizeof(*m) + m->log_file_length > length)
        {
            return;
        }
        event.type = EXON_IMAGE_EVENT_AVAILABLE;
        event.correlation_id = m->correlation_id;
        event.subscription_registration_id = m->subscription_registration_id;
        event.session_id = m->session_id;
        event.stream_id = m->stream_id;
        event.subscriber_position_counter_id = m->subscriber_position_counter_id;
        memcpy(event.log_file, buf + sizeof(*m), (size_t)m->log_file_length);
        int32_t at = (int32_t)sizeof(*m) + m->log_file_length;
        int32_t source_length = 0;
        if (at + 4 <= length)
        {
            memcpy(&source_length, buf + at, 4);
            if (source_length > 0 && source_length < EXON_CLIENT_SOURCE_IDENTITY_LENGTH && at + 4 + source_length <= length)
            {
                memcpy(event.source_identity, buf + at + 4, (size_t)source_length);
            }
        }
    }
    else
    {
        if (length < (int32_t)sizeof(exon_image_message_t))
        {
            return;
        }
        const exon_image_message_t *m = (const exon_image_message_t *)buf;
        event.type = EXON_IMAGE_EVENT_UNAVAILABLE;
        event.correlation_id = m->correlation_id;
        event.subscription_registration_id = m->subscription_registration_id;
        event.stream_id = m->stream_id;
    }
    pthread_mutex_lock(&c->lock);
    exon_client_sub_t *s = exon_client_find_sub_locked(c, event.subscription_registration_id);
    if (NULL != s)
    {
        exon_client_push_event_locked(s, &event);
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
}

static void exon_client_dispatch(exon_client_t *c, int32_t type, const uint8_t *buf, int32_t length)
{
    switch (type)
    {
        case EXON_RSP_ON_ERROR:
            if (length >= (int32_t)sizeof(exon_error_response_t))
            {
                const exon_error_response_t *r = (const exon_error_response_t *)buf;
                int32_t n = r->error_message_length;
                if (n < 0 || (int32_t)sizeof(*r) + n > length)
                {
                    n = 0;
                }
                exon_client_complete(c, r->offending_command_correlation_id, type, buf + sizeof(*r), n, r->error_code);
            }
            break;
        case EXON_RSP_ON_PUBLICATION_READY:
        case EXON_RSP_ON_EXCLUSIVE_PUBLICATION_READY:
        case EXON_RSP_ON_SUBSCRIPTION_READY:
        case EXON_RSP_ON_OPERATION_SUCCESS:
        case EXON_RSP_ON_COUNTER_READY:
            if (length >= 8)
            {
                int64_t correlation_id;
                memcpy(&correlation_id, buf, 8);
                exon_client_complete(c, correlation_id, type, buf, length, 0);
            }
            break;
        case EXON_RSP_ON_AVAILABLE_IMAGE:
        case EXON_RSP_ON_UNAVAILABLE_IMAGE:
            exon_client_on_image(c, type, buf, length);
            break;
        case EXON_RSP_ON_CLIENT_TIMEOUT:
            if (length >= (int32_t)sizeof(exon_client_timeout_t) &&
                ((const exon_client_timeout_t *)buf)->client_id == c->client_id)
            {
                exon_client_fail(c, EXON_E_CLIENT_CLOSED,
                    "the driver in %s timed this client out (no keepalive within its liveness timeout)", c->dir);
            }
            break;
        default:
            break;
    }
}

static int exon_client_drain(exon_client_t *c)
{
    int count = 0;
    for (int i = 0; i < 256; i++)
    {
        int32_t type = 0;
        int32_t length = 0;
        int rc = exon_broadcast_receive(&c->rx, &type, c->rx_buf, c->rx_buf_length, &length);
        if (rc <= 0)
        {
            break;
        }
        exon_client_dispatch(c, type, c->rx_buf, length);
        count++;
    }
    return count;
}

static void exon_client_check_driver(exon_client_t *c)
{
    int64_t heartbeat = exon_cnc_driver_heartbeat_ms(&c->cnc);
    int64_t age = exon_epoch_ms() - heartbeat;
    c->heartbeat_age_ms = age;
    if (age > c->driver_timeout_ms)
    {
        if (0 == heartbeat)
        {
            exon_client_fail(c, EXON_E_DRIVER_TIMEOUT, "the driver in %s has shut down", c->dir);
        }
        else
        {
            exon_client_fail(c, EXON_E_DRIVER_TIMEOUT,
                "driver in %s is not responding: heartbeat %lld ms old (driver timeout %lld ms)",
                c->dir, (long long)age, (long long)c->driver_timeout_ms);
        }
        return;
    }
    if (c->driver_pid > 0 && c->driver_pid != (int64_t)getpid() &&
        kill((pid_t)c->driver_pid, 0) < 0 && errno == ESRCH)
    {
        exon_client_fail(c, EXON_E_DRIVER_TIMEOUT, "driver process %lld of %s is gone",
            (long long)c->driver_pid, c->dir);
    }
}

static void exon_client_send_keepalive(exon_client_t *c)
{
    exon_correlated_command_t cmd = { .client_id = c->client_id, .correlation_id = 0 };
    if (exon_ring_write(&c->ring, EXON_CMD_CLIENT_KEEPALIVE, &cmd, (int32_t)sizeof(cmd)) >= 0)
    {
        c->keepalives_sent++;
    }
}

static void *exon_client_main(void *arg)
{
    exon_client_t *c = (exon_client_t *)arg;
    pthread_setname_np(pthread_self(), "exon-client");
    exon_cnc_header_t *h = c->cnc.header;
    int64_t next_keepalive_ns = exon_nano_clock() + c->keepalive_interval_ns;
    int64_t wait_ns = EXON_DOORBELL_FIRST_WAIT_NS;

    while (EXON_LOAD_ACQ(&c->running))
    {
        int64_t now_ns = exon_nano_clock();
        if (now_ns >= next_keepalive_ns)
        {
            if (0 == c->failed_code)
            {
                exon_client_send_keepalive(c);
            }
            next_keepalive_ns = now_ns + c->keepalive_interval_ns;
        }
        if (0 == c->failed_code)
        {
            exon_client_check_driver(c);
        }
        if (exon_client_drain(c) > 0)
        {
            wait_ns = EXON_DOORBELL_FIRST_WAIT_NS;
            continue;
        }
        int32_t seen = exon_doorbell_read(&h->to_clients_doorbell);
        EXON_FETCH_ADD(&h->to_clients_waiters, 1);
        if (exon_client_drain(c) == 0)
        {
            int64_t until_keepalive = next_keepalive_ns - exon_nano_clock();
            int64_t timeout = wait_ns;
            if (timeout > until_keepalive)
            {
                timeout = until_keepalive > 0 ? until_keepalive : 0;
            }
            if (timeout > 0)
            {
                exon_doorbell_wait(&h->to_clients_doorbell, seen, timeout);
            }
            wait_ns = EXON_CLIENT_MAX_WAIT_SLICE_NS;
        }
        else
        {
            wait_ns = EXON_DOORBELL_FIRST_WAIT_NS;
        }
        EXON_FETCH_ADD(&h->to_clients_waiters, -1);
    }
    return NULL;
}

/* ---- request / response ------------------------------------------------------------- */

/*
 * Send a command carrying `correlation_id` and wait for its answer. Returns the response
 * type (> 0) with the payload in *pending, or a negative code (error text set).
 */
static int exon_client_request(
    exon_client_t *c,
    exon_client_pending_t *p,
    int32_t type,
    const void *msg,
    int32_t length,
    int64_t correlation_id,
    int64_t timeout_ns,
    const char *what)
{
    memset(p, 0, offsetof(exon_client_pending_t, payload));
    p->correlation_id = correlation_id;
    pthread_mutex_lock(&c->lock);
    if (0 != c->failed_code)
    {
        int rc = exon_client_failure_locked(c);
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    p->next = c->pending;
    c->pending = p;
    pthread_mutex_unlock(&c->lock);

    int64_t deadline_ns = exon_nano_clock() + (timeout_ns > 0 ? timeout_ns : 0);
    int rc = exon_client_send(c, type, msg, length, deadline_ns);

    pthread_mutex_lock(&c->lock);
    if (rc >= 0)
    {
        struct timespec ts;
        exon_client_deadline(&ts, timeout_ns > 0 ? timeout_ns : 0);
        while (!p->done && 0 == c->failed_code)
        {
            if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) == ETIMEDOUT)
            {
                break;
            }
        }
        if (p->done)
        {
            rc = p->response_type;
        }
        else if (0 != c->failed_code)
        {
            rc = exon_client_failure_locked(c);
        }
        else
        {
            rc = exon_set_error(EXON_E_TIMEOUT, "%s: no answer from the driver in %s within %lld ms",
                what, c->dir, (long long)(timeout_ns / 1000000));
        }
    }
    for (exon_client_pending_t **pp = &c->pending; NULL != *pp; pp = &(*pp)->next)
    {
        if (*pp == p)
        {
            *pp = p->next;
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);

    if (rc == EXON_RSP_ON_ERROR)
    {
        int code = p->error_code == EXON_DRIVER_ERR_INVALID_CHANNEL ? EXON_E_URI : EXON_E_DRIVER_ERROR;
        rc = exon_set_error(code, "%s: driver refused (code %d): %.*s",
            what, p->error_code, p->payload_length, (const char *)p->payload);
    }
    return rc;
}

/* exon_client_request for a command whose answer carries nothing: 0 on any answer. */
static int exon_client_request_ack(
    exon_client_t *c,
    int32_t type,
    const void *msg,
    int32_t length,
    int64_t correlation_id,
    int64_t timeout_ns,
    const char *what)
{
    exon_client_pending_t *p = malloc(sizeof(*p));
    if (NULL == p)
    {
        return exon_set_error(-ENOMEM, "out of memory");
    }
    int rc = exon_client_request(c, p, type, msg, length, correlation_id, timeout_ns, what);
    free(p);
    return rc < 0 ? rc : 0;
}

/* ---- public API --------------------------------------------------------------------- */

int exon_client_connect(
    exon_client_t **client_out,
    const char *dir,
    int64_t timeout_ns,
    int64_t driver_timeout_ms,
    int64_t keepalive_interval_ns)
{
    *client_out = NULL;
    if (NULL == dir || '\0' == dir[0] || strlen(dir) >= EXON_MAX_PATH_LENGTH)
    {
        return exon_set_error(EXON_E_ARGUMENT, "driver dir is empty or too long");
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
    {
        return exon_set_error(EXON_E_CNC_CORRUPT,
            "%s/%s: no such driver directory (is a driver running with this dir?)", dir, EXON_CNC_FILE);
    }
    exon_client_t *c = calloc(1, sizeof(*c));
    if (NULL == c)
    {
        return exon_set_error(-ENOMEM, "out of memory");
    }
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &attr);
    pthread_condattr_destroy(&attr);

    int64_t deadline_ns = exon_nano_clock() + (timeout_ns > 0 ? timeout_ns : 0);
    int rc;
    while (true)
    {
        rc = exon_cnc_open(&c->cnc, dir);
        if (rc >= 0)
        {
            break;
        }
        if ((rc != -ENOENT && rc != -EAGAIN) || exon_nano_clock() >= deadline_ns)
        {
            if (rc == -ENOENT)
            {
                rc = exon_set_error(EXON_E_CNC_CORRUPT, "%s/%s does not exist (is a driver running with this dir?)",
                    dir, EXON_CNC_FILE);
            }
            else if (rc == -EAGAIN)
            {
                rc = exon_set_error(EXON_E_CNC_CORRUPT, "%s/%s was never completed by its driver", dir, EXON_CNC_FILE);
            }
            goto fail;
        }
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    exon_cnc_header_t *h = c->cnc.header;
    c->driver_timeout_ms = driver_timeout_ms > 0 ? driver_timeout_ms : h->driver_timeout_ms;
    if (c->driver_timeout_ms <= 0)
    {
        c->driver_timeout_ms = 10000;
    }
    c->keepalive_interval_ns = keepalive_interval_ns > 0 ? keepalive_interval_ns : EXON_CLIENT_DEFAULT_KEEPALIVE_NS;
    if (keepalive_interval_ns <= 0 && h->client_liveness_timeout_ns > 0 &&
        c->keepalive_interval_ns > h->client_liveness_timeout_ns / 4)
    {
        /* a driver with a short client liveness (tests, embedded nodes): keep at least four
         * keepalives within it, so that one late wake-up does not time this client out */
        c->keepalive_interval_ns = h->client_liveness_timeout_ns / 4;
    }
    c->driver_pid = h->pid;
    c->instance_id = h->driver_instance_id;
    c->conductor_thread_index = h->agent_thread_index[EXON_AGENT_CONDUCTOR];
    if (c->conductor_thread_index < 0 || c->conductor_thread_index >= EXON_AGENT_COUNT)
    {
        rc = exon_set_error(EXON_E_CNC_CORRUPT, "%s/%s: bad conductor thread index %d", dir, EXON_CNC_FILE,
            c->conductor_thread_index);
        goto fail;
    }
    if ((rc = exon_cnc_to_driver_ring(&c->cnc, &c->ring)) < 0 ||
        (rc = exon_cnc_to_clients_receiver(&c->cnc, &c->rx)) < 0 ||
        (rc = exon_cnc_counters(&c->cnc, &c->counters, 1000)) < 0)
    {
        goto fail;
    }
    int64_t age = exon_epoch_ms() - exon_cnc_driver_heartbeat_ms(&c->cnc);
    if (age > c->driver_timeout_ms)
    {
        rc = exon_set_error(EXON_E_DRIVER_TIMEOUT, "no live driver in %s: heartbeat %lld ms old (driver timeout %lld ms)",
            dir, (long long)age, (long long)c->driver_timeout_ms);
        goto fail;
    }
    c->rx_buf_length = c->rx.max_message_length > 0 ? c->rx.max_message_length : 8192;
    c->rx_buf = malloc((size_t)c->rx_buf_length);
    if (NULL == c->rx_buf)
    {
        rc = exon_set_error(-ENOMEM, "out of memory");
        goto fail;
    }
    c->client_id = exon_ring_next_correlation_id(&c->ring);

    EXON_STORE_REL(&c->running, 1);
    int err = pthread_create(&c->thread, NULL, exon_client_main, c);
    if (0 != err)
    {
        rc = exon_set_error(-err, "client conductor thread: %s", strerror(err));
        goto fail;
    }
    c->thread_started = 1;

    exon_client_connect_command_t cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.correlated.client_id = c->client_id;
    cmd.correlated.correlation_id = exon_ring_next_correlation_id(&c->ring);
    cmd.pid = getpid();
    cmd.name_length = 0;
    exon_client_pending_t *p = malloc(sizeof(*p));
    if (NULL == p)
    {
        rc = exon_set_error(-ENOMEM, "out of memory");
        goto fail;
    }
    int64_t remaining = deadline_ns - exon_nano_clock();
    if (remaining < 100000000LL)
    {
        remaining = 100000000LL;
    }
    rc = exon_client_request(c, p, EXON_CMD_CLIENT_CONNECT, &cmd, (int32_t)sizeof(cmd),
        cmd.correlated.correlation_id, remaining, "connect");
    free(p);
    if (rc == EXON_E_TIMEOUT)
    {
        rc = exon_set_error(EXON_E_DRIVER_TIMEOUT, "the driver in %s did not answer CLIENT_CONNECT", dir);
    }
    if (rc < 0)
    {
        goto fail;
    }
    *client_out = c;
    return 0;

fail:
    {
        char saved[1024];
        snprintf(saved, sizeof(saved), "%s", exon_last_error());
        if (c->thread_started)
        {
            EXON_STORE_REL(&c->running, 0);
            exon_doorbell_ring(&c->cnc.header->to_clients_doorbell);
            pthread_join(c->thread, NULL);
        }
        if (NULL != c->cnc.base)
        {
            exon_cnc_close(&c->cnc);
        }
        free(c->rx_buf);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return exon_set_error(rc, "%s", saved);
    }
}

int exon_client_close(exon_client_t *c)
{
    if (NULL == c)
    {
        return 0;
    }
    if (0 == c->failed_code)
    {
        exon_correlated_command_t cmd = { .client_id = c->client_id, .correlation_id = exon_ring_next_correlation_id(&c->ring) };
        exon_client_send(c, EXON_CMD_CLIENT_CLOSE, &cmd, (int32_t)sizeof(cmd), exon_nano_clock() + 100000000LL);
    }
    exon_client_fail(c, EXON_E_CLIENT_CLOSED, "client closed");
    EXON_STORE_REL(&c->running, 0);
    if (c->thread_started)
    {
        exon_doorbell_ring(&c->cnc.header->to_clients_doorbell);
        pthread_join(c->thread, NULL);
    }
    exon_client_sub_t *s = c->subs;
    while (NULL != s)
    {
        exon_client_sub_t *next = s->next;
        free(s->events);
        free(s);
        s = next;
    }
    exon_cnc_close(&c->cnc);
    free(c->rx_buf);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return 0;
}

int64_t exon_client_id(exon_client_t *c)
{
    return c->client_id;
}

int exon_client_status(exon_client_t *c)
{
    pthread_mutex_lock(&c->lock);
    int rc = 0 == c->failed_code ? 0 : exon_client_failure_locked(c);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int64_t exon_client_driver_heartbeat_age_ms(exon_client_t *c)
{
    return c->heartbeat_age_ms;
}

int64_t exon_client_keepalives_sent(exon_client_t *c)
{
    return c->keepalives_sent;
}

uint8_t *exon_client_counters_values(exon_client_t *c)
{
    return c->cnc.counters_values_buffer;
}

int64_t *exon_client_counter_addr(exon_client_t *c, int32_t counter_id)
{
    return exon_counter_addr(&c->counters, counter_id);
}

exon_counters_t *exon_client_counters(exon_client_t *c)
{
    return &c->counters;
}

static int exon_client_check_channel(const char *channel)
{
    if (NULL == channel)
    {
        return exon_set_error(EXON_E_URI, "channel is NULL");
    }
    size_t n = strlen(channel);
    if (0 == n || n > EXON_MAX_CHANNEL_LENGTH)
    {
        return exon_set_error(EXON_E_URI, "channel length %zu is not in [1, %d]", n, EXON_MAX_CHANNEL_LENGTH);
    }
    return (int)n;
}

int exon_client_add_publication(
    exon_client_t *c,
    const char *channel,
    int32_t stream_id,
    int32_t exclusive,
    int64_t timeout_ns,
    exon_client_publication_t *out)
{
    int n = exon_client_check_channel(channel);
    if (n < 0)
    {
        return n;
    }
    uint8_t buf[sizeof(exon_publication_command_t) + EXON_MAX_CHANNEL_LENGTH + 1];
    exon_publication_command_t *cmd = (exon_publication_command_t *)buf;
    int64_t correlation_id = exon_ring_next_correlation_id(&c->ring);
    cmd->correlated.client_id = c->client_id;
    cmd->correlated.correlation_id = correlation_id;
    cmd->stream_id = stream_id;
    cmd->channel_length = n;
    memcpy(buf + sizeof(*cmd), channel, (size_t)n);

    exon_client_pending_t *p = malloc(sizeof(*p));
    if (NULL == p)
    {
        return exon_set_error(-ENOMEM, "out of memory");
    }
    char what[128];
    snprintf(what, sizeof(what), "add_publication(%.60s, %d)", channel, stream_id);
    int rc = exon_client_request(c, p,
        exclusive ? EXON_CMD_ADD_EXCLUSIVE_PUBLICATION : EXON_CMD_ADD_PUBLICATION,
        buf, (int32_t)sizeof(*cmd) + n, correlation_id, timeout_ns, what);
    if (rc == EXON_RSP_ON_PUBLICATION_READY || rc == EXON_RSP_ON_EXCLUSIVE_PUBLICATION_READY)
    {
        const exon_publication_ready_t *r = (const exon_publication_ready_t *)p->payload;
        int32_t log_length = r->log_file_length;
        if (p->payload_length < (int32_t)sizeof(*r) || log_length <= 0 || log_length >= EXON_MAX_PATH_LENGTH ||
            (int32_t)sizeof(*r) + log_length > p->payload_length)
        {
            rc = exon_set_error(EXON_E_DRIVER_ERROR, "%s: malformed publication-ready answer", what);
        }
        else
        {
            memset(out, 0, sizeof(*out));
            out->registration_id = correlation_id;
            out->original_registration_id = r->registration_id;
            out->session_id = r->session_id;
            out->stream_id = r->stream_id;
            out->position_limit_counter_id = r->position_limit_counter_id;
            out->position_counter_id = r->channel_status_counter_id;
            memcpy(out->log_file, p->payload + sizeof(*r), (size_t)log_length);
            rc = 0;
        }
    }
    else if (rc >= 0)
    {
        rc = exon_set_error(EXON_E_DRIVER_ERROR, "%s: unexpected answer type 0x%x", what, rc);
    }
    free(p);
    return rc;
}

static int exon_client_remove(exon_client_t *c, int32_t type, int64_t registration_id, int64_t timeout_ns, const char *what)
{
    exon_remove_command_t cmd;
    int64_t correlation_id = exon_ring_next_correlation_id(&c->ring);
    cmd.correlated.client_id = c->client_id;
    cmd.correlated.correlation_id = correlation_id;
    cmd.registration_id = registration_id;
    return exon_client_request_ack(c, type, &cmd, (int32_t)sizeof(cmd), correlation_id, timeout_ns, what);
}

int exon_client_remove_publication(exon_client_t *c, int64_t registration_id, int64_t timeout_ns)
{
    return exon_client_remove(c, EXON_CMD_REMOVE_PUBLICATION, registration_id, timeout_ns, "remove_publication");
}

int exon_client_add_subscription(
    exon_client_t *c,
    const char *channel,
    int32_t stream_id,
    int32_t doorbell_counter_id,
    int64_t timeout_ns,
    exon_client_subscription_t *out)
{
    int n = exon_client_check_channel(channel);
    if (n < 0)
    {
        return n;
    }
    uint8_t buf[sizeof(exon_subscription_command_t) + EXON_MAX_CHANNEL_LENGTH + 1];
    exon_subscription_command_t *cmd = (exon_subscription_command_t *)buf;
    int64_t correlation_id = exon_ring_next_correlation_id(&c->ring);
    cmd->correlated.client_id = c->client_id;
    cmd->correlated.correlation_id = correlation_id;
    cmd->stream_id = stream_id;
    cmd->doorbell_counter_id = doorbell_counter_id;
    cmd->channel_length = n;
    memcpy(buf + sizeof(*cmd), channel, (size_t)n);

    exon_client_sub_t *s = calloc(1, sizeof(*s));
    exon_client_pending_t *p = malloc(sizeof(*p));
    if (NULL == s || NULL == p)
    {
        free(s);
        free(p);
        return exon_set_error(-ENOMEM, "out of memory");
    }
    s->registration_id = correlation_id;
    pthread_mutex_lock(&c->lock);
    s->next = c->subs;
    c->subs = s;
    pthread_mutex_unlock(&c->lock);

    char what[128];
    snprintf(what, sizeof(what), "add_subscription(%.60s, %d)", channel, stream_id);
    int rc = exon_client_request(c, p, EXON_CMD_ADD_SUBSCRIPTION, buf, (int32_t)sizeof(*cmd) + n,
        correlation_id, timeout_ns, what);
    if (rc == EXON_RSP_ON_SUBSCRIPTION_READY && p->payload_length >= (int32_t)sizeof(exon_subscription_ready_t))
    {
        const exon_subscription_ready_t *r = (const exon_subscription_ready_t *)p->payload;
        memset(out, 0, sizeof(*out));
        out->registration_id = correlation_id;
        out->doorbell_counter_id = r->doorbell_counter_id;
        out->stream_id = stream_id;
        out->event_count = &s->event_count;
        int32_t bound_length = r->bound_endpoint_length;
        if (bound_length > 0 && bound_length < (int32_t)sizeof(out->bound_endpoint) &&
            p->payload_length >= (int32_t)sizeof(*r) + bound_length)
        {
            memcpy(out->bound_endpoint, p->payload + sizeof(*r), (size_t)bound_length);
            out->bound_endpoint[bound_length] = '\0';
        }
        rc = 0;
    }
    else
    {
        if (rc >= 0)
        {
            rc = exon_set_error(EXON_E_DRIVER_ERROR, "%s: unexpected answer type 0x%x", what, rc);
        }
        char saved[1024];
        snprintf(saved, sizeof(saved), "%s", exon_last_error());
        pthread_mutex_lock(&c->lock);
        for (exon_client_sub_t **ss = &c->subs; NULL != *ss; ss = &(*ss)->next)
        {
            if (*ss == s)
            {
                *ss = s->next;
                break;
            }
        }
        pthread_mutex_unlock(&c->lock);
        free(s->events);
        free(s);
        exon_set_error(rc, "%s", saved);
    }
    free(p);
    return rc;
}

int exon_client_remove_subscription(exon_client_t *c, int64_t registration_id, int64_t timeout_ns)
{
    int rc = exon_client_remove(c, EXON_CMD_REMOVE_SUBSCRIPTION, registration_id, timeout_ns, "remove_subscription");
    /* the queue stays allocated until close (Python may still hold event_count) but is emptied */
    pthread_mutex_lock(&c->lock);
    exon_client_sub_t *s = exon_client_find_sub_locked(c, registration_id);
    if (NULL != s)
    {
        s->length = 0;
        s->head = 0;
        s->registration_id = INT64_MIN;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int exon_client_add_counter(
    exon_client_t *c,
    int32_t type_id,
    const uint8_t *key,
    int32_t key_length,
    const char *label,
    int32_t label_length,
    int64_t timeout_ns,
    exon_client_counter_t *out)
{
    uint8_t buf[EXON_COUNTER_COMMAND_MAX_LENGTH];
    int64_t correlation_id = exon_ring_next_correlation_id(&c->ring);
    int32_t length = exon_counter_command_encode(buf, (int32_t)sizeof(buf), c->client_id, correlation_id, type_id,
        key, key_length, label, label_length);
    if (length < 0)
    {
        return length;
    }
    exon_client_pending_t *p = malloc(sizeof(*p));
    if (NULL == p)
    {
        return exon_set_error(-ENOMEM, "out of memory");
    }
    char what[128];
    snprintf(what, sizeof(what), "add_counter(type %d, %.*s)", type_id, label_length > 60 ? 60 : label_length,
        NULL == label ? "" : label);
    int rc = exon_client_request(c, p, EXON_CMD_ADD_COUNTER, buf, length, correlation_id, timeout_ns, what);
    if (rc == EXON_RSP_ON_COUNTER_READY && p->payload_length >= (int32_t)sizeof(exon_counter_update_t))
    {
        const exon_counter_update_t *r = (const exon_counter_update_t *)p->payload;
        out->registration_id = correlation_id;
        out->counter_id = r->counter_id;
        rc = 0;
    }
    else if (rc >= 0)
    {
        rc = exon_set_error(EXON_E_DRIVER_ERROR, "%s: unexpected answer type 0x%x", what, rc);
    }
    free(p);
    return rc;
}

int exon_client_remove_counter(exon_client_t *c, int64_t registration_id, int64_t timeout_ns)
{
    return exon_client_remove(c, EXON_CMD_REMOVE_COUNTER, registration_id, timeout_ns, "remove_counter");
}

int exon_client_poll_image_event(exon_client_t *c, int64_t subscription_registration_id, exon_image_event_t *out)
{
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    exon_client_sub_t *s = exon_client_find_sub_locked(c, subscription_registration_id);
    if (NULL == s)
    {
        rc = exon_set_error(EXON_E_ARGUMENT, "unknown subscription %lld", (long long)subscription_registration_id);
    }
    else if (s->length > 0)
    {
        *out = s->events[s->head];
        s->head = (s->head + 1) % s->capacity;
        s->length--;
        rc = 1;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int exon_client_terminate_driver(exon_client_t *c, int64_t timeout_ns)
{
    exon_correlated_command_t cmd;
    int64_t correlation_id = exon_ring_next_correlation_id(&c->ring);
    cmd.client_id = c->client_id;
    cmd.correlation_id = correlation_id;
    return exon_client_request_ack(c, EXON_CMD_TERMINATE_DRIVER, &cmd, (int32_t)sizeof(cmd), correlation_id,
        timeout_ns, "terminate_driver");
}

static void exon_client_agent_ring(void *ctx, int32_t doorbell_id)
{
    exon_client_t *c = (exon_client_t *)ctx;
    if (doorbell_id == EXON_DOORBELL_SENDER)
    {
        int32_t index = c->cnc.header->agent_thread_index[EXON_AGENT_SENDER];
        if (index >= 0 && index < EXON_AGENT_COUNT)
        {
            exon_agent_doorbell_ring(c->instance_id, index, &c->cnc.header->agent_state[index].sleeping);
        }
    }
}

void exon_client_attach_publication(exon_client_t *client, exon_publication_t *pub)
{
    pub->agent_ring = exon_client_agent_ring;
    pub->agent_ring_ctx = client;
}
