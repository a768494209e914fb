/* exon_bench_net.c: throughput and ping-pong loops over driver-managed logs. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "common/exon_common.h"
#include "exon_bench_core.h"
#include "exon_bench_net.h"

typedef struct bench_net_state_stct
{
    exon_publication_t *pub;
    exon_image_t *img;
    int32_t msg_len;
    volatile int32_t running;
    int64_t messages;
    int64_t bytes;
    int64_t back_pressured;
    int rc;
}
bench_net_state_t;

static void *bench_net_publisher(void *arg)
{
    bench_net_state_t *st = (bench_net_state_t *)arg;
    char buf[65536];
    memset(buf, 0x5a, sizeof(buf));
    while (EXON_LOAD_RLX(&st->running))
    {
        int64_t rc = exon_bench_core.publication_offer(st->pub, buf, st->msg_len, 0);
        if (rc < 0)
        {
            if (rc == EXON_PUBLICATION_CLOSED || rc == EXON_E_MESSAGE_TOO_LARGE || rc == EXON_E_ARGUMENT)
            {
                st->rc = (int)rc;
                break;
            }
            st->back_pressured++;
            sched_yield();
        }
    }
    return NULL;
}

static void *bench_net_subscriber(void *arg)
{
    bench_net_state_t *st = (bench_net_state_t *)arg;
    while (EXON_LOAD_RLX(&st->running))
    {
        int64_t bytes = 0;
        int n = exon_bench_core.image_poll_count(st->img, 4096, &bytes);
        if (n > 0)
        {
            st->messages += n;
            st->bytes += bytes;
        }
        else
        {
            sched_yield();
        }
    }
    return NULL;
}

int exon_bench_net_throughput(
    exon_publication_t *pub, exon_image_t *img, int32_t msg_len, int64_t duration_ns, exon_bench_result_t *result)
{
    if (msg_len < 0 || msg_len > pub->max_message_length || msg_len > 65536 || duration_ns <= 0)
    {
        return exon_bench_core.set_error(EXON_E_ARGUMENT, "bench: msg_len %d or duration out of range", msg_len);
    }
    bench_net_state_t st;
    memset(&st, 0, sizeof(st));
    st.pub = pub;
    st.img = img;
    st.msg_len = msg_len;
    st.running = 1;
    int64_t elapsed = exon_bench_run_threads(bench_net_subscriber, bench_net_publisher, &st, &st.running,
        duration_ns);
    if (elapsed < 0)
    {
        return (int)elapsed;
    }
    return exon_bench_fill_result(result, st.messages, st.bytes, st.back_pressured, elapsed, st.rc);
}

typedef struct bench_pong_state_stct
{
    exon_image_t *img;
    exon_publication_t *pub;
    volatile int32_t running;
}
bench_pong_state_t;

static void *bench_net_ponger(void *arg)
{
    bench_pong_state_t *st = (bench_pong_state_t *)arg;
    exon_fragment_t frags[16];
    uint8_t copy[65536];
    while (EXON_LOAD_RLX(&st->running))
    {
        int32_t used = 0;
        int n = exon_bench_core.image_poll(st->img, frags, 16, 16, copy, (int32_t)sizeof(copy), &used);
        for (int i = 0; i < n; i++)
        {
            while (EXON_LOAD_RLX(&st->running) &&
                exon_bench_core.publication_offer(st->pub, (const char *)copy + frags[i].offset, frags[i].length, 0) < 0)
            {
                sched_yield();
            }
        }
        if (n <= 0)
        {
            sched_yield(); /* 2 cores: leave room for the driver's threads */
        }
    }
    return NULL;
}

int64_t exon_bench_net_pingpong(
    exon_publication_t *ping_pub,
    exon_image_t *ping_img,
    exon_publication_t *pong_pub,
    exon_image_t *pong_img,
    int32_t msg_len,
    int64_t count,
    int64_t timeout_ns,
    int64_t *rtt_ns)
{
    if (msg_len < 8 || msg_len > 4096 || count <= 0)
    {
        return exon_bench_core.set_error(EXON_E_ARGUMENT, "pingpong: msg_len %d must be in [8, 4096]", msg_len);
    }
    bench_pong_state_t st = { .img = ping_img, .pub = pong_pub, .running = 1 };
    pthread_t pong_thread;
    if (pthread_create(&pong_thread, NULL, bench_net_ponger, &st) != 0)
    {
        return exon_bench_core.set_error(-EAGAIN, "pingpong: cannot start the pong thread");
    }
    char buf[4096];
    memset(buf, 0x33, sizeof(buf));
    int64_t deadline = exon_nano_clock() + timeout_ns;
    int64_t done = 0;
    while (done < count && exon_nano_clock() < deadline)
    {
        int64_t t0 = exon_nano_clock();
        memcpy(buf, &t0, sizeof(t0));
        while (exon_bench_core.publication_offer(ping_pub, buf, msg_len, 0) < 0)
        {
            if (exon_nano_clock() >= deadline)
            {
                goto out;
            }
            sched_yield();
        }
        while (exon_bench_core.image_poll_count(pong_img, 1, NULL) <= 0)
        {
            if (exon_nano_clock() >= deadline)
            {
                goto out;
            }
            sched_yield();
        }
        rtt_ns[done++] = exon_nano_clock() - t0;
    }
out:
    EXON_STORE_RLX(&st.running, 0);
    pthread_join(pong_thread, NULL);
    return done;
}

