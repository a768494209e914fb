"""A Node's polling: who reads the transport, when, and how the others wait.

* Leader/follower polling: a thread that must wait (``receive`` with nothing queued,
  ``send`` without credit, ``link``...) takes the *poll role* if it is free, pulls a native
  batch from the transport in one GIL-holding call (lock held: poll, classify, fast DATA
  into the sockets' native queues), runs the core on the rest and checks its own
  condition. While it holds the role and there is nothing to read it sleeps in the
  transport's futex wait (lock and GIL released). Threads that find the role taken wait
  in their socket's :class:`~exon.middleware.wakeup.Wakeup`; the leader notifies them.
* The dispatcher thread takes the poll role only when no client thread has polled for
  :data:`DISPATCH_GRACE` seconds (so FLOW, LINK and timers are served when nobody
  receives) and hands it back at once when a client wants it (the client rings the
  subscription's doorbell to wake it).
* An asyncio task whose reply is near (``areceive`` on a REQ/REP, exon.sockets.aio) polls
  from its event loop for a bounded spin: while it does (``loop_polling``) the dispatcher
  stands aside as it does for a client thread, so the reply needs no thread hop.

A node on a driver that dies (killed, stopped) learns it from its Aeron client (the
driver's pid gone, or its heartbeat older than the driver timeout) and breaks every link:
blocked callers wake with :class:`~exon.errors.BrokenLink`.

:class:`PollLoop` is owned by :class:`~exon.middleware.node.Node`: the leader/follower
wait (:meth:`~PollLoop.wait_until`, the sockets' ``wait_until``), one poll of the
transport and the hand-out of what it read, the dispatcher thread's loop and the driver's
liveness check. It holds references to the node's lock, core, fast path, connections and
socket registry, and calls the node's ``pump`` and ``notify_touched`` (given at
construction). Every method runs with the node's lock held unless it says otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from exon import errors
from exon.core import SocketCore
from exon.middleware.fastpath import FLOW_CREDIT, HEADER_LENGTH, FastLinks
from exon.middleware.frame_assembly import FrameAssembler
from exon.middleware.heap import HeapTrimmer
from exon.middleware.hosted import HostedSocket
from exon.middleware.node_connections import Connections
from exon.middleware.node_counters import PUBLISH_INTERVAL
from exon.middleware.node_transport import NodeTransport, is_fragment
from exon.middleware.wakeup import Wakeup
from exon.transport.aeron import Aeron

__all__ = ["CLIENT_SPIN", "DISPATCH_GRACE", "PollLoop"]

log = logging.getLogger("exon.node")

_DRIVER_CHECK_INTERVAL = 0.05  #: seconds between two looks at the Aeron client's health
#: seconds between two looks, while idle, at the heap memory freed since (exon.middleware.heap)
_TRIM_CHECK_INTERVAL = 1.0

DISPATCH_GRACE = 0.002  #: seconds without a client poll before the dispatcher polls
_DISPATCH_SLICE = 0.05  #: longest futex sleep of the dispatcher
_WAIT_SLICE = 0.05  #: longest condition wait of a follower before it re-checks
#: seconds a REQ/REP receiver that leads the polling spins (CPU pause, no syscall) before
#: it parks in the futex: an answer within it costs neither side a futex wake. Streaming
#: waits (PULL, credit) do not spin: parking lets the batch grow, which is cheaper per message
CLIENT_SPIN = 0.00005
#: seconds a leader spins before it parks while a FRAGMENT assembly is unfinished: the
#: sender offers the next chunk as soon as the window lets it, i.e. as soon as this side
#: has read the last one (an IPC window is half a term, one 1 MiB message with 2 MiB
#: terms), so parking would add a futex wake to every chunk
_ASSEMBLY_SPIN = 0.00005

_DISPATCHER = -1
_FLOW_CREDIT = FLOW_CREDIT  # exon_lt_desc_t.link of a FLOW that gave credit back to link i:
# _FLOW_CREDIT - i (a FLOW applied natively otherwise is FLOW_DONE)


def _monotonic() -> float:
    return time.monotonic()


class PollLoop:
    """Who polls a node's transport, when, and how the others wait: leader/follower waits,
    the dispatcher thread, driver liveness.

    ``lock``, ``core``, ``fast`` (the link table), ``poller`` (its native poll),
    ``assembler``, ``transport``, ``connections``, ``sockets`` (the registry, by tag) and
    ``touched`` (the sockets to wake) are the node's, shared by reference; ``pump``,
    ``notify_touched``, ``publish_counters`` and ``client_activity`` are the node's bound
    methods. The node sets :attr:`transport` to None when it releases its transport.
    """

    def __init__(self, *, address: str, lock: Any, aeron: Aeron | None, core: SocketCore,
                 fast: FastLinks, poller: Any, assembler: FrameAssembler,
                 transport: NodeTransport | None, connections: Connections,
                 sockets: dict[int, HostedSocket], touched: set[HostedSocket],
                 pump: Callable[[], None], notify_touched: Callable[[], None],
                 publish_counters: Callable[..., None],
                 client_activity: Callable[[], int]) -> None:
        self.address = address
        self.lock = lock
        self._aeron = aeron
        self.core = core
        self.fast = fast
        self._poller = poller
        self._assembler = assembler  #: FRAGMENTs back into frames, per image (its channel)
        self.transport = transport
        self.connections = connections
        # the connections' containers (never rebound) and calls, bound once: the poll loop
        # looks at them on every poll
        self._backlog = connections.backlog
        self._pending = connections.pending
        self._to_connect = connections.to_connect
        self._to_close = connections.to_close
        self._lost = connections.lost
        self._restart_suspects = connections.restart_suspects
        self._retry_backlog = connections.retry_backlog
        self._drop_peer = connections.drop_peer
        self._sockets = sockets
        self._touched = touched
        self._pump = pump
        self._notify_touched = notify_touched
        self._publish_counters = publish_counters
        self._client_activity = client_activity
        self.closed = False  #: set by the node's close: waits raise ClosedError
        self.dispatch_cond = threading.Condition(lock)  #: the dispatcher sleeps on it
        self.role: int | None = None  #: thread ident holding the poll role
        #: where the threads waiting for the poll role sleep (followers; a loop's hand-over)
        self.role_waiters: list[threading.Condition | Wakeup] = []
        self._last_client_poll = 0.0
        #: asyncio tasks waiting on this node's sockets: the dispatcher polls for them
        self.async_waiters = 0
        self._async_sockets: set[HostedSocket] = set()  # the sockets they wait on
        self.loop_pollers = 0  #: 1 while an asyncio task polls from its loop (spinning)
        self._loop_cond = threading.Condition(lock)  # it waits there for the role
        self.driver_failure: errors.ExonError | None = None  #: why the driver was lost
        self._next_driver_check = 0.0
        self._next_publish = 0.0  #: when the CnC counters are published next
        self._heap = HeapTrimmer()
        self._next_trim_check = 0.0
        self._traffic = False  #: messages were polled since the last trim check

    def close(self) -> None:
        """The node closes (lock held): waits raise ClosedError, the dispatcher ends."""
        self.closed = True
        self.dispatch_cond.notify_all()

    def async_waiting(self, sock: HostedSocket, delta: int, waiting: bool) -> None:
        """``delta`` asyncio tasks start or stop waiting on ``sock`` (lock held); the
        dispatcher polls for their loops while any waits."""
        self.async_waiters += delta
        if waiting:
            self._async_sockets.add(sock)
        else:
            self._async_sockets.discard(sock)
        if delta > 0:
            self.dispatch_cond.notify_all()  # the dispatcher polls for the loop

    def _process_native(self, n: int, left: int, slots: list[int], gone: list[str]) -> int:
        """Hand out a polled batch (its fast DATA is in the sockets' native queues already):
        wake the sockets touched, every other frame to the core, in order. Lock held.

        A FRAGMENT (node protocol) goes to the image's assembly instead, and the frame it
        completes to the core, where an unfragmented one would go. FRAGMENT is not a
        sockets-protocol frame, so the native classifier hands it and every later frame of
        its image in the batch here, in order; a DATA it completes for a link attached to
        the link table is counted by the core in that table's counters and queued in the
        peer's lane of the socket's inbox behind what came before (as any DATA after a
        slow frame), so order and credit stay one per link."""
        core = self.core
        now = _monotonic()
        if now >= self._next_publish:  # the CnC counters, on a clock read made anyway
            self._next_publish = now + PUBLISH_INTERVAL
            self._publish_counters()
        count = n
        transport = self.transport
        if n and transport is not None:
            if slots:
                owners = self.fast.slot_owners
                for slot in slots:
                    self._touched.add(owners[slot])
            if left:  # something is left for Python to look at
                # a view of the poll buffer, overwritten by the next poll: what is kept is
                # copied (the sockets' payloads here; the core's decoder and the assembler
                # copy what they keep; HELLO is decoded at once), never the whole batch
                ints, data = self._poller.descriptors()
                tokens = dict(self.fast.tokens)  # as classified (the core may detach below)
                sockets = self._sockets
                touched = self._touched
                receive = core.receive_frame
                addresses: dict[int, str | None] = {}
                channels: dict[int, int] = {}
                head = HEADER_LENGTH  # exon frame header bytes in front of a DATA payload
                for k in range(0, 5 * n, 5):
                    link = ints[k]
                    if link < -1:  # queued natively, or a FLOW applied natively (exon_lt_classify)
                        if link <= _FLOW_CREDIT:  # it gave credit back: wake the senders
                            sock = sockets.get(tokens[_FLOW_CREDIT - link].tag)
                            if sock is not None:
                                touched.add(sock)
                        continue
                    off = ints[k + 2]
                    if link >= 0:
                        token = tokens[link]
                        sock = sockets.get(token.tag)
                        if sock is not None:
                            sock._on_fast(token, bytes(data[off + head : off + ints[k + 3]]))
                            touched.add(sock)
                            continue
                        if not self._fast_orphan(token):
                            continue
                    frame = data[off : off + ints[k + 3]]
                    image = ints[k + 1]
                    address = addresses.get(image)
                    if address is None:
                        address = transport.image_address(image)
                        if address is None:
                            address = transport.hello(image, frame)
                            if address is not None:
                                self.connections.new_stream(address, image, now)
                                self._poller.set_key(image, self.fast.key_of(address))
                                addresses[image] = address
                            else:  # a frame before a valid HELLO: garbage, dropped
                                self._poller.note_garbage(image)
                            continue
                        addresses[image] = address
                    channel = channels.get(image)
                    if channel is None:
                        channel = channels[image] = transport.image_channel(image)
                    if is_fragment(frame):
                        whole = self._assembler.feed(channel, frame)
                        if whole is None:
                            continue
                        frame = whole
                    if not receive(address, frame, now=now, channel=channel):
                        # garbage the core dropped: it counts against the image's share
                        # of the next polls, as a malformed message does (2.17)
                        self._poller.note_garbage(image)
        for address in gone:
            self._drop_peer(address)
            core.peer_gone(address, now=now)
        if transport is not None and transport.gone_channels:
            self.connections.channels_gone(now)
        if self._restart_suspects and self.connections.restarts_due(now):
            self.connections.check_restarts(now)
        due = core.next_timer()
        if due is not None and due <= now:
            core.handle_timer(now=now)
        if self._backlog:
            self._retry_backlog()
        self._pump()
        return count + len(gone)

    def _fast_orphan(self, token: Any) -> bool:
        """A fast DATA for a socket object that is gone. True: undo its count and let the
        core take the frame; False: the link is gone too, drop it."""
        if token.attached:
            self.fast.record(token).received -= 1
            return True
        self.connections.frames_dropped += 1
        return False

    def poll_once_if_idle(self) -> bool:
        """Lock held: look at the transport once unless another thread holds the poll
        role (a non-blocking receive that found nothing queued). True if it looked."""
        if self.role is not None:
            return False
        self.role = threading.get_ident()
        try:
            self.poll_once()
        finally:
            self.role = None
        return True

    def loop_polling(self, delta: int, handoff: float = 0.0) -> bool:
        """Lock held: an event loop's task starts (+1) or stops (-1) polling the transport
        itself (``poll_once_if_idle`` between yields). Starting is refused (False) while
        another task spins on this node: one spinner polls for all. While one spins the
        dispatcher stands aside.

        When the dispatcher holds the poll role (it polled for parked tasks), starting
        rings it awake and waits up to ``handoff`` seconds, the loop's thread blocked, for
        the role: the dispatcher needs the GIL to let go, and a thread that keeps the GIL
        between yields would hand it over only at the interpreter's switch interval
        (5 ms), long after the spin ended, and the next task would park again."""
        if delta > 0:
            if self.loop_pollers or self.closed:
                return False
            self.loop_pollers = 1
            if self.role == _DISPATCHER and self.transport is not None:
                self.transport.wake()
                if handoff > 0:
                    cond = self._loop_cond
                    self.role_waiters.append(cond)
                    try:
                        cond.wait(handoff)  # lock and GIL released
                    finally:
                        self.role_waiters.remove(cond)
            return True
        self.loop_pollers = 0
        self._last_client_poll = _monotonic()  # the dispatcher waits its grace from here
        return True

    def poll_once(self, invoke: bool = True) -> int:
        """Poll the transport once (lock held on entry and exit, released while polling).
        ``invoke=False`` right after :meth:`_sleep_locked` ended a wait: the wait ran the
        INVOKER duty cycles last thing before it returned, and this thread offered
        nothing since, so running them again would only cost their syscalls."""
        transport = self.transport
        if transport is None:
            return 0
        if invoke:
            transport.invoke()  # INVOKER: receive (and send) now, not at the agent's next cycle
        gone = transport.refresh(self._poller, self.fast.key_of)
        if transport.images_ended:
            for channel in transport.images_ended:
                self._assembler.forget(channel)  # its unfinished frame, if any, is lost
            transport.images_ended.clear()
        if transport.gone_channels and not gone:
            self.connections.channels_gone(_monotonic())
            self._pump()
        if self._pending:
            self.connections.progress_connections(_monotonic())
            if self._lost:
                self._pump()
        if self._to_connect or self._to_close:
            self.lock.release()
            try:
                self.connections.connect_pending()
            finally:
                self.lock.acquire()
        # one native call, lock and GIL held: poll, classify, queue the fast DATA
        n, left, slots = self._poller.batch(self.fast.queues)
        self.fast.flush_flows()
        if n or gone:
            if self._async_sockets:
                # asyncio waiters learn of every change, as a polling thread's ready() would:
                # credit or state can move without an event for their socket (a FLOW the
                # core applied, say)
                self._touched.update(self._async_sockets)
            self._traffic = True  # no heap trim in the next round (see below)
            return self._process_native(n, left, slots, gone)
        now = _monotonic()
        if now >= self._next_publish:  # the CnC counters, on a clock read made anyway
            self._next_publish = now + PUBLISH_INTERVAL
            self._publish_counters()
        if now >= self._next_driver_check:
            self._next_driver_check = now + _DRIVER_CHECK_INTERVAL
            if self.driver_failure is None and self._check_driver():
                return 1
        if now >= self._next_trim_check:
            # idle for a whole round: what a drained backlog freed goes back to the system
            # (never while messages flow: the pages given back would fault in again)
            self._next_trim_check = now + _TRIM_CHECK_INTERVAL
            if not self._traffic:
                self._heap.maybe_trim()
            self._traffic = False
        due = self.core.next_timer()
        if due is not None and due <= now:
            self.core.handle_timer(now=now)
            self._pump()
        if self._backlog:
            # frames refused by back pressure (a FLOW, say) go out without waiting for
            # inbound traffic: the peer may be waiting for exactly these frames
            self._retry_backlog()
            if self._lost:
                self._pump()
        return 0

    def _check_driver(self) -> bool:
        """True if the driver was just found dead (lock held): then every link of every
        socket is broken (the peers are unreachable without a driver) and the callers
        waiting on them wake with BrokenLink."""
        aeron = self._aeron
        if aeron is None:
            return False
        try:
            aeron.check()
        except errors.ExonError as exc:
            self.driver_failure = exc
        else:
            return False
        log.warning("node %s lost its media driver (%s): every link breaks",
                    self.address, self.driver_failure)
        addresses: set[str] = set()
        for tag in self._sockets:
            with contextlib.suppress(errors.ExonError):
                addresses.update(peer.address for peer in self.core.links(tag))
        addresses.update(self.connections.addresses())
        now = _monotonic()
        for address in addresses:
            self._drop_peer(address)
            self.core.peer_gone(address, now=now)
        self._pump()
        for sock in self._sockets.values():
            self._touched.add(sock)
        self._notify_touched()
        return True

    def _sleep_locked(self, timeout: float, spin: float = 0.0) -> bool:
        """Futex-sleep on the transport (lock released), bounded by the next core timer;
        spin first for ``spin`` seconds (client threads: see :data:`CLIENT_SPIN`). True if
        it waited (an INVOKER wait ran the duty cycles last thing before it returned)."""
        transport = self.transport
        if transport is None or timeout <= 0:
            return False
        due = self.core.next_timer()
        if due is not None:
            timeout = min(timeout, max(0.0, due - _monotonic()))
        flow_in = self.fast.next_flow_in()
        if flow_in is not None:
            timeout = min(timeout, flow_in)
        if self._backlog or self._to_connect or self._pending or self._to_close:  # busy()
            timeout = min(timeout, 0.001)
        if len(self._assembler) and spin < _ASSEMBLY_SPIN:
            spin = _ASSEMBLY_SPIN  # the rest of a frame is on its way (see the constant)
        self.lock.release()
        try:
            transport.wait(timeout, spin)
        finally:
            self.lock.acquire()
        return True

    def wait_until(self, wakeup: Wakeup, ready: Callable[[], bool],
               deadline: float | None, spin: float = 0.0,
               lead: Callable[[], bool] | None = None) -> bool:
        """Wait (lock held) until ``ready()``; True, or False at ``deadline``. Polls the
        transport itself when the poll role is free (leader/follower); as the leader it
        spins ``spin`` seconds before each futex sleep (request/reply waits).

        While ``lead()`` is false (a socket without links: nothing can arrive for it but
        the handshake, which the core handles for whoever polls) the thread never takes
        the role and does not queue for it: it sleeps in ``wakeup`` until the poller wakes
        it, and neither the dispatcher nor a leading thread stands aside for it. Else an
        idle socket's thread (an archive's control REP, say) would lead the polling for a
        busy one, and hand every batch over through a wake-up."""
        me = threading.get_ident()
        while True:
            if ready():
                return True
            if self.closed:
                raise errors.ClosedError("the node is closed")
            if self.driver_failure is not None:
                raise errors.BrokenLink(
                    f"node {self.address} lost its media driver: {self.driver_failure}")
            now = _monotonic()
            if deadline is not None and now >= deadline:
                return False
            if lead is not None and not lead():
                left = _WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - now)
                wakeup.wait(max(0.0, left))  # served by the leader or the dispatcher
                continue
            if self.role is None:
                self.role = me
                try:
                    waited = False
                    if spin:
                        # a request/reply wait: the answer is rarely there yet, and the wait
                        # returns at once when it is, so skip the empty poll
                        left = _WAIT_SLICE if deadline is None else deadline - now
                        waited = self._sleep_locked(min(left, _WAIT_SLICE), spin)
                    while True:
                        if self.poll_once(not waited) == 0:
                            if ready() or self.closed:
                                break
                            now = _monotonic()
                            if deadline is not None and now >= deadline:
                                break
                            if self.role_waiters:
                                break  # let another thread lead; we wait as a follower
                            left = _WAIT_SLICE if deadline is None else deadline - now
                            waited = self._sleep_locked(min(left, _WAIT_SLICE), spin)
                        else:
                            if ready() or self.closed:
                                break
                            waited = False
                finally:
                    self.role = None
                    self._last_client_poll = _monotonic()
                    if self.role_waiters:
                        self.role_waiters[0].notify_all()
                if ready():
                    return True
                if self.role_waiters and not ready():
                    # give the follower a turn before polling again
                    wakeup.wait(0.0005)
                continue
            # follower
            if self.role == _DISPATCHER and self.transport is not None:
                self.transport.wake()
            self.role_waiters.append(wakeup)
            try:
                left = _WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - now)
                wakeup.wait(max(0.0, left))
            finally:
                self.role_waiters.remove(wakeup)

    # ==== the dispatcher thread ==============================================================

    def dispatch_loop(self) -> None:
        lock = self.lock
        seen = -1
        with lock:
            while not self.closed:
                now = _monotonic()
                activity = self._client_activity()
                busy = seen != activity or now - self._last_client_poll < DISPATCH_GRACE
                if self.role is not None or self.role_waiters or self.loop_pollers or (
                        busy and not self.async_waiters):
                    seen = activity
                    self.dispatch_cond.wait(DISPATCH_GRACE * 2)
                    continue
                self.role = _DISPATCHER
                try:
                    waited = False
                    while not self.closed and not self.role_waiters and not self.loop_pollers:
                        try:
                            n = self.poll_once(not waited)
                        except errors.ExonError:
                            n = 0  # a transport hiccup: keep serving
                        waited = False
                        if n == 0 and not (self.role_waiters or self.loop_pollers
                                           or self.closed):
                            waited = self._sleep_locked(_DISPATCH_SLICE)
                finally:
                    self.role = None
                    if self.role_waiters:
                        self.role_waiters[0].notify_all()
                self._last_client_poll = _monotonic()
