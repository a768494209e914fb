/* exon_bench_ipc.c: native publisher/subscriber throughput loop over one log (IPC). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "exon_bench_core.h"
#include "exon_bench_ipc.h"

exon_bench_core_t exon_bench_core;

void exon_bench_bind(uintptr_t publication_offer, uintptr_t image_poll, uintptr_t image_poll_count,
    uintptr_t log_clean_to, uintptr_t set_error)
{
    exon_bench_core.publication_offer = (int64_t (*)(exon_publication_t *, const char *, int32_t, int64_t))
        publication_offer;
    exon_bench_core.image_poll = (int (*)(exon_image_t *, exon_fragment_t *, int32_t, int32_t, uint8_t *, int32_t,
        int32_t *))image_poll;
    exon_bench_core.image_poll_count = (int (*)(exon_image_t *, int32_t, int64_t *))image_poll_count;
    exon_bench_core.log_clean_to = (int64_t (*)(exon_log_t *, int64_t *, int64_t))log_clean_to;
    exon_bench_core.set_error = (int (*)(int, const char *, ...))set_error;
}

typedef struct bench_state_stct
{
    exon_publication_t *pub;
    exon_image_t *img;
    int32_t msg_len;
    int32_t window;
    volatile int32_t running;
    int64_t clean_position;
    int64_t messages;
    int64_t bytes;
    int64_t back_pressured;
    int rc;
}
bench_state_t;

static void *publisher_main(void *arg)
{
    bench_state_t *st = (bench_state_t *)arg;
    char *msg = calloc(1, (size_t)(st->msg_len > 0 ? st->msg_len : 1));
    int64_t back_pressured = 0;
    if (msg == NULL)
    {
        st->rc = -ENOMEM;
        return NULL;
    }
    while (EXON_LOAD_RLX(&st->running))
    {
        for (int i = 0; i < 64; i++)
        {
            int64_t rc = exon_bench_core.publication_offer(st->pub, msg, st->msg_len, 0);
            if (EXON_UNLIKELY(rc < 0))
            {
                if (rc != EXON_PUBLICATION_BACK_PRESSURED && rc != EXON_PUBLICATION_ADMIN_ACTION &&
                    rc != EXON_PUBLICATION_NOT_CONNECTED)
                {
                    st->rc = (int)rc;
                    EXON_STORE_RLX(&st->running, 0);
                    break;
                }
                back_pressured++;
                EXON_CPU_PAUSE();
            }
        }
    }
    st->back_pressured = back_pressured;
    free(msg);
    return NULL;
}

/* The subscriber also plays the driver: clean behind, then raise the publication limit. */
static void *subscriber_main(void *arg)
{
    bench_state_t *st = (bench_state_t *)arg;
    exon_log_t *log = st->img->log;
    int64_t messages = 0;
    int64_t bytes = 0;
    int idle = 0;
    while (EXON_LOAD_RLX(&st->running))
    {
        int64_t polled_bytes = 0;
        int n = exon_bench_core.image_poll_count(st->img, 4096, &polled_bytes);
        int64_t position = EXON_LOAD_RLX(st->img->subscriber_position);
        if (n > 0 || polled_bytes > 0)
        {
            messages += n;
            bytes += polled_bytes;
            if (st->window > 0)
            {
                exon_bench_core.log_clean_to(log, &st->clean_position, position - log->term_length);
                EXON_STORE_REL(st->pub->position_limit, position + st->window);
            }
            idle = 0;
        }
        else if (++idle > 1000)
        {
            sched_yield(); /* on 2 cores, let the publisher run */
            idle = 0;
        }
        else
        {
            EXON_CPU_PAUSE();
        }
    }
    st->messages = messages;
    st->bytes = bytes;
    return NULL;
}

int exon_bench_ipc_throughput(
    exon_publication_t *pub,
    exon_image_t *img,
    int32_t msg_len,
    int64_t duration_ns,
    int32_t window,
    exon_bench_result_t *result)
{
    if (msg_len < 0 || msg_len > pub->max_message_length || duration_ns <= 0)
    {
        return exon_bench_core.set_error(EXON_E_ARGUMENT, "bench: msg_len %d or duration %lld out of range",
            msg_len, (long long)duration_ns);
    }
    bench_state_t st;
    memset(&st, 0, sizeof(st));
    st.pub = pub;
    st.img = img;
    st.msg_len = msg_len;
    bool driver_managed = window == EXON_BENCH_DRIVER_MANAGED;
    st.window = driver_managed ? 0 : (window > 0 ? window : pub->term_length / 2);
    st.running = 1;
    st.clean_position = 0;
    int64_t position = EXON_LOAD_ACQ(img->subscriber_position);
    st.clean_position = position - pub->term_length > 0 ? position - pub->term_length : 0;
    if (!driver_managed)
    {
        EXON_STORE_REL(pub->position_limit, position + st.window);
    }

    int64_t elapsed = exon_bench_run_threads(subscriber_main, publisher_main, &st, &st.running, duration_ns);
    if (elapsed < 0)
    {
        return (int)elapsed;
    }
    return exon_bench_fill_result(result, st.messages, st.bytes, st.back_pressured, elapsed, st.rc);
}

int64_t exon_bench_run_threads(
    void *(*sub_main)(void *), void *(*pub_main)(void *), void *state, volatile int32_t *running,
    int64_t duration_ns)
{
    pthread_t sub_thread;
    pthread_t pub_thread;
    int64_t t0 = exon_nano_clock();
    if (pthread_create(&sub_thread, NULL, sub_main, state) != 0)
    {
        return exon_bench_core.set_error(-EAGAIN, "bench: cannot start the subscriber thread");
    }
    if (pthread_create(&pub_thread, NULL, pub_main, state) != 0)
    {
        EXON_STORE_RLX(running, 0);
        pthread_join(sub_thread, NULL);
        return exon_bench_core.set_error(-EAGAIN, "bench: cannot start the publisher thread");
    }
    struct timespec ts = { .tv_sec = duration_ns / 1000000000LL, .tv_nsec = duration_ns % 1000000000LL };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    {
    }
    EXON_STORE_RLX(running, 0);
    pthread_join(pub_thread, NULL);
    pthread_join(sub_thread, NULL);
    return exon_nano_clock() - t0;
}

int exon_bench_fill_result(
    exon_bench_result_t *result, int64_t messages, int64_t bytes, int64_t back_pressured, int64_t elapsed_ns,
    int rc)
{
    result->messages = messages;
    result->bytes = bytes;
    result->elapsed_ns = elapsed_ns;
    result->back_pressured = back_pressured;
    result->messages_per_second = elapsed_ns > 0 ? (double)messages * 1e9 / (double)elapsed_ns : 0.0;
    return rc < 0 ? exon_bench_core.set_error(rc, "bench: offer failed with %d", rc) : 0;
}
