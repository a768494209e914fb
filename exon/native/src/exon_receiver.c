/*
 * exon_receiver.c: the receiver agent's duty cycle.
 *
 * Hook for the UDP engineer (issue 3): receive endpoints' recvmmsg, image insertion,
 * status messages, NAKs and image liveness go here. For now (IPC only) the receiver has
 * nothing to do and reports 0 work, so its runner idles (backoff -> park on its agent
 * doorbell). `state` is the exon_driver_t (see exon_driver.h).
 */
#include "exon_common.h"
#include "exon_driver_conductor.h"

int exon_receiver_do_work(void *state, int64_t now_ns)
{
    (void)state;
    (void)now_ns;
    return 0;
}
