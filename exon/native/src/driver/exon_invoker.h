/*
 * exon_invoker.h: the INVOKER threading mode of an embedded driver (Aeron C's
 * AERON_THREADING_MODE_INVOKER, adapted): the threads of the client that embeds the driver
 * run the sender's and the receiver's duty cycles themselves, so that a round trip costs
 * one kernel wake-up per side (the datagram waking the waiting thread) instead of three
 * (driver receiver, node, driver sender).
 *
 * - exon_driver_invoke: one sender + receiver duty cycle on the calling thread (under the
 *   sender's and the receiver's locks: the agent thread may run them too).
 * - exon_invoker_wait: a reader's wait (exon_lt_wait's contract) that invokes the duty
 *   cycles while it spins, then parks in ppoll on the invoker epoll set: the receive
 *   endpoints' sockets and an eventfd. Doorbells bridged to the driver
 *   (exon_invoker_bridge) write that eventfd when rung in this process, so a ring from a
 *   thread of this process (a node's wake, the client conductor's image events, the agent's
 *   receiver) ends the park at once. A ring from another process reaches only the futex: the
 *   park is sliced (EXON_INVOKER_PARK_SLICE_NS) and re-checks between slices.
 *
 * Unlike Aeron's INVOKER, one agent thread remains (SHARED: conductor, sender, receiver), as
 * the backstop: commands, timers, SETUPs and whatever arrives while no thread of the client
 * waits. Its park is not ended by the receive sockets (they are in the invoker set only),
 * so a datagram wakes one thread, the one waiting for it; the agent picks it up at its next
 * duty cycle otherwise (the backoff idle strategy parks at most idle_max_park_ns).
 *
 * The agent stands aside while a client thread is in exon_invoker_wait (invokers_in): it
 * skips the receiver's duty cycle then (the waiting thread receives: the agent would only
 * take its datagram, and ring a doorbell that the driver's mapping of the counters cannot
 * bridge to the eventfd, which left the waiter to its park slice: p99 of 2 ms), and the
 * sender's while such a thread spins (it sends within microseconds; a parked one does not,
 * so then the agent sends what other threads offer). The waiter takes the sender lock with
 * a trylock (the agent holds it only while sending), and the receiver lock with a trylock
 * too (exon_receiver_try_duty_cycle: never behind an agent preempted while holding it).
 * Between two waits no client thread is in exon_invoker_wait and the agent receives: a
 * lease that kept it aside then (client threads only, from one wait to the next) cut its
 * hand-offs but cost UDP req/rep p50 11-19% on a lightly loaded 2-core host (the agent,
 * parked more, had to be rung for every reply; awake, it sends on the other core at once).
 *
 * Thread-safety: every function may be called from any thread of the driver's process.
 */
#ifndef EXON_INVOKER_H
#define EXON_INVOKER_H

#include <stdint.h>

#include "driver/exon_driver.h"
#include "client/exon_image.h"

#define EXON_INVOKER_PARK_SLICE_NS 2000000LL

/* 1 if the driver runs in INVOKER mode. */
int exon_driver_invoker_enabled(exon_driver_t *driver);

/* One sender and receiver duty cycle on the calling thread; the work count (0 when the
 * driver is not in INVOKER mode). */
int exon_driver_invoke(exon_driver_t *driver);

/*
 * Wait like exon_lt_wait: 1 when one of `images` has data, 0 when `doorbell` was rung for
 * something else, EXON_E_TIMEOUT after timeout_ns (< 0: none). Spins (invoking) for spin_ns
 * first. Falls back to exon_lt_wait when the driver is not in INVOKER mode.
 */
int exon_invoker_wait(exon_driver_t *driver, exon_image_t **images, int32_t count, int32_t *doorbell,
    int64_t spin_ns, int64_t timeout_ns);

/* Bridge / unbridge a doorbell word to the driver's invoker eventfd (see above); 0, or
 * EXON_E_NO_SPACE when the process-wide bridge table is full, EXON_E_STATE when not INVOKER. */
int exon_invoker_bridge(exon_driver_t *driver, int32_t *doorbell);
int exon_invoker_unbridge(exon_driver_t *driver, int32_t *doorbell);

#endif /* EXON_INVOKER_H */
