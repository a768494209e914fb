/* exon_doorbell.c: futex doorbells shared between processes, and ringing a log's readers. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "concurrent/exon_doorbell.h"

static long futex(int32_t *word, int op, int32_t value, const struct timespec *timeout)
{
    return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

int exon_doorbell_wait(int32_t *word, int32_t expected, int64_t timeout_ns)
{
    struct timespec ts;
    struct timespec *tsp = NULL;
    if (timeout_ns >= 0)
    {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000LL);
        ts.tv_nsec = (long)(timeout_ns % 1000000000LL);
        tsp = &ts;
    }
    /* Relative timeout (FUTEX_WAIT measures it against CLOCK_MONOTONIC). */
    if (futex(word, FUTEX_WAIT, expected, tsp) == 0)
    {
        return 0;
    }
    int err = errno;
    if (err == EAGAIN || err == EINTR)
    {
        return 0;
    }
    if (err == ETIMEDOUT)
    {
        return EXON_E_TIMEOUT;
    }
    return exon_set_error(-err, "doorbell wait failed: errno %d", err);
}

typedef struct exon_doorbell_bridge_stct
{
    int32_t *word;
    int fd;
}
exon_doorbell_bridge_t;

static exon_doorbell_bridge_t exon_doorbell_bridges[EXON_DOORBELL_BRIDGES];
static int32_t exon_doorbell_bridge_count; /* entries in use are [0, count) */
static pthread_mutex_t exon_doorbell_bridge_lock = PTHREAD_MUTEX_INITIALIZER;

int exon_doorbell_bridge_add(int32_t *word, int fd)
{
    pthread_mutex_lock(&exon_doorbell_bridge_lock);
    int32_t count = exon_doorbell_bridge_count;
    if (count >= EXON_DOORBELL_BRIDGES)
    {
        pthread_mutex_unlock(&exon_doorbell_bridge_lock);
        return exon_set_error(EXON_E_NO_SPACE, "doorbell bridge table full (%d)", EXON_DOORBELL_BRIDGES);
    }
    exon_doorbell_bridges[count].fd = fd;
    EXON_STORE_REL(&exon_doorbell_bridges[count].word, word);
    EXON_STORE_REL(&exon_doorbell_bridge_count, count + 1);
    pthread_mutex_unlock(&exon_doorbell_bridge_lock);
    return 0;
}

int exon_doorbell_bridge_remove(int32_t *word, int fd)
{
    pthread_mutex_lock(&exon_doorbell_bridge_lock);
    int32_t count = exon_doorbell_bridge_count;
    for (int32_t i = 0; i < count; i++)
    {
        if (exon_doorbell_bridges[i].word == word && exon_doorbell_bridges[i].fd == fd)
        {
            /* a ring racing with this sees the old entry, or none: one write to an fd that
             * is still open (the driver closes it after its nodes are gone) is harmless */
            EXON_STORE_REL(&exon_doorbell_bridges[i].word, exon_doorbell_bridges[count - 1].word);
            exon_doorbell_bridges[i].fd = exon_doorbell_bridges[count - 1].fd;
            EXON_STORE_REL(&exon_doorbell_bridge_count, count - 1);
            pthread_mutex_unlock(&exon_doorbell_bridge_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&exon_doorbell_bridge_lock);
    return -ENOENT;
}

static void exon_doorbell_bridge_ring(const int32_t *word)
{
    int32_t count = EXON_LOAD_ACQ(&exon_doorbell_bridge_count);
    for (int32_t i = 0; i < count; i++)
    {
        if (EXON_LOAD_ACQ(&exon_doorbell_bridges[i].word) == word)
        {
            uint64_t one = 1;
            ssize_t rc = write(exon_doorbell_bridges[i].fd, &one, sizeof(one));
            (void)rc; /* EAGAIN: the counter is saturated, the reader is awake anyway */
        }
    }
}

int exon_doorbell_ring(int32_t *word)
{
    EXON_FETCH_ADD(word, 1);
    if (EXON_LOAD_RLX(&exon_doorbell_bridge_count) > 0)
    {
        exon_doorbell_bridge_ring(word);
    }
    long woken = futex(word, FUTEX_WAKE, INT32_MAX, NULL);
    if (woken < 0)
    {
        int err = errno;
        return exon_set_error(-err, "doorbell wake failed: errno %d", err);
    }
    return (int)woken;
}

int exon_doorbell_ring_armed(int32_t *word)
{
    if (EXON_LOAD_RLX(word + 1) == 0 || __atomic_exchange_n(word + 1, 0, __ATOMIC_ACQ_REL) == 0)
    {
        return 0;
    }
    exon_doorbell_ring(word);
    return 1;
}

int32_t exon_doorbell_read(const int32_t *word)
{
    return EXON_LOAD_ACQ(word);
}

int exon_log_ring_doorbells(
    exon_log_metadata_t *meta, uint8_t *counters_values, exon_agent_ring_fn_t agent_ring, void *ctx)
{
    int rung = 0;
    int32_t count = EXON_LOAD_ACQ(&meta->exon_doorbell_count);
    if (count > EXON_LOG_DOORBELL_CAPACITY)
    {
        count = EXON_LOG_DOORBELL_CAPACITY;
    }
    for (int32_t i = 0; i < count; i++)
    {
        int32_t id = EXON_LOAD_RLX(&meta->exon_doorbell_ids[i]);
        if (id >= 0)
        {
            if (counters_values != NULL)
            {
                rung += exon_doorbell_ring_armed(exon_doorbell_word(counters_values, id));
            }
        }
        else if (agent_ring != NULL)
        {
            agent_ring(ctx, id);
            rung++;
        }
    }
    return rung;
}

int exon_log_add_doorbell(exon_log_metadata_t *meta, int32_t doorbell_id)
{
    int32_t count = EXON_LOAD_RLX(&meta->exon_doorbell_count);
    for (int32_t i = 0; i < count; i++)
    {
        if (meta->exon_doorbell_ids[i] == doorbell_id)
        {
            return -EEXIST;
        }
    }
    if (count >= EXON_LOG_DOORBELL_CAPACITY)
    {
        return exon_set_error(EXON_E_NO_SPACE, "log doorbell table full (%d entries)", EXON_LOG_DOORBELL_CAPACITY);
    }
    EXON_STORE_REL(&meta->exon_doorbell_ids[count], doorbell_id);
    EXON_STORE_REL(&meta->exon_doorbell_count, count + 1);
    return 0;
}

int exon_log_remove_doorbell(exon_log_metadata_t *meta, int32_t doorbell_id)
{
    int32_t count = EXON_LOAD_RLX(&meta->exon_doorbell_count);
    for (int32_t i = 0; i < count; i++)
    {
        if (meta->exon_doorbell_ids[i] == doorbell_id)
        {
            /* Move the last entry into the hole; a concurrent writer may ring one extra or
             * miss one ring: readers wait with bounded timeouts, so either is harmless. */
            EXON_STORE_REL(&meta->exon_doorbell_ids[i], meta->exon_doorbell_ids[count - 1]);
            EXON_STORE_REL(&meta->exon_doorbell_count, count - 1);
            return 0;
        }
    }
    return -ENOENT;
}
