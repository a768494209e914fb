/* exon_agent.c: idle strategies, agent runner threads and agent doorbells. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <fcntl.h>

#include "common/exon_common.h"
#include "concurrent/exon_agent.h"

int exon_idle_strategy_type(const char *name)
{
    if (NULL == name)
    {
        return exon_set_error(EXON_E_ARGUMENT, "idle strategy name is NULL");
    }
    if (0 == strcmp(name, "spin"))
    {
        return EXON_IDLE_SPIN;
    }
    if (0 == strcmp(name, "yield"))
    {
        return EXON_IDLE_YIELD;
    }
    if (0 == strcmp(name, "backoff"))
    {
        return EXON_IDLE_BACKOFF;
    }
    if (0 == strcmp(name, "sleep"))
    {
        return EXON_IDLE_SLEEP;
    }
    if (0 == strcmp(name, "noop"))
    {
        return EXON_IDLE_NOOP;
    }
    return exon_set_error(
        EXON_E_ARGUMENT, "unknown idle strategy '%s' (spin, yield, backoff, sleep, noop)", name);
}

void exon_idle_strategy_init(
    exon_idle_strategy_t *idle,
    int type,
    int64_t max_spins,
    int64_t max_yields,
    int64_t min_park_ns,
    int64_t max_park_ns)
{
    memset(idle, 0, sizeof(*idle));
    idle->type = type;
    idle->max_spins = max_spins < 0 ? 0 : max_spins;
    idle->max_yields = max_yields < 0 ? 0 : max_yields;
    idle->min_park_ns = min_park_ns < 1 ? 1 : min_park_ns;
    idle->max_park_ns = max_park_ns < idle->min_park_ns ? idle->min_park_ns : max_park_ns;
    idle->doorbell_fd = -1;
    idle->extra_fd = -1;
    idle->sleeping_flag = NULL;
    exon_idle_strategy_reset(idle);
}

void exon_idle_strategy_reset(exon_idle_strategy_t *idle)
{
    idle->spins = 0;
    idle->yields = 0;
    idle->park_ns = idle->min_park_ns;
}

static void exon_idle_drain_doorbell(int fd)
{
    char buf[16];
    for (int i = 0; i < 64; i++)
    {
        if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
        {
            break;
        }
    }
}

static void exon_idle_park(exon_idle_strategy_t *idle, int64_t park_ns)
{
    idle->parks++;
    if (NULL != idle->sleeping_flag)
    {
        EXON_STORE_REL(idle->sleeping_flag, 1);
        EXON_FENCE_SEQ();
    }
    struct timespec ts = { .tv_sec = park_ns / 1000000000LL, .tv_nsec = park_ns % 1000000000LL };
    if (idle->doorbell_fd >= 0)
    {
        struct pollfd pfd[2] = {
            { .fd = idle->doorbell_fd, .events = POLLIN, .revents = 0 },
            { .fd = idle->extra_fd, .events = POLLIN, .revents = 0 },
        };
        int rc = ppoll(pfd, idle->extra_fd >= 0 ? 2 : 1, &ts, NULL);
        if (rc > 0 && (pfd[0].revents & POLLIN))
        {
            idle->wakeups_by_doorbell++;
            exon_idle_drain_doorbell(idle->doorbell_fd);
        }
    }
    else
    {
        nanosleep(&ts, NULL);
    }
    if (NULL != idle->sleeping_flag)
    {
        EXON_STORE_REL(idle->sleeping_flag, 0);
    }
}

void exon_idle_strategy_idle(exon_idle_strategy_t *idle, int work_count)
{
    if (work_count > 0)
    {
        exon_idle_strategy_reset(idle);
        return;
    }
    switch (idle->type)
    {
        case EXON_IDLE_SPIN:
            EXON_CPU_PAUSE();
            break;
        case EXON_IDLE_YIELD:
            sched_yield();
            break;
        case EXON_IDLE_SLEEP:
            exon_idle_park(idle, idle->max_park_ns);
            break;
        case EXON_IDLE_NOOP:
            break;
        case EXON_IDLE_BACKOFF:
        default:
            if (idle->spins < idle->max_spins)
            {
                idle->spins++;
                EXON_CPU_PAUSE();
            }
            else if (idle->yields < idle->max_yields)
            {
                idle->yields++;
                sched_yield();
            }
            else
            {
                exon_idle_park(idle, idle->park_ns);
                idle->park_ns *= 2;
                if (idle->park_ns > idle->max_park_ns)
                {
                    idle->park_ns = idle->max_park_ns;
                }
            }
            break;
    }
}

bool exon_idle_strategy_would_park(const exon_idle_strategy_t *idle)
{
    switch (idle->type)
    {
        case EXON_IDLE_SLEEP:
            return true;
        case EXON_IDLE_BACKOFF:
            return idle->spins >= idle->max_spins && idle->yields >= idle->max_yields;
        default:
            return false;
    }
}

int exon_idle_strategy_cycle(exon_idle_strategy_t *idle, exon_agent_do_work_fn duty, void *state,
    int64_t now_ns)
{
    int work = duty(state, now_ns);
    if (work <= 0 && NULL != idle->sleeping_flag && exon_idle_strategy_would_park(idle))
    {
        /* Dekker with the ringers (exon_agent_doorbell_ring: commit, fence, load the flag):
         * a commit made after the first look whose writer still saw the flag down did not
         * ring, so look once more with the flag up; one made after this look rings */
        EXON_STORE_REL(idle->sleeping_flag, 1);
        EXON_FENCE_SEQ();
        work = duty(state, now_ns);
        if (work > 0)
        {
            EXON_STORE_REL(idle->sleeping_flag, 0);
        }
    }
    exon_idle_strategy_idle(idle, work);
    return work;
}

