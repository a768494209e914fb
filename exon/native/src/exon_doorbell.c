/* exon_doorbell.c: futex doorbells shared between processes, and ringing a log's readers. */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "exon_doorbell.h"

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

int exon_doorbell_ring(int32_t *word)
{
    EXON_FETCH_ADD(word, 1);
    long woken = futex(word, FUTEX_WAKE, INT32_MAX, NULL);
    if (woken < 0)
    {
        int err = errno;
        return exon_set_error(-err, "doorbell wake failed: errno %d", err);
    }
    return (int)woken;
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
                exon_doorbell_ring(exon_doorbell_word(counters_values, id));
                rung++;
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
