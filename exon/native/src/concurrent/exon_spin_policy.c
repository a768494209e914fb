/* exon_spin_policy.c: see exon_spin_policy.h. */
#include "concurrent/exon_spin_policy.h"

int64_t exon_spin_policy_budget(exon_spin_policy_t *policy, int64_t spin_ns)
{
    if (spin_ns <= 0)
    {
        return 0;
    }
    if (policy->skip > 0)
    {
        policy->skip--;
        return 0;
    }
    return spin_ns;
}

void exon_spin_policy_outcome(exon_spin_policy_t *policy, bool answered)
{
    if (answered)
    {
        policy->misses = 0;
        policy->backoff /= 2;
        return;
    }
    if (++policy->misses < policy->patience)
    {
        return;
    }
    int32_t next = policy->backoff > 0 ? policy->backoff * 2 : 1;
    policy->backoff = next > EXON_SPIN_BACKOFF_MAX ? EXON_SPIN_BACKOFF_MAX : next;
    policy->skip = policy->backoff;
}

static __thread exon_spin_policy_t exon_thread_spin_policy = { .patience = EXON_SPIN_PATIENCE_WAITS };

exon_spin_policy_t *exon_spin_policy_of_thread(void)
{
    return &exon_thread_spin_policy;
}
