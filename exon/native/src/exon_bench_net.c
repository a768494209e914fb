/* exon_bench_net.c: throughput and ping-pong loops over driver-managed logs. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "exon_common.h"
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
        int64_t rc = exon_publication_offer(st->pub, buf, st->msg_len, 0);
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
        int n = exon_image_poll_count(st->img, 4096, &bytes);
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
        return exon_set_error(EXON_E_ARGUMENT, "bench: msg_len %d or duration out of range", msg_len);
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
        int n = exon_image_poll(st->img, frags, 16, 16, copy, (int32_t)sizeof(copy), &used);
        for (int i = 0; i < n; i++)
        {
            while (EXON_LOAD_RLX(&st->running) &&
                exon_publication_offer(st->pub, (const char *)copy + frags[i].offset, frags[i].length, 0) < 0)
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
        return exon_set_error(EXON_E_ARGUMENT, "pingpong: msg_len %d must be in [8, 4096]", msg_len);
    }
    bench_pong_state_t st = { .img = ping_img, .pub = pong_pub, .running = 1 };
    pthread_t pong_thread;
    if (pthread_create(&pong_thread, NULL, bench_net_ponger, &st) != 0)
    {
        return exon_set_error(-EAGAIN, "pingpong: cannot start the pong thread");
    }
    char buf[4096];
    memset(buf, 0x33, sizeof(buf));
    int64_t deadline = exon_nano_clock() + timeout_ns;
    int64_t done = 0;
    while (done < count && exon_nano_clock() < deadline)
    {
        int64_t t0 = exon_nano_clock();
        memcpy(buf, &t0, sizeof(t0));
        while (exon_publication_offer(ping_pub, buf, msg_len, 0) < 0)
        {
            if (exon_nano_clock() >= deadline)
            {
                goto out;
            }
            sched_yield();
        }
        while (exon_image_poll_count(pong_img, 1, NULL) <= 0)
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
