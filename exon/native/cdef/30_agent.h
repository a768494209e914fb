/* cdef: agents, idle strategies, agent doorbells (exon_agent.h). */
#define EXON_IDLE_SPIN ...
#define EXON_IDLE_YIELD ...
#define EXON_IDLE_BACKOFF ...
#define EXON_IDLE_SLEEP ...
#define EXON_IDLE_NOOP ...

typedef struct exon_idle_strategy_stct {
    int type;
    int64_t max_spins;
    int64_t max_yields;
    int64_t min_park_ns;
    int64_t max_park_ns;
    int64_t spins;
    int64_t yields;
    int64_t park_ns;
    int doorbell_fd;
    int32_t *sleeping_flag;
    int64_t parks;
    int64_t wakeups_by_doorbell;
    ...;
} exon_idle_strategy_t;

int exon_idle_strategy_type(const char *name);
void exon_idle_strategy_init(exon_idle_strategy_t *idle, int type, int64_t max_spins, int64_t max_yields, int64_t min_park_ns, int64_t max_park_ns);
void exon_idle_strategy_reset(exon_idle_strategy_t *idle);
void exon_idle_strategy_idle(exon_idle_strategy_t *idle, int work_count);
int exon_agent_doorbell_ring(int64_t instance_id, int thread_index, int32_t *sleeping_flag);
typedef int (*exon_agent_do_work_fn)(void *state, int64_t now_ns);
bool exon_idle_strategy_would_park(const exon_idle_strategy_t *idle);
int exon_idle_strategy_cycle(exon_idle_strategy_t *idle, exon_agent_do_work_fn duty, void *state, int64_t now_ns);
