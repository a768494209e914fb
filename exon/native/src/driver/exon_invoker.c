/* exon_invoker.c: the INVOKER threading mode (see exon_invoker.h). */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "common/exon_common.h"
#include "concurrent/exon_doorbell.h"
#include "concurrent/exon_spin_policy.h"
#include "driver/exon_invoker.h"
#include "link/exon_link_table.h"

int exon_driver_invoker_enabled(exon_driver_t *d)
{
    return NULL != d && d->context.invoker && d->invoker_epoll_fd >= 0 ? 1 : 0;
}

int exon_driver_invoke(exon_driver_t *d)
{
    if (!exon_driver_invoker_enabled(d))
    {
        return 0;
    }
    int64_t now_ns = exon_nano_clock();
    int work = 0;
    if (pthread_mutex_trylock(&d->sender.lock) == 0) /* else the agent is sending right now */
    {
        work += exon_sender_duty_cycle(&d->sender, now_ns);
        pthread_mutex_unlock(&d->sender.lock);
    }
    work += exon_receiver_try_duty_cycle(&d->receiver, now_ns);
    return work;
}

static bool invoker_any_available(exon_image_t **images, int32_t count)
{
    for (int32_t i = 0; i < count; i++)
    {
        if (images[i] != NULL && !images[i]->closed && exon_image_available(images[i]) > 0)
        {
            return true;
        }
    }
    return false;
}

static void invoker_add_waiters(exon_image_t **images, int32_t count, int32_t delta)
{
    for (int32_t i = 0; i < count; i++)
    {
        if (images[i] != NULL && !images[i]->closed)
        {
            EXON_FETCH_ADD(&images[i]->meta->exon_waiters, delta);
        }
    }
}

static void invoker_drain_wake(exon_driver_t *d)
{
    uint64_t value;
    while (read(d->invoker_wake_fd, &value, sizeof(value)) == (ssize_t)sizeof(value))
    {
    }
}

static int exon_invoker_wait_in(exon_driver_t *d, exon_image_t **images, int32_t count, int32_t *doorbell,
    int64_t spin_ns, int64_t timeout_ns);

int exon_invoker_wait(exon_driver_t *d, exon_image_t **images, int32_t count, int32_t *doorbell,
    int64_t spin_ns, int64_t timeout_ns)
{
    if (!exon_driver_invoker_enabled(d))
    {
        return exon_lt_wait(images, count, doorbell, spin_ns, timeout_ns);
    }
    EXON_FETCH_ADD(&d->invokers_in, 1);
    int rc = exon_invoker_wait_in(d, images, count, doorbell, spin_ns, timeout_ns);
    EXON_FETCH_ADD(&d->invokers_in, -1);
    return rc;
}

static int exon_invoker_wait_in(exon_driver_t *d, exon_image_t **images, int32_t count, int32_t *doorbell,
    int64_t spin_ns, int64_t timeout_ns)
{
    int64_t start = exon_nano_clock();
    int64_t deadline = timeout_ns >= 0 ? start + timeout_ns : INT64_MAX;
    int32_t bell = exon_doorbell_read(doorbell);
    exon_driver_invoke(d); /* what this thread just offered leaves now, what came is read */
    if (invoker_any_available(images, count))
    {
        return 1;
    }
    exon_spin_policy_t *policy = exon_spin_policy_of_thread();
    int64_t budget = exon_spin_policy_budget(policy, spin_ns);
    if (budget > 0)
    {
        int64_t end = start + budget < deadline ? start + budget : deadline;
        while (exon_nano_clock() < end)
        {
            exon_driver_invoke(d);
            if (invoker_any_available(images, count))
            {
                exon_spin_policy_outcome(policy, true);
                return 1;
            }
            if (exon_doorbell_read(doorbell) != bell)
            {
                exon_spin_policy_outcome(policy, true);
                return 0;
            }
            for (int p = 0; p < 16; p++)
            {
                EXON_CPU_PAUSE();
            }
        }
        exon_spin_policy_outcome(policy, false);
    }
    for (;;)
    {
        int64_t now = exon_nano_clock();
        if (now >= deadline)
        {
            return invoker_any_available(images, count) ? 1 : EXON_E_TIMEOUT;
        }
        int64_t slice = deadline - now < EXON_INVOKER_PARK_SLICE_NS ? deadline - now : EXON_INVOKER_PARK_SLICE_NS;
        exon_doorbell_arm(doorbell);
        invoker_add_waiters(images, count, 1);
        EXON_FENCE_SEQ();
        bool ready = invoker_any_available(images, count) || exon_doorbell_read(doorbell) != bell;
        if (!ready)
        {
            struct pollfd pfd = { .fd = d->invoker_epoll_fd, .events = POLLIN, .revents = 0 };
            struct timespec ts = { .tv_sec = (time_t)(slice / 1000000000LL), .tv_nsec = (long)(slice % 1000000000LL) };
            EXON_FETCH_ADD(&d->invokers_parked, 1);
            ppoll(&pfd, 1, &ts, NULL);
            EXON_FETCH_ADD(&d->invokers_parked, -1);
        }
        invoker_add_waiters(images, count, -1);
        invoker_drain_wake(d);
        exon_driver_invoke(d);
        if (invoker_any_available(images, count))
        {
            return 1;
        }
        if (exon_doorbell_read(doorbell) != bell)
        {
            return 0;
        }
    }
}

int exon_invoker_bridge(exon_driver_t *d, int32_t *doorbell)
{
    if (!exon_driver_invoker_enabled(d))
    {
        return exon_set_error(EXON_E_STATE, "the driver is not in INVOKER mode");
    }
    return exon_doorbell_bridge_add(doorbell, d->invoker_wake_fd);
}

int exon_invoker_unbridge(exon_driver_t *d, int32_t *doorbell)
{
    if (!exon_driver_invoker_enabled(d))
    {
        return 0;
    }
    return exon_doorbell_bridge_remove(doorbell, d->invoker_wake_fd);
}
