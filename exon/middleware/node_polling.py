"""A Node's polling: who reads the transport, when, and how the others wait.

* Leader/follower polling: a thread that must wait (``receive`` with nothing queued,
  ``send`` without credit, ``link``...) takes the *poll role* if it is free, pulls a native
  batch from the transport in one GIL-holding call (lock held: poll, classify, fast DATA
  into the sockets' native queues), runs the core on the rest and checks its own
  condition. While it holds the role and there is nothing to read it sleeps in the
  transport's futex wait (lock and GIL released). Threads that find the role taken wait
  on their socket's condition; the leader notifies them.
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

:class:`NodePolling` is a part of :class:`~exon.middleware.node.Node` (a base class of
it): the leader/follower wait (``_await``, the sockets' ``wait_until``), one poll of the
transport and the hand-out of what it read, the dispatcher thread's loop and the driver's
liveness check. Every method runs with the node's lock held unless it says otherwise.
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
from exon.middleware.node_connections import NodeConnections
from exon.middleware.node_transport import is_fragment
from exon.transport.aeron import Aeron

__all__ = ["CLIENT_SPIN", "DISPATCH_GRACE", "NodePolling"]

log = logging.getLogger("exon.node")

#: seconds an old stream must have been quiet (no packet, heartbeats included: a live
#: sender sends one every 100 ms) for a peer's LINK from a new stream to replace it (2.7)
RELINK_QUIET = 1.0
#: seconds an old stream is watched after a newer one from its address came (past it, only
#: its liveness timeout ends it), and between two looks at it
_SUSPECT_WATCH = 15.0
_SUSPECT_INTERVAL = 0.1
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


class NodePolling(NodeConnections):
    """The polling side of a Node: leader/follower waits, the dispatcher, driver liveness."""

    # the node's own, used here (exon.middleware.node.Node.__init__)
    address: str
    _aeron: Aeron | None
    _core: SocketCore
    _fast: FastLinks
    _assembler: FrameAssembler  #: FRAGMENTs back into frames, per image (its channel)
    _poller: Any
    _sockets: dict[int, HostedSocket]
    _touched: set[HostedSocket]
    _dispatch_cond: threading.Condition
    _role: int | None
    _role_waiters: list[threading.Condition]
    _last_client_poll: float
    _async_waiters: int
    _async_sockets: set[HostedSocket]
    _loop_pollers: int
    _loop_cond: threading.Condition
    _driver_failure: errors.ExonError | None
    _next_driver_check: float
    _next_publish: float
    _heap: HeapTrimmer
    _next_trim_check: float
    _traffic: bool  #: messages were polled since the last trim check

    def _publish_counters(self, core_statistics: Any = None, *,
                          now: float | None = None) -> None:
        raise NotImplementedError  # Node's

    def _notify_touched(self) -> None:
        raise NotImplementedError  # Node's

    def _client_activity(self) -> int:
        raise NotImplementedError  # Node's

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
        core = self._core
        now = _monotonic()
        if now >= self._next_publish:  # the CnC counters, on a clock read made anyway
            self._publish_counters(now=now)
        count = n
        transport = self._transport
        if n and transport is not None:
            if slots:
                owners = self._fast.slot_owners
                for slot in slots:
                    self._touched.add(owners[slot])
            if left:  # something is left for Python to look at
                # a view of the poll buffer, overwritten by the next poll: what is kept is
                # copied (the sockets' payloads here; the core's decoder and the assembler
                # copy what they keep; HELLO is decoded at once), never the whole batch
                ints, data = self._poller.descriptors()
                tokens = dict(self._fast.tokens)  # as classified (the core may detach below)
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
                                self._new_stream(address, image, now)
                                self._poller.set_key(image, self._fast.key_of(address))
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
            self._channels_gone(now)
        if self._restart_suspects and now >= self._next_suspect_check:
            self._check_restarts(now)
        due = core.next_timer()
        if due is not None and due <= now:
            core.handle_timer(now=now)
        if self._backlog:
            self._retry_backlog()
        self._pump_locked()
        return count + len(gone)

    def _new_stream(self, address: str, image: int, now: float) -> None:
        """A new stream (``image``'s HELLO) announces ``address`` while older ones from it
        live on: its node may have restarted there (kill -9: no EOS, and the old image
        stays until its liveness timeout, 10 s). Watch the older ones (2.7). Lock held."""
        transport = self._transport
        if transport is None:
            return
        for channel in transport.other_channels(address, image):
            self._restart_suspects.setdefault((address, channel), now + _SUSPECT_WATCH)
        if self._restart_suspects:
            self._next_suspect_check = now  # at once: the old one may be quiet already

    def _check_restarts(self, now: float) -> None:
        """An old stream of an address that also has a newer one, quiet for
        :data:`RELINK_QUIET` (a live sender heartbeats every 100 ms), is from a process
        that died: it goes now, as if it had timed out -- its links break, and our stream
        to the address starts again, HELLO first, for the process there now to read --
        so that process links at once instead of after the liveness timeout. Lock held."""
        transport = self._transport
        self._next_suspect_check = now + _SUSPECT_INTERVAL
        if transport is None:
            self._restart_suspects.clear()
            return
        for (address, channel), until in list(self._restart_suspects.items()):
            quiet = transport.channel_quiet(channel)
            if quiet is None or now > until:
                del self._restart_suspects[(address, channel)]  # gone, or not an exon image
            elif quiet >= RELINK_QUIET:
                del self._restart_suspects[(address, channel)]
                self.streams_retired += 1
                self._core.channel_gone(address, channel, now=now)
                self._drop_peer(address)

    def _channels_gone(self, now: float) -> None:
        """Images gone while their address lives on in another image (the peer node
        restarted): break the links whose handshake came on them. Lock held."""
        transport = self._transport
        if transport is None:
            return
        gone, transport.gone_channels = transport.gone_channels, []
        for address, channel in gone:
            if self._core.channel_gone(address, channel, now=now):
                # the node those links were with is gone; a successor at its address reads
                # a new stream of ours from its start (HELLO first), never the old one's
                # middle (UDP: one session continues) nor a dead IPC stream id
                self._drop_peer(address)

    def _fast_orphan(self, token: Any) -> bool:
        """A fast DATA for a socket object that is gone. True: undo its count and let the
        core take the frame; False: the link is gone too, drop it."""
        if token.attached:
            self._fast.record(token).received -= 1
            return True
        self.frames_dropped += 1
        return False

    def poll_once_if_idle(self) -> bool:
        """Lock held: look at the transport once unless another thread holds the poll
        role (a non-blocking receive that found nothing queued). True if it looked."""
        if self._role is not None:
            return False
        self._role = threading.get_ident()
        try:
            self._poll_once()
        finally:
            self._role = None
        return True

    def _loop_polling(self, delta: int, handoff: float = 0.0) -> bool:
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
            if self._loop_pollers or self._closed:
                return False
            self._loop_pollers = 1
            if self._role == _DISPATCHER and self._transport is not None:
                self._transport.wake()
                if handoff > 0:
                    cond = self._loop_cond
                    self._role_waiters.append(cond)
                    try:
                        cond.wait(handoff)  # lock and GIL released
                    finally:
                        self._role_waiters.remove(cond)
            return True
        self._loop_pollers = 0
        self._last_client_poll = _monotonic()  # the dispatcher waits its grace from here
        return True

    def _poll_once(self) -> int:
        """Poll the transport once (lock held on entry and exit, released while polling)."""
        transport = self._transport
        if transport is None:
            return 0
        transport.invoke()  # INVOKER: receive (and send) now, not at the agent's next cycle
        gone = transport.refresh(self._poller, self._fast.key_of)
        if transport.images_ended:
            for channel in transport.images_ended:
                self._assembler.forget(channel)  # its unfinished frame, if any, is lost
            transport.images_ended.clear()
        if transport.gone_channels and not gone:
            self._channels_gone(_monotonic())
            self._pump_locked()
        if self._pending:
            self._progress_connections(_monotonic())
            if self._lost:
                self._pump_locked()
        if self._to_connect or self._to_close:
            self._lock.release()
            try:
                self._connect_pending()
            finally:
                self._lock.acquire()
        # one native call, lock and GIL held: poll, classify, queue the fast DATA
        n, left, slots = self._poller.batch(self._fast.queues)
        self._fast.flush_flows()
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
            self._publish_counters(now=now)
        if now >= self._next_driver_check:
            self._next_driver_check = now + _DRIVER_CHECK_INTERVAL
            if self._driver_failure is None and self._check_driver():
                return 1
        if now >= self._next_trim_check:
            # idle for a whole round: what a drained backlog freed goes back to the system
            # (never while messages flow: the pages given back would fault in again)
            self._next_trim_check = now + _TRIM_CHECK_INTERVAL
            if not self._traffic:
                self._heap.maybe_trim()
            self._traffic = False
        due = self._core.next_timer()
        if due is not None and due <= now:
            self._core.handle_timer(now=now)
            self._pump_locked()
        if self._backlog:
            # frames refused by back pressure (a FLOW, say) go out without waiting for
            # inbound traffic: the peer may be waiting for exactly these frames
            self._retry_backlog()
            if self._lost:
                self._pump_locked()
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
            self._driver_failure = exc
        else:
            return False
        log.warning("node %s lost its media driver (%s): every link breaks",
                    self.address, self._driver_failure)
        addresses: set[str] = set()
        for tag in self._sockets:
            with contextlib.suppress(errors.ExonError):
                addresses.update(peer.address for peer in self._core.links(tag))
        if self._transport is not None:
            addresses.update(self._transport.publications)
        addresses.update(self._backlog)
        addresses.update(self._pending)
        now = _monotonic()
        for address in addresses:
            self._drop_peer(address)
            self._core.peer_gone(address, now=now)
        self._pump_locked()
        for sock in self._sockets.values():
            self._touched.add(sock)
        self._notify_touched()
        return True

    def _sleep_locked(self, timeout: float, spin: float = 0.0) -> None:
        """Futex-sleep on the transport (lock released), bounded by the next core timer;
        spin first for ``spin`` seconds (client threads: see :data:`CLIENT_SPIN`)."""
        transport = self._transport
        if transport is None or timeout <= 0:
            return
        due = self._core.next_timer()
        if due is not None:
            timeout = min(timeout, max(0.0, due - _monotonic()))
        flow_in = self._fast.next_flow_in()
        if flow_in is not None:
            timeout = min(timeout, flow_in)
        if self._backlog or self._to_connect or self._pending or self._to_close:
            timeout = min(timeout, 0.001)
        if len(self._assembler) and spin < _ASSEMBLY_SPIN:
            spin = _ASSEMBLY_SPIN  # the rest of a frame is on its way (see the constant)
        self._lock.release()
        try:
            transport.wait(timeout, spin)
        finally:
            self._lock.acquire()

    def _await(self, cond: threading.Condition, ready: Callable[[], bool],
               deadline: float | None, spin: float = 0.0,
               lead: Callable[[], bool] | None = None) -> bool:
        """Wait (lock held) until ``ready()``; True, or False at ``deadline``. Polls the
        transport itself when the poll role is free (leader/follower); as the leader it
        spins ``spin`` seconds before each futex sleep (request/reply waits).

        While ``lead()`` is false (a socket without links: nothing can arrive for it but
        the handshake, which the core handles for whoever polls) the thread never takes
        the role and does not queue for it: it sleeps on ``cond`` until the poller wakes
        it, and neither the dispatcher nor a leading thread stands aside for it. Else an
        idle socket's thread (an archive's control REP, say) would lead the polling for a
        busy one, and hand every batch over through a wake-up."""
        me = threading.get_ident()
        while True:
            if ready():
                return True
            if self._closed:
                raise errors.ClosedError("the node is closed")
            if self._driver_failure is not None:
                raise errors.BrokenLink(
                    f"node {self.address} lost its media driver: {self._driver_failure}")
            now = _monotonic()
            if deadline is not None and now >= deadline:
                return False
            if lead is not None and not lead():
                left = _WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - now)
                cond.wait(max(0.0, left))  # served by the leader or the dispatcher
                continue
            if self._role is None:
                self._role = me
                try:
                    if spin:
                        # a request/reply wait: the answer is rarely there yet, and the wait
                        # returns at once when it is, so skip the empty poll
                        left = _WAIT_SLICE if deadline is None else deadline - now
                        self._sleep_locked(min(left, _WAIT_SLICE), spin)
                    while True:
                        if self._poll_once() == 0:
                            if ready() or self._closed:
                                break
                            now = _monotonic()
                            if deadline is not None and now >= deadline:
                                break
                            if self._role_waiters:
                                break  # let another thread lead; we wait as a follower
                            left = _WAIT_SLICE if deadline is None else deadline - now
                            self._sleep_locked(min(left, _WAIT_SLICE), spin)
                        elif ready() or self._closed:
                            break
                finally:
                    self._role = None
                    self._last_client_poll = _monotonic()
                    if self._role_waiters:
                        self._role_waiters[0].notify_all()
                if ready():
                    return True
                if self._role_waiters and not ready():
                    # give the follower a turn before polling again
                    cond.wait(0.0005)
                continue
            # follower
            if self._role == _DISPATCHER and self._transport is not None:
                self._transport.wake()
            self._role_waiters.append(cond)
            try:
                left = _WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - now)
                cond.wait(max(0.0, left))
            finally:
                self._role_waiters.remove(cond)

    # ==== the dispatcher thread ==============================================================

    def _dispatch_loop(self) -> None:
        lock = self._lock
        seen = -1
        with lock:
            while not self._closed:
                now = _monotonic()
                activity = self._client_activity()
                busy = seen != activity or now - self._last_client_poll < DISPATCH_GRACE
                if self._role is not None or self._role_waiters or self._loop_pollers or (
                        busy and not self._async_waiters):
                    seen = activity
                    self._dispatch_cond.wait(DISPATCH_GRACE * 2)
                    continue
                self._role = _DISPATCHER
                try:
                    while not self._closed and not self._role_waiters and not self._loop_pollers:
                        try:
                            n = self._poll_once()
                        except errors.ExonError:
                            n = 0  # a transport hiccup: keep serving
                        if n == 0 and not (self._role_waiters or self._loop_pollers
                                           or self._closed):
                            self._sleep_locked(_DISPATCH_SLICE)
                finally:
                    self._role = None
                    if self._role_waiters:
                        self._role_waiters[0].notify_all()
                self._last_client_poll = _monotonic()
