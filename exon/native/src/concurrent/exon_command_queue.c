/* exon_command_queue.c: SPSC command ring (conductor <-> agent) with a backlog and an eventfd. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "concurrent/exon_command_queue.h"

int exon_command_queue_init(exon_command_queue_t *q)
{
    memset(q, 0, sizeof(*q));
    q->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->wake_fd < 0)
    {
        int err = errno;
        return exon_set_error(-err, "command queue eventfd: %s", strerror(err));
    }
    return 0;
}

void exon_command_queue_fini(exon_command_queue_t *q)
{
    if (q->wake_fd >= 0)
    {
        close(q->wake_fd);
    }
    q->wake_fd = -1;
    free(q->backlog);
    q->backlog = NULL;
    q->backlog_length = 0;
    q->backlog_capacity = 0;
}

static bool exon_command_queue_put(exon_command_queue_t *q, const exon_agent_command_t *cmd)
{
    int64_t tail = q->tail;
    if (tail - EXON_LOAD_ACQ(&q->head) >= EXON_COMMAND_QUEUE_CAPACITY)
    {
        return false;
    }
    q->slots[tail & (EXON_COMMAND_QUEUE_CAPACITY - 1)] = *cmd;
    EXON_STORE_REL(&q->tail, tail + 1);
    return true;
}

static void exon_command_queue_wake(exon_command_queue_t *q);

int32_t exon_command_queue_flush(exon_command_queue_t *q)
{
    int32_t moved = 0;
    while (moved < q->backlog_length && exon_command_queue_put(q, &q->backlog[moved]))
    {
        moved++;
    }
    if (moved > 0)
    {
        memmove(q->backlog, q->backlog + moved, sizeof(q->backlog[0]) * (size_t)(q->backlog_length - moved));
        q->backlog_length -= moved;
        exon_command_queue_wake(q);
    }
    return q->backlog_length;
}

static void exon_command_queue_wake(exon_command_queue_t *q)
{
    if (q->wake_fd >= 0 && 0 == __atomic_exchange_n(&q->wake_pending, 1, __ATOMIC_SEQ_CST))
    {
        uint64_t one = 1;
        ssize_t n = write(q->wake_fd, &one, sizeof(one));
        (void)n; /* EAGAIN: the counter is saturated, the consumer is awake anyway */
    }
}

int exon_command_queue_offer(exon_command_queue_t *q, int32_t type, int32_t value, void *target)
{
    exon_agent_command_t cmd = { .type = type, .value = value, .target = target };
    int rc = 1;
    if (exon_command_queue_flush(q) > 0 || !exon_command_queue_put(q, &cmd))
    {
        if (q->backlog_length == q->backlog_capacity)
        {
            int32_t capacity = q->backlog_capacity > 0 ? q->backlog_capacity * 2 : 16;
            exon_agent_command_t *grown = realloc(q->backlog, sizeof(cmd) * (size_t)capacity);
            if (NULL == grown)
            {
                return exon_set_error(-ENOMEM, "command queue backlog: out of memory");
            }
            q->backlog = grown;
            q->backlog_capacity = capacity;
        }
        q->backlog[q->backlog_length++] = cmd;
        q->backlogged++;
        rc = 0;
    }
    exon_command_queue_wake(q);
    return rc;
}

int exon_command_queue_drain(exon_command_queue_t *q, exon_command_handler_fn handler, void *state, int limit)
{
    /* the eventfd is read (and the flag cleared) only once the producer's write landed,
     * so a readable eventfd never keeps a parked runner spinning with nothing to do */
    if (EXON_LOAD_ACQ(&q->wake_pending))
    {
        uint64_t value;
        if (read(q->wake_fd, &value, sizeof(value)) == (ssize_t)sizeof(value))
        {
            __atomic_store_n(&q->wake_pending, 0, __ATOMIC_SEQ_CST);
        }
    }
    int64_t head = q->head;
    int64_t tail = __atomic_load_n(&q->tail, __ATOMIC_SEQ_CST);
    int count = 0;
    while (head < tail && count < limit)
    {
        exon_agent_command_t cmd = q->slots[head & (EXON_COMMAND_QUEUE_CAPACITY - 1)];
        head++;
        EXON_STORE_REL(&q->head, head);
        handler(state, &cmd);
        count++;
    }
    return count;
}