int exon_agent_doorbell_name(char *buf, size_t length, int64_t instance_id, int thread_index)
{
    int n = snprintf(buf, length, "exon-%016llx-%d", (unsigned long long)instance_id, thread_index);
    if (n < 0 || (size_t)n >= length)
    {
        return exon_set_error(EXON_E_ARGUMENT, "agent doorbell name too long");
    }
    return n;
}

static socklen_t exon_agent_doorbell_address(struct sockaddr_un *addr, const char *name)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    size_t len = strlen(name);
    if (len > sizeof(addr->sun_path) - 2)
    {
        len = sizeof(addr->sun_path) - 2;
    }
    /* abstract namespace: sun_path[0] = '\0' */
    memcpy(addr->sun_path + 1, name, len);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

static int exon_agent_send_fd = -1;

int exon_agent_doorbell_ring(int64_t instance_id, int thread_index, int32_t *sleeping_flag)
{
    if (NULL != sleeping_flag)
    {
        EXON_FENCE_SEQ();
        /* the first ringer of a parked runner clears its flag: the commits made while it
         * wakes do not each send a datagram (a sendto costs microseconds) */
        if (0 == EXON_LOAD_ACQ(sleeping_flag) || 0 == __atomic_exchange_n(sleeping_flag, 0, __ATOMIC_ACQ_REL))
        {
            return 0;
        }
    }
    int fd = EXON_LOAD_ACQ(&exon_agent_send_fd);
    if (fd < 0)
    {
        int new_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (new_fd < 0)
        {
            return 0;
        }
        int expected = -1;
        if (!EXON_CAS(&exon_agent_send_fd, &expected, new_fd))
        {
            close(new_fd);
            fd = expected;
        }
        else
        {
            fd = new_fd;
        }
    }
    char name[64];
    if (exon_agent_doorbell_name(name, sizeof(name), instance_id, thread_index) < 0)
    {
        return 0;
    }
    struct sockaddr_un addr;
    socklen_t addr_len = exon_agent_doorbell_address(&addr, name);
    char byte = 1;
    ssize_t rc = sendto(fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
    return rc == 1 ? 1 : 0;
}

int exon_agent_runner_init(
    exon_agent_runner_t *runner,
    const char *name,
    const exon_idle_strategy_t *idle,
    int64_t instance_id,
    int thread_index,
    int32_t *sleeping_flag)
{
    memset(runner, 0, sizeof(*runner));
    snprintf(runner->name, sizeof(runner->name), "%s", name);
    runner->idle = *idle;
    runner->doorbell_fd = -1;
    runner->epoll_fd = -1;
    runner->idle.doorbell_fd = -1;
    runner->idle.extra_fd = -1;
    runner->idle.sleeping_flag = sleeping_flag;

    if (exon_agent_doorbell_name(runner->doorbell_name, sizeof(runner->doorbell_name), instance_id, thread_index) < 0)
    {
        return EXON_E_ARGUMENT;
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
    {
        return exon_set_error(-errno, "agent %s: socket(AF_UNIX): %s", name, strerror(errno));
    }
    struct sockaddr_un addr;
    socklen_t addr_len = exon_agent_doorbell_address(&addr, runner->doorbell_name);
    if (bind(fd, (struct sockaddr *)&addr, addr_len) < 0)
    {
        int err = errno;
        close(fd);
        return exon_set_error(
            -err, "agent %s: bind doorbell @%s: %s", name, runner->doorbell_name, strerror(err));
    }
    runner->doorbell_fd = fd;
    runner->idle.doorbell_fd = fd;
    runner->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (runner->epoll_fd < 0)
    {
        int err = errno;
        close(fd);
        runner->doorbell_fd = -1;
        runner->idle.doorbell_fd = -1;
        return exon_set_error(-err, "agent %s: epoll_create1: %s", name, strerror(err));
    }
    runner->idle.extra_fd = runner->epoll_fd;
    exon_idle_strategy_reset(&runner->idle);
    return 0;
}

int exon_agent_runner_add(exon_agent_runner_t *runner, const exon_agent_t *agent)
{
    if (runner->agent_count >= EXON_AGENT_MAX_PER_RUNNER)
    {
        return exon_set_error(EXON_E_NO_SPACE, "agent runner %s is full", runner->name);
    }
    runner->agents[runner->agent_count++] = *agent;
    return 0;
}

int exon_agent_runner_do_work(exon_agent_runner_t *runner, int64_t now_ns)
{
    int work_count = 0;
    for (int i = 0; i < runner->agent_count; i++)
    {
        int rc = runner->agents[i].do_work(runner->agents[i].state, now_ns);
        if (rc > 0)
        {
            work_count += rc;
        }
    }
    runner->duty_cycles++;
    return work_count;
}

static int exon_agent_runner_duty(void *state, int64_t now_ns)
{
    return exon_agent_runner_do_work((exon_agent_runner_t *)state, now_ns);
}

static void *exon_agent_runner_main(void *arg)
{
    exon_agent_runner_t *runner = (exon_agent_runner_t *)arg;
    char thread_name[16]; /* a Linux thread name is at most 15 bytes: the runner's name is cut to 10 */
    snprintf(thread_name, sizeof(thread_name), "exon-%.10s", runner->name);
    pthread_setname_np(pthread_self(), thread_name);

    while (EXON_LOAD_ACQ(&runner->running))
    {
        exon_idle_strategy_cycle(&runner->idle, exon_agent_runner_duty, runner, exon_nano_clock());
    }
    for (int i = 0; i < runner->agent_count; i++)
    {
        if (NULL != runner->agents[i].on_close)
        {
            runner->agents[i].on_close(runner->agents[i].state);
        }
    }
    return NULL;
}

int exon_agent_runner_start(exon_agent_runner_t *runner)
{
    if (runner->started)
    {
        return exon_set_error(EXON_E_STATE, "agent runner %s already started", runner->name);
    }
    EXON_STORE_REL(&runner->running, 1);
    int rc = pthread_create(&runner->thread, NULL, exon_agent_runner_main, runner);
    if (0 != rc)
    {
        EXON_STORE_REL(&runner->running, 0);
        return exon_set_error(-rc, "agent runner %s: pthread_create: %s", runner->name, strerror(rc));
    }
    runner->started = true;
    return 0;
}

int exon_agent_runner_close(exon_agent_runner_t *runner)
{
    if (runner->started)
    {
        EXON_STORE_REL(&runner->running, 0);
        if (runner->doorbell_fd >= 0)
        {
            struct sockaddr_un addr;
            socklen_t addr_len = exon_agent_doorbell_address(&addr, runner->doorbell_name);
            char byte = 1;
            sendto(runner->doorbell_fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
        }
        pthread_join(runner->thread, NULL);
        runner->started = false;
    }
    if (runner->doorbell_fd >= 0)
    {
        close(runner->doorbell_fd);
        runner->doorbell_fd = -1;
        runner->idle.doorbell_fd = -1;
    }
    if (runner->epoll_fd >= 0)
    {
        close(runner->epoll_fd);
        runner->epoll_fd = -1;
        runner->idle.extra_fd = -1;
    }
    return 0;
}
