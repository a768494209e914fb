/*
 * exon_sender.c: the sender agent's duty cycle.
 *
 * Hook for the UDP engineer (issue 3): network publications' send/heartbeat/SETUP work,
 * NAK-driven retransmits and status message processing go here. For now (IPC only) the
 * sender has nothing to do and reports 0 work, so its runner idles (backoff -> park on its
 * agent doorbell). `state` is the exon_driver_t (see exon_driver.h).
 */
#include "exon_common.h"
#include "exon_driver_conductor.h"

int exon_sender_do_work(void *state, int64_t now_ns)
{
    (void)state;
    (void)now_ns;
    return 0;
}