/* ---- the bare UDP floor ------------------------------------------------------------- */

typedef struct bench_udp_floor_stct
{
    int fd;
    int32_t msg_len;
    int64_t count;
    int rc;
}
bench_udp_floor_t;

static int bench_udp_socket(int64_t timeout_ns, struct sockaddr_in *bound)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0)
    {
        return exon_bench_core.set_error(-errno, "udp floor: socket: %s", strerror(errno));
    }
    struct timeval tv = { .tv_sec = (time_t)(timeout_ns / 1000000000LL),
                          .tv_usec = (suseconds_t)((timeout_ns % 1000000000LL) / 1000) };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    memset(bound, 0, sizeof(*bound));
    bound->sin_family = AF_INET;
    bound->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(*bound);
    if (bind(fd, (struct sockaddr *)bound, sizeof(*bound)) < 0 ||
        getsockname(fd, (struct sockaddr *)bound, &len) < 0)
    {
        int err = errno;
        close(fd);
        return exon_bench_core.set_error(-err, "udp floor: bind: %s", strerror(err));
    }
    return fd;
}

static void *bench_udp_floor_echo(void *arg)
{
    bench_udp_floor_t *st = (bench_udp_floor_t *)arg;
    char buf[65536];
    for (int64_t i = 0; i < st->count; i++)
    {
        ssize_t n = recv(st->fd, buf, sizeof(buf), 0);
        if (n < 0 || send(st->fd, buf, (size_t)n, 0) != n)
        {
            st->rc = -errno;
            break;
        }
    }
    return NULL;
}

int64_t exon_bench_udp_floor(int32_t msg_len, int64_t count, int64_t timeout_ns, int64_t *rtt_ns)
{
    if (msg_len <= 0 || msg_len > 65000 || count <= 0)
    {
        return exon_bench_core.set_error(EXON_E_ARGUMENT, "udp floor: bad msg_len %d or count %lld", msg_len, (long long)count);
    }
    struct sockaddr_in a, b;
    int fa = bench_udp_socket(timeout_ns, &a);
    if (fa < 0)
    {
        return fa;
    }
    int fb = bench_udp_socket(timeout_ns, &b);
    if (fb < 0)
    {
        close(fa);
        return fb;
    }
    if (connect(fa, (struct sockaddr *)&b, sizeof(b)) < 0 || connect(fb, (struct sockaddr *)&a, sizeof(a)) < 0)
    {
        int err = errno;
        close(fa);
        close(fb);
        return exon_bench_core.set_error(-err, "udp floor: connect: %s", strerror(err));
    }
    int64_t warmup = count / 10;
    bench_udp_floor_t echo = { .fd = fb, .msg_len = msg_len, .count = warmup + count, .rc = 0 };
    pthread_t thread;
    if (pthread_create(&thread, NULL, bench_udp_floor_echo, &echo) != 0)
    {
        close(fa);
        close(fb);
        return exon_bench_core.set_error(EXON_E_STATE, "udp floor: cannot start the echo thread");
    }
    char buf[65536];
    memset(buf, 0x5a, (size_t)msg_len);
    int64_t done = 0;
    int64_t rc = 0;
    for (int64_t i = 0; i < warmup + count; i++)
    {
        int64_t t0 = exon_nano_clock();
        if (send(fa, buf, (size_t)msg_len, 0) != msg_len || recv(fa, buf, sizeof(buf), 0) < 0)
        {
            rc = exon_bench_core.set_error(-errno, "udp floor: round trip %lld: %s", (long long)i, strerror(errno));
            break;
        }
        if (i >= warmup)
        {
            rtt_ns[done++] = exon_nano_clock() - t0;
        }
    }
    if (rc < 0)
    {
        shutdown(fb, SHUT_RDWR); /* ends the echo thread's recv */
    }
    pthread_join(thread, NULL);
    close(fa);
    close(fb);
    return rc < 0 ? rc : done;
}
