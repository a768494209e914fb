/* exon_driver.c: driver launch/close, directory handling and threading modes. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "common/exon_common.h"
#include "driver/exon_driver.h"
#include "driver/exon_publication_image.h"

void exon_driver_context_defaults(exon_driver_context_t *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
    snprintf(ctx->dir, sizeof(ctx->dir), "/dev/shm/exon-default");
    ctx->threading_mode = EXON_THREADING_DEDICATED;
    ctx->idle_strategy = EXON_IDLE_BACKOFF;
    ctx->idle_max_spins = 10;
    ctx->idle_max_yields = 20;
    ctx->idle_min_park_ns = 1000;
    ctx->idle_max_park_ns = 1000000;
    ctx->ipc_term_buffer_length = 64 * 1024 * 1024;
    ctx->ipc_mtu_length = 1408;
    ctx->term_buffer_length = 16 * 1024 * 1024;
    ctx->mtu_length = 1408;
    ctx->file_page_size = 4096;
    ctx->term_buffer_sparse_file = 0;
    ctx->ipc_publication_term_window_length = 0;
    ctx->to_driver_buffer_length = 1024 * 1024;
    ctx->to_clients_buffer_length = 1024 * 1024;
    ctx->counters_values_buffer_length = 1024 * 1024;
    ctx->error_buffer_length = 1024 * 1024;
    ctx->client_liveness_timeout_ns = 10LL * 1000000000LL;
    ctx->publication_linger_timeout_ns = 5LL * 1000000000LL;
    ctx->publication_unblock_timeout_ns = 15LL * 1000000000LL;
    ctx->timer_interval_ns = 1000000000LL;
    ctx->driver_timeout_ms = 10000;
    ctx->publication_connection_timeout_ns = 5LL * 1000000000LL;
    ctx->image_liveness_timeout_ns = 10LL * 1000000000LL;
    ctx->status_message_timeout_ns = 200LL * 1000000LL;
    ctx->publication_term_window_length = 0;
    ctx->initial_window_length = EXON_INITIAL_WINDOW_DEFAULT; /* exon: 512 KiB, see settings.py */
    ctx->socket_rcvbuf_length = 2 * 1024 * 1024;
    ctx->socket_sndbuf_length = 0;
    ctx->receive_loss_rate = 0.0;
    ctx->receive_loss_seed = 0;
    ctx->send_loss_rate = 0.0;
    ctx->send_loss_seed = 0;
    ctx->nak_delay_ns = 10000;
    ctx->nak_retry_delay_ns = 1000000;
    ctx->retransmit_delay_ns = 0;
    ctx->retransmit_linger_ns = 10000000;
    ctx->max_resend = 16;
    ctx->max_image_term_length = 64 * 1024 * 1024;
    ctx->heartbeat_interval_ns = 100000000;
    ctx->setup_interval_ns = 100000000;
    ctx->max_images_per_endpoint = EXON_ENDPOINT_DEFAULT_IMAGES;
    ctx->max_unverified_images_per_source = EXON_ENDPOINT_DEFAULT_UNVERIFIED_PER_SOURCE;
    ctx->image_idle_eviction_timeout_ns = EXON_ENDPOINT_DEFAULT_IDLE_EVICTION_NS;
    ctx->nak_retry_max_delay_ns = 250LL * 1000 * 1000;
    ctx->nak_rate_window_ns = 10LL * 1000 * 1000;
    ctx->nak_rate_max_per_window = 200;
    ctx->udp_gso = 1;
    ctx->udp_gro = 1;
}

static int exon_driver_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) < 0 && errno != ENOENT)
    {
        return -1;
    }
    return 0;
}

