/*
 * exon_agent.h: agents (do_work duty cycles), idle strategies and the agent runner.
 *
 * An agent is a `do_work(state, now_ns) -> work_count` function. A runner owns one thread
 * and runs one or more agents in turn (threading modes put 1, 2 or 3 agents on a thread),
 * then hands the summed work count to an idle strategy:
 *   SPIN     busy spin (CPU pause)                           - lowest latency, burns a core
 *   YIELD    sched_yield()
 *   BACKOFF  max_spins spins, max_yields yields, then parks from min_park_ns doubling to
 *            max_park_ns (Aeron's default: 10, 20, 1 us .. 1 ms)
 *   SLEEP    park max_park_ns every idle cycle
 *   NOOP     nothing (the caller drives the loop)
 * A work count > 0 resets the strategy.
 *
 * Parking happens in poll() on the runner's agent doorbell: an abstract-namespace UNIX
 * datagram socket "\0exon-<driver_instance_id hex>-<thread index>". While parked the runner
 * sets its `sleeping` flag in the CnC header; a client that finds the flag set after writing
 * a command rings the doorbell (exon_agent_doorbell_ring) so the agent wakes at once instead
 * of at the end of its park. The runner also owns an epoll set (runner->epoll_fd): agents
 * add their UDP sockets to it, and a park ends as soon as one of them is readable. Parks are bounded (max_park_ns), so a missed ring only delays.
 *
 * Thread-safety: a runner is started and stopped by one owner thread; do_work runs only on
 * the runner's thread. exon_agent_doorbell_ring may be called from any thread/process.
 */
#ifndef EXON_AGENT_H
#define EXON_AGENT_H

#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>

#define EXON_IDLE_SPIN 0
#define EXON_IDLE_YIELD 1
#define EXON_IDLE_BACKOFF 2
#define EXON_IDLE_SLEEP 3
#define EXON_IDLE_NOOP 4

#define EXON_AGENT_MAX_PER_RUNNER 3
#define EXON_AGENT_NAME_LENGTH 32

typedef int (*exon_agent_do_work_fn)(void *state, int64_t now_ns);
typedef void (*exon_agent_on_close_fn)(void *state);

typedef struct exon_agent_stct
{
    char name[EXON_AGENT_NAME_LENGTH];
    exon_agent_do_work_fn do_work;
    exon_agent_on_close_fn on_close; /* called on the runner thread after its last duty cycle */
    void *state;
}
exon_agent_t;

typedef struct exon_idle_strategy_stct
{
    int type;
    int64_t max_spins;
    int64_t max_yields;
    int64_t min_park_ns;
    int64_t max_park_ns;
    /* state */
    int64_t spins;
    int64_t yields;
    int64_t park_ns;
    int doorbell_fd;            /* -1: park with nanosleep */
    int extra_fd;               /* -1, or an fd (the runner's epoll set) that also ends a park */
    int32_t *sleeping_flag;     /* NULL: no flag (in the CnC header otherwise) */
    int64_t parks;              /* statistics: number of parks */
    int64_t wakeups_by_doorbell;/* statistics: parks cut short by a ring */
}
exon_idle_strategy_t;

/* Name -> EXON_IDLE_* ("spin", "yield", "backoff", "sleep", "noop"), or EXON_E_ARGUMENT. */
int exon_idle_strategy_type(const char *name);

void exon_idle_strategy_init(
    exon_idle_strategy_t *idle,
    int type,
    int64_t max_spins,
    int64_t max_yields,
    int64_t min_park_ns,
    int64_t max_park_ns);

void exon_idle_strategy_reset(exon_idle_strategy_t *idle);

/* Idle after a duty cycle that did `work_count` units of work. */
void exon_idle_strategy_idle(exon_idle_strategy_t *idle, int work_count);

/* Whether the next idle step after a cycle without work parks (SLEEP; BACKOFF once its
 * spins and yields are spent). */
bool exon_idle_strategy_would_park(const exon_idle_strategy_t *idle);

/* One duty cycle then its idle step. Before a park (with a sleeping flag) the flag goes up
 * and `duty` runs once more: a commit that landed after the first look, whose writer saw the
 * flag still down and so did not ring, is found then (a parked runner would otherwise wait
 * out its park, up to max_park_ns); a commit after it rings. Returns the work done. */
int exon_idle_strategy_cycle(exon_idle_strategy_t *idle, exon_agent_do_work_fn duty, void *state,
    int64_t now_ns);

typedef struct exon_agent_runner_stct
{
    char name[EXON_AGENT_NAME_LENGTH];
    exon_agent_t agents[EXON_AGENT_MAX_PER_RUNNER];
    int agent_count;
    exon_idle_strategy_t idle;
    pthread_t thread;
    bool started;
    volatile int32_t running;
    int doorbell_fd;
    int epoll_fd;               /* agents add their sockets here (EPOLLIN); a park ends on any */
    int64_t duty_cycles;
    char doorbell_name[64];
}
exon_agent_runner_t;

/*
 * Prepare a runner. `instance_id` and `thread_index` name its doorbell; `sleeping_flag`
 * (may be NULL) is set while parked. Returns 0 or a negative code.
 */
int exon_agent_runner_init(
    exon_agent_runner_t *runner,
    const char *name,
    const exon_idle_strategy_t *idle,
    int64_t instance_id,
    int thread_index,
    int32_t *sleeping_flag);

/* Add an agent (before start). EXON_E_NO_SPACE when full. */
int exon_agent_runner_add(exon_agent_runner_t *runner, const exon_agent_t *agent);

/* Run one duty cycle of every agent on the calling thread (no idling); the work count. */
int exon_agent_runner_do_work(exon_agent_runner_t *runner, int64_t now_ns);

/* Start the runner's thread. */
int exon_agent_runner_start(exon_agent_runner_t *runner);

/* Ask the thread to stop, wake it, join it, close the doorbell. Idempotent. */
int exon_agent_runner_close(exon_agent_runner_t *runner);

/* Doorbell name of agent thread `thread_index` of the driver `instance_id` (abstract). */
int exon_agent_doorbell_name(char *buf, size_t length, int64_t instance_id, int thread_index);

/*
 * Ring the doorbell of thread `thread_index` of driver `instance_id` if `sleeping_flag`
 * says it is parked, clearing the flag (the first ringer wakes it, later ones skip the
 * sendto until it parks again); NULL rings unconditionally. Non-blocking, never fails loudly:
 * returns 1 if a ring was sent, 0 otherwise.
 */
int exon_agent_doorbell_ring(int64_t instance_id, int thread_index, int32_t *sleeping_flag);

#endif /* EXON_AGENT_H */