int exon_driver_delete_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) < 0)
    {
        return errno == ENOENT ? 0 : exon_set_error(-errno, "cannot stat %s: %s", dir, strerror(errno));
    }
    if (nftw(dir, exon_driver_rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
    {
        return exon_set_error(-errno, "cannot delete %s: %s", dir, strerror(errno));
    }
    return 0;
}

static int exon_driver_prepare_dir(const exon_driver_context_t *ctx)
{
    struct stat st;
    if (stat(ctx->dir, &st) == 0)
    {
        if (!S_ISDIR(st.st_mode))
        {
            return exon_set_error(EXON_E_ARGUMENT, "driver dir %s exists and is not a directory", ctx->dir);
        }
        if (exon_cnc_is_active(ctx->dir, exon_epoch_ms(), ctx->driver_timeout_ms) == 1)
        {
            return exon_set_error(EXON_E_STATE, "driver already active in %s", ctx->dir);
        }
        /* stale (or asked to start clean): remove the old driver's files */
        int rc = exon_driver_delete_dir(ctx->dir);
        if (rc < 0)
        {
            return rc;
        }
    }
    return 0;
}

/*
 * Per threading mode (EXON_THREADING_*): the runner (thread index) of each agent
 * (EXON_AGENT_*), and the runners' names in thread-index order (NULL: no such runner).
 */
static const int32_t exon_driver_agent_runner[EXON_THREADING_SHARED + 1][EXON_AGENT_COUNT] = {
    [EXON_THREADING_DEDICATED] = { 0, 1, 2 },
    [EXON_THREADING_SHARED_NETWORK] = { 0, 1, 1 },
    [EXON_THREADING_SHARED] = { 0, 0, 0 },
};
static const char *const exon_driver_runner_names[EXON_THREADING_SHARED + 1][EXON_AGENT_COUNT] = {
    [EXON_THREADING_DEDICATED] = { "conductor", "sender", "receiver" },
    [EXON_THREADING_SHARED_NETWORK] = { "conductor", "network", NULL },
    [EXON_THREADING_SHARED] = { "shared", NULL, NULL },
};

static int exon_driver_add_runner(
    exon_driver_t *d, const char *name, int thread_index, const exon_idle_strategy_t *idle)
{
    exon_agent_runner_t *runner = &d->runners[d->runner_count];
    int rc = exon_agent_runner_init(
        runner, name, idle, d->instance_id, thread_index, &d->cnc.header->agent_state[thread_index].sleeping);
    if (rc < 0)
    {
        return rc;
    }
    d->runner_count++;
    return 0;
}

/* The agents' states: the sender and the receiver, then the conductor, which holds a
 * reference to each. 0, or a negative code with nothing left to close. */
static int exon_driver_init_agents(exon_driver_t *d, const exon_driver_context_t *ctx)
{
    /* each init leaves its struct safe to close, even when it fails */
    int rc = exon_sender_init(&d->sender, &d->conductor, ctx, &d->invokers_in, &d->invokers_parked);
    if (rc >= 0 && (rc = exon_receiver_init(&d->receiver, &d->conductor, &d->invokers_in)) < 0)
    {
        exon_receiver_close(&d->receiver);
    }
    if (rc >= 0 && (rc = exon_driver_conductor_init(&d->conductor, &d->cnc, ctx, &d->sender, &d->receiver)) < 0)
    {
        exon_receiver_close(&d->receiver);
    }
    if (rc < 0)
    {
        exon_sender_close(&d->sender);
    }
    return rc;
}

int exon_driver_launch(exon_driver_t **driver_out, const exon_driver_context_t *ctx)
{
    *driver_out = NULL;
    if (ctx->threading_mode < EXON_THREADING_DEDICATED || ctx->threading_mode > EXON_THREADING_SHARED)
    {
        return exon_set_error(EXON_E_ARGUMENT, "unknown threading mode %d", ctx->threading_mode);
    }
    if (ctx->dir[0] == '\0')
    {
        return exon_set_error(EXON_E_ARGUMENT, "driver dir is empty");
    }
    size_t dir_length = strnlen(ctx->dir, sizeof(ctx->dir));
    if (dir_length >= EXON_DRIVER_DIR_MAX_LENGTH)
    {
        return exon_set_error(EXON_E_ARGUMENT,
            "driver dir %.64s... is %zu bytes long: it must be shorter than %d (room for the file names under it)",
            ctx->dir, dir_length, EXON_DRIVER_DIR_MAX_LENGTH);
    }
    exon_driver_t *d = calloc(1, sizeof(*d));
    if (NULL == d)
    {
        return exon_set_error(-ENOMEM, "out of memory");
    }
    d->context = *ctx;
    d->invoker_epoll_fd = -1;
    d->invoker_wake_fd = -1;
    if (ctx->invoker && ctx->threading_mode != EXON_THREADING_SHARED)
    {
        free(d);
        return exon_set_error(EXON_E_ARGUMENT, "the INVOKER mode runs its agents SHARED (threading mode %d)",
            ctx->threading_mode);
    }
    uint64_t instance = 0;
    if (getrandom(&instance, sizeof(instance), GRND_NONBLOCK) != (ssize_t)sizeof(instance))
    {
        instance = (uint64_t)exon_nano_clock() ^ ((uint64_t)getpid() << 32);
    }
    d->instance_id = (int64_t)(instance & 0x7FFFFFFFFFFFFFFFULL);

    int rc = exon_driver_prepare_dir(ctx);
    if (rc < 0)
    {
        free(d);
        return rc;
    }

    exon_cnc_config_t config;
    exon_cnc_config_defaults(&config);
    config.to_driver_capacity = ctx->to_driver_buffer_length;
    config.to_clients_capacity = ctx->to_clients_buffer_length;
    config.counters_values_length = ctx->counters_values_buffer_length;
    config.error_log_length = ctx->error_buffer_length;
    config.client_liveness_timeout_ns = ctx->client_liveness_timeout_ns;
    config.driver_timeout_ms = ctx->driver_timeout_ms;
    config.driver_instance_id = d->instance_id;
    config.threading_mode = ctx->threading_mode;
    config.file_page_size = ctx->file_page_size;
    config.dir_mode = ctx->dir_mode;
    const int32_t *agent_runner = exon_driver_agent_runner[ctx->threading_mode];
    for (int32_t i = 0; i < EXON_AGENT_COUNT; i++)
    {
        config.agent_thread_index[i] = agent_runner[i];
    }
    rc = exon_cnc_create(&d->cnc, ctx->dir, &config);
    if (rc < 0)
    {
        free(d);
        return rc;
    }
    exon_counters_t counters;
    if ((rc = exon_cnc_counters(&d->cnc, &counters, 1000)) < 0 ||
        (rc = exon_counters_allocate_system(&counters, exon_epoch_ms())) < 0)
    {
        exon_cnc_close(&d->cnc);
        free(d);
        return rc;
    }

    if ((rc = exon_driver_init_agents(d, ctx)) < 0)
    {
        exon_cnc_close(&d->cnc);
        free(d);
        return rc;
    }

    exon_idle_strategy_t idle;
    exon_idle_strategy_init(&idle, ctx->idle_strategy, ctx->idle_max_spins, ctx->idle_max_yields,
        ctx->idle_min_park_ns, ctx->idle_max_park_ns);
    exon_agent_t conductor_agent = {
        .name = "conductor", .do_work = exon_driver_conductor_do_work, .on_close = NULL, .state = &d->conductor };
    exon_agent_t sender_agent = {
        .name = "sender", .do_work = exon_sender_do_work, .on_close = NULL, .state = &d->sender };
    exon_agent_t receiver_agent = {
        .name = "receiver", .do_work = exon_receiver_do_work, .on_close = NULL, .state = &d->receiver };

    const char *const *runner_names = exon_driver_runner_names[ctx->threading_mode];
    for (int32_t i = 0; rc >= 0 && i < EXON_AGENT_COUNT && NULL != runner_names[i]; i++)
    {
        rc = exon_driver_add_runner(d, runner_names[i], i, &idle);
    }
    if (rc >= 0)
    {
        exon_agent_runner_add(&d->runners[agent_runner[EXON_AGENT_CONDUCTOR]], &conductor_agent);
        exon_agent_runner_add(&d->runners[agent_runner[EXON_AGENT_SENDER]], &sender_agent);
        exon_agent_runner_add(&d->runners[agent_runner[EXON_AGENT_RECEIVER]], &receiver_agent);
        /* the sender's and receiver's runners: their sockets end the runner's parks */
        d->sender.epoll_fd = d->runners[agent_runner[EXON_AGENT_SENDER]].epoll_fd;
        d->receiver.epoll_fd = d->runners[agent_runner[EXON_AGENT_RECEIVER]].epoll_fd;
        if (ctx->invoker)
        {
            /* the receive sockets wake the client thread that waits (exon_invoker_wait), not
             * the agent: one wake-up per datagram */
            d->invoker_epoll_fd = epoll_create1(EPOLL_CLOEXEC);
            d->invoker_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
            struct epoll_event wake = { .events = EPOLLIN, .data = { .fd = d->invoker_wake_fd } };
            if (d->invoker_epoll_fd < 0 || d->invoker_wake_fd < 0 ||
                epoll_ctl(d->invoker_epoll_fd, EPOLL_CTL_ADD, d->invoker_wake_fd, &wake) < 0)
            {
                rc = exon_set_error(-errno, "cannot create the invoker's epoll set: %s", strerror(errno));
            }
            else
            {
                d->receiver.epoll_fd = d->invoker_epoll_fd;
            }
        }
        /* a command for the sender ends the sender runner's park, one for the receiver the
         * receiver's (INVOKER: a waiting client thread's), an event from the receiver (a
         * SETUP, a release) the conductor's */
        struct epoll_event ev = { .events = EPOLLIN, .data = { .fd = d->sender.commands.wake_fd } };
        epoll_ctl(d->sender.epoll_fd, EPOLL_CTL_ADD, d->sender.commands.wake_fd, &ev);
        ev.data.fd = d->receiver.commands.wake_fd;
        epoll_ctl(d->receiver.epoll_fd, EPOLL_CTL_ADD, d->receiver.commands.wake_fd, &ev);
        ev.data.fd = d->receiver.events.wake_fd;
        epoll_ctl(d->runners[agent_runner[EXON_AGENT_CONDUCTOR]].epoll_fd, EPOLL_CTL_ADD,
            d->receiver.events.wake_fd, &ev);
    }
    for (int32_t i = 0; rc >= 0 && i < d->runner_count; i++)
    {
        rc = exon_agent_runner_start(&d->runners[i]);
    }
    if (rc < 0)
    {
        char saved[1024];
        snprintf(saved, sizeof(saved), "%s", exon_last_error());
        exon_driver_close(d);
        return exon_set_error(rc, "%s", saved);
    }
    *driver_out = d;
    return 0;
}

int exon_driver_close(exon_driver_t *d)
{
    if (NULL == d)
    {
        return 0;
    }
    for (int32_t i = 0; i < d->runner_count; i++)
    {
        exon_agent_runner_close(&d->runners[i]);
    }
    /* the runners' epoll sets are closed: the conductor must not touch them any more */
    d->sender.epoll_fd = -1;
    d->receiver.epoll_fd = -1;
    exon_driver_conductor_close(&d->conductor); /* drains the receiver's events first */
    exon_receiver_close(&d->receiver);
    exon_sender_close(&d->sender);
    if (d->invoker_epoll_fd >= 0)
    {
        close(d->invoker_epoll_fd);
    }
    if (d->invoker_wake_fd >= 0)
    {
        close(d->invoker_wake_fd);
    }
    exon_cnc_set_driver_heartbeat_ms(&d->cnc, 0);
    exon_cnc_close(&d->cnc);
    int rc = 0;
    if (d->context.dir_delete_on_shutdown)
    {
        rc = exon_driver_delete_dir(d->context.dir);
    }
    free(d);
    return rc;
}

int exon_driver_terminate_requested(exon_driver_t *d)
{
    return EXON_LOAD_ACQ(&d->conductor.terminate_requested) ? 1 : 0;
}

const char *exon_driver_dir(exon_driver_t *d)
{
    return d->context.dir;
}

int32_t exon_driver_runner_count(exon_driver_t *d)
{
    return d->runner_count;
}
