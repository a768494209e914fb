"""The Node: one SocketCore bound to the Aeron transport, and its threads.

A node uses a media driver (chosen as :mod:`~exon.middleware.node_driver` says), one
Aeron client, the :class:`~exon.middleware.node_transport.NodeTransport` (its
subscriptions and one exclusive publication per peer node), the socket registry and a
dispatcher thread.

Threading (one lock, ``Node._lock``, guards the core and every socket's state):

* A sending thread sends itself: ``core.send`` under the lock, then ``offer`` on the peer's
  publication, still under the lock. There is no send queue.
* PUSH ``send`` and PULL ``receive`` are native doors (``exon_fast.c``: SocketSend,
  SocketReceive) that take the lock (a ``NodeLock``) in C; what they cannot finish at once
  goes to the socket's Python method.
* Leader/follower polling: a thread that must wait (``receive`` with nothing queued, ``send``
  without credit, ``link``...) takes the *poll role* if it is free, pulls a native batch from
  the transport in one GIL-holding call (lock held: poll, classify, fast DATA into the
  sockets' native queues), runs the core on the rest and checks its own condition. While
  it holds the role and there is nothing to read it sleeps in the transport's futex wait
  (lock and GIL released). Threads that find
  the role taken wait on their socket's condition; the leader notifies them.
* The dispatcher thread takes the poll role only when no client thread has polled for
  :data:`DISPATCH_GRACE` seconds (so FLOW, LINK and timers are served when nobody
  receives) and hands it back at once when a client wants it (the client rings the
  subscription's doorbell to wake it).
* Connecting never blocks anybody: see :mod:`~exon.middleware.node_connections`.

Which driver a node uses (``Node(driver=...)``): see :mod:`exon.middleware.node_driver`.

A node on a driver that dies (killed, stopped) learns it from its Aeron client (the
driver's pid gone, or its heartbeat older than the driver timeout) and breaks every link:
blocked callers wake with :class:`~exon.errors.BrokenLink`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from exon import errors
from exon.core import (
    CookieLost,
    CookieReturned,
    CreditAvailable,
    ErrorReceived,
    LinkClosed,
    LinkEstablished,
    LinkRefused,
    LinkSettings,
    MessageReceived,
    PeerId,
    SocketCore,
)
from exon.core.address import Peer, split_address
from exon.middleware.fastpath import FLOW_CREDIT, HEADER_LENGTH, FastLinks
from exon.middleware.hosted import HostedSocket, make_socket
from exon.middleware.node_connections import CONNECT_TIMEOUT, NodeConnections
from exon.middleware.node_counters import PUBLISH_INTERVAL, NodeCounters, statistics_of
from exon.middleware.node_driver import DRIVER_CHOICES, EMBEDDED_DRIVER_DEFAULTS, choose_driver
from exon.middleware.node_transport import (
    NODE_DIR_PREFIX,
    NodeTransport,
    sweep_stale_node_dirs,
)
from exon.middleware.socket_host import SocketHost
from exon.native import node_lock
from exon.transport.aeron import (
    Aeron,
    MediaDriver,
)
from exon.transport.aeron.settings import driver_dir_base, fresh_driver_dir

# DRIVER_CHOICES and EMBEDDED_DRIVER_DEFAULTS live in exon.middleware.node_driver,
# CONNECT_TIMEOUT in exon.middleware.node_connections
__all__ = ["CLIENT_SPIN", "CONNECT_TIMEOUT", "DISPATCH_GRACE", "DRIVER_CHOICES",
           "EMBEDDED_DRIVER_DEFAULTS", "Node"]

log = logging.getLogger("exon.node")

_DRIVER_CHECK_INTERVAL = 0.05  #: seconds between two looks at the Aeron client's health

DISPATCH_GRACE = 0.002  #: seconds without a client poll before the dispatcher polls
_DISPATCH_SLICE = 0.05  #: longest futex sleep of the dispatcher
_WAIT_SLICE = 0.05  #: longest condition wait of a follower before it re-checks
_POLL_LIMIT = 256
#: seconds a REQ/REP receiver that leads the polling spins (CPU pause, no syscall) before
#: it parks in the futex: an answer within it costs neither side a futex wake. Streaming
#: waits (PULL, credit) do not spin: parking lets the batch grow, which is cheaper per message
CLIENT_SPIN = 0.00005

_DISPATCHER = -1
_FLOW_CREDIT = FLOW_CREDIT  # exon_lt_desc_t.link of a FLOW that gave credit back to link i:
# _FLOW_CREDIT - i (a FLOW applied natively otherwise is FLOW_DONE)


def _monotonic() -> float:
    return time.monotonic()


class Node(NodeConnections):
    """An exon node: ``Node(endpoint="127.0.0.1:0")``; see :mod:`exon.middleware.node`.

    ``endpoint`` is ``"HOST:PORT"`` (port 0: pick a free one); :attr:`address` is the
    address peers link to. ``driver``: ``"auto"`` (the default, or ``$EXON_NODE_DRIVER``:
    the host driver if one is live, else an embedded one), ``"embedded"``, ``"shared"``
    (the host driver or :class:`~exon.errors.DriverUnavailable`) or a driver directory;
    ``driver_dir=DIR`` is the same as ``driver=DIR``. ``driver_options``:
    :class:`~exon.transport.aeron.DriverSettings` fields for an embedded driver.
    ``settings``: the core's :class:`~exon.core.LinkSettings` (credits, retry, ...).
    """

    def __init__(
        self,
        endpoint: str = "127.0.0.1:0",
        *,
        driver: str | None = None,
        driver_dir: str | None = None,
        settings: LinkSettings | None = None,
        driver_options: dict[str, Any] | None = None,
        udp: bool = True,
        seed: int | None = None,
    ) -> None:
        host, port = split_address(endpoint, what="endpoint")
        self._rng = random.Random(seed)
        self._driver: MediaDriver | None = None
        self._aeron: Aeron | None = None
        self._transport: NodeTransport | None = None
        self._owned_dir: str | None = None
        self._closed = False
        self._driver_failure: errors.ExonError | None = None
        self._next_driver_check = 0.0
        driver_dir, self.driver_kind = choose_driver(driver, driver_dir)
        try:
            if driver_dir is not None and self.driver_kind == "host":
                try:
                    self._aeron = Aeron.connect(driver_dir)
                except errors.ExonError as exc:  # it died between the probe and now
                    log.warning("the host driver in %s did not answer (%s); this node "
                                "embeds a driver of its own", driver_dir, exc)
                    driver_dir, self.driver_kind = None, "embedded"
            if driver_dir is None:
                sweep_stale_node_dirs(driver_dir_base())  # what killed nodes left behind
                directory = fresh_driver_dir(f"{NODE_DIR_PREFIX}-{os.getpid()}")
                options = {**EMBEDDED_DRIVER_DEFAULTS, **(driver_options or {})}
                options.setdefault("dir_delete_on_shutdown", True)
                self._driver = MediaDriver.launch(dir=directory, **options)
                self._owned_dir = directory
                driver_dir = directory
            if self._aeron is None:
                self._aeron = Aeron.connect(driver_dir)
            invoker = (self._driver.handle if self._driver is not None and self._driver.invoker
                       else None)
            self._transport = NodeTransport(self._aeron, host=host, port=port, rng=self._rng,
                                            udp=udp, invoker=invoker)
        except BaseException:
            self._release_transport()
            raise
        self.driver_dir = driver_dir
        self.address: str = self._transport.address
        self.node_id = uuid.UUID(int=self._rng.getrandbits(128)).hex
        publications = self._transport.publications
        self._fast = FastLinks(publications.get, public_peer=lambda peer: self._peer(peer))
        self._poller = self._fast.poller(_POLL_LIMIT)
        self._core = SocketCore(node_id=self.node_id, reply_address=self.address,
                                settings=settings, rng=self._rng, accelerator=self._fast)
        self._fast.set_flow_delay(self._core.settings.flow_delay)  # FLOW timers stay native
        self._lock = node_lock()  # shared with the sockets' native doors (exon_fast.c)
        self._dispatch_cond = threading.Condition(self._lock)
        self._sockets: dict[int, HostedSocket] = {}
        self._next_tag = 1 << 31
        self._role: int | None = None  # thread ident holding the poll role
        self._role_waiters: list[threading.Condition] = []
        self._last_client_poll = 0.0
        #: asyncio tasks waiting on this node's sockets: the dispatcher polls for them
        self._async_waiters = 0
        self._async_sockets: set[HostedSocket] = set()  # the sockets they wait on
        self._init_connections()
        self._touched: set[HostedSocket] = set()
        self._peer_cache: dict[PeerId, Any] = {}
        #: the statistics as counters in the driver's CnC (``exon stat``)
        self._counters = NodeCounters(self._aeron, node_id=self.node_id, address=self.address)
        self._next_publish = 0.0
        #: what the sockets use of this node (:mod:`exon.middleware.socket_host`)
        self.socket_host = SocketHost(
            lock=self._lock, core=self._core, fast=self._fast, backlog=self._backlog,
            wait_until=self._await, pump=self._pump_locked, flush=self._flush_fast,
            open_socket=self._open_socket, close_socket=self._forget_socket, peer=self._peer,
            async_waiting=self._async_waiting)
        self._dispatcher = threading.Thread(target=self._dispatch_loop,
                                            name=f"exon-node-{self.address}", daemon=True)
        self._dispatcher.start()

    # ==== public ============================================================================

    @property
    def udp_enabled(self) -> bool:
        """Whether the node also receives over UDP (from nodes of other drivers), not only over
        IPC."""
        return self._transport is not None and self._transport.udp_enabled

    def socket(self, type: str, tag: int | None = None, **options: Any) -> Any:
        """A new socket of ``type`` ("req", "rep", "push", "pull", "dealer", "router",
        "pub", "sub") on this node: an :class:`exon.Socket` subclass."""
        return make_socket(self, type, tag, options)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def statistics(self) -> Any:
        """An immutable snapshot of the node's core counters (frames, links, cookies, refusals,
        drops): a ``CoreStatistics``. The same figures are in the driver's CnC file as exon
        counters, for ``exon stat`` (refreshed every :data:`PUBLISH_INTERVAL` seconds and
        by this call)."""
        with self._lock:
            stats = self._core.statistics()
            self._publish_counters(stats)
            return stats

    def _publish_counters(self, core_statistics: Any = None, *, now: float | None = None) -> None:
        """Copy the statistics into the node's CnC counters (lock held)."""
        self._next_publish = (_monotonic() if now is None else now) + PUBLISH_INTERVAL
        counters = getattr(self, "_counters", None)
        if counters is None or not len(counters):
            return
        stats = self._core.statistics() if core_statistics is None else core_statistics
        counters.publish(statistics_of(stats, frames_dropped=self.frames_dropped,
                                       connects_failed=self.connects_failed))

    def close(self, timeout: float = 5.0) -> None:
        """Close every socket gracefully (bounded by ``timeout``), then the transport and
        the embedded driver. Idempotent."""
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise errors.ArgumentTypeError(
                f"timeout must be a number of seconds, not {type(timeout).__name__}")
        if not timeout >= 0:  # negative, or nan
            raise errors.ConfigurationError(f"timeout must be >= 0, not {timeout!r}")
        if self._closed:
            return
        deadline = _monotonic() + min(timeout, 1e9)
        for sock in list(self._sockets.values()):
            with contextlib.suppress(errors.ExonError):
                sock.close(timeout=max(0.0, deadline - _monotonic()))
        with self._lock:
            self._closed = True
            self._close_doors()
            self._dispatch_cond.notify_all()
            for sock in list(self._sockets.values()):
                sock._cond.notify_all()
                sock._wake_async()
        if self._transport is not None:
            self._transport.wake()
        if self._dispatcher is not threading.current_thread():
            self._dispatcher.join(timeout=2.0)
        # wait for a client thread still holding the poll role to let it go
        end = _monotonic() + 2.0
        while self._role is not None and _monotonic() < end:
            if self._transport is not None:
                self._transport.wake()
            time.sleep(0.001)
        self._release_transport()

    def _release_transport(self) -> None:
        counters = getattr(self, "_counters", None)
        if counters is not None:
            with getattr(self, "_lock", contextlib.nullcontext()):
                counters.close()  # the driver frees them with the Aeron client, below
        fast = getattr(self, "_fast", None)
        if fast is not None:
            with getattr(self, "_lock", contextlib.nullcontext()):
                self._close_doors()
                fast.close()
        for pub in [p for p, _deadline in getattr(self, "_pending", {}).values()] + getattr(
                self, "_to_close", []):
            with contextlib.suppress(errors.ExonError):
                pub.close()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._aeron is not None:
            with contextlib.suppress(errors.ExonError):
                self._aeron.close()
            self._aeron = None
        if self._driver is not None:
            with contextlib.suppress(errors.ExonError):
                self._driver.close()
            self._driver = None
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None

    def _close_doors(self) -> None:
        """From now on the sockets' native doors hand every call to the Python methods
        (lock held): the link table is about to go."""
        close = getattr(getattr(self, "_lock", None), "close_doors", None)
        if close is not None:
            close()

    def _client_activity(self) -> int:
        """Client calls so far (Python paths and native doors): the dispatcher stays off
        while it moves."""
        return self.socket_host.activity + getattr(self._lock, "activity", 0)

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<exon.Node {self.address}{' closed' if self._closed else ''}>"

    # ==== sockets (exon.sockets reaches these through self.socket_host) ====================

    def _open_socket(self, sock: HostedSocket, socket_type: str, tag: int | None,
                     core_options: dict[str, Any]) -> tuple[int, int]:
        with self._lock:
            if self._closed:
                raise errors.ClosedError("the node is closed")
            if tag is None:
                while self._core.has_socket(self._next_tag) or self._next_tag in self._sockets:
                    self._next_tag += 1
                tag = self._next_tag
                self._next_tag += 1
            elif tag in self._sockets:
                raise errors.ConfigurationError(f"a socket with tag {tag} is already open")
            self._core.open_socket(tag, socket_type, **core_options)
            self._sockets[tag] = sock
            return tag, self._fast.open_socket(tag)

    def _forget_socket(self, tag: int) -> None:
        self._sockets.pop(tag, None)
        self._fast.close_socket(tag)

    def _async_waiting(self, sock: HostedSocket, delta: int, waiting: bool) -> None:
        """``delta`` asyncio tasks start or stop waiting on ``sock`` (lock held); the
        dispatcher polls for their loops while any waits."""
        self._async_waiters += delta
        if waiting:
            self._async_sockets.add(sock)
        else:
            self._async_sockets.discard(sock)
        if delta > 0:
            self._dispatch_cond.notify_all()  # the dispatcher polls for the loop

    def _peer(self, peer_id: PeerId) -> Any:
        peer = self._peer_cache.get(peer_id)
        if peer is None:

            try:
                host, port = split_address(peer_id.address)
                peer = Peer(host, port, peer_id.tag)
            except errors.ConfigurationError:
                peer = None
            if len(self._peer_cache) > 4096:
                self._peer_cache.clear()
            self._peer_cache[peer_id] = peer
        return peer

    # ==== the engine (lock held unless said otherwise) ======================================

    def _pump_locked(self) -> None:
        """Hand the core's events to the sockets and its frames to the transport, until
        both are empty; then notify the sockets that got something."""
        core = self._core
        if not core._out and not core._events and not self._lost:
            self._notify_touched()
            return
        for _ in range(64):
            events = core.events()
            if events:
                self._dispatch_events(events)
            frames = core.frames_to_send()
            if frames:
                self._send_frames(frames)
            if self._lost:
                lost, self._lost = self._lost, set()
                now = _monotonic()
                for address in lost:
                    self._drop_peer(address)
                    core.peer_gone(address, now=now)
                continue
            if not events and not frames:
                break
        self._notify_touched()

    def _notify_touched(self) -> None:
        """Wake the threads waiting on the sockets that got something."""
        touched = self._touched
        if touched:
            self._touched = set()
            for sock in touched:
                cond = sock._cond
                if cond._waiters:  # type: ignore[attr-defined]
                    cond.notify_all()
                if sock._aio_wakers:  # asyncio tasks wait on it (exon.sockets.aio)
                    sock._wake_async()

    def _flush_fast(self) -> None:
        """After a send or a delivery: send the core's frames; pump fully only when the
        core also produced events (the common case has none)."""
        core = self._core
        if not core._out and not core._events and not self._lost:
            return
        frames = core.frames_to_send()
        if frames:
            self._send_frames(frames)
        ev = core.next_event()
        if ev is not None:
            self._dispatch_events([ev])
            self._pump_locked()
        elif self._lost:
            self._pump_locked()

    def _dispatch_events(self, events: list[Any]) -> None:
        sockets = self._sockets
        touched = self._touched
        for ev in events:
            sock = sockets.get(ev.tag)
            if sock is None:
                continue
            cls = type(ev)
            if cls is MessageReceived:
                sock._on_message(ev)
            elif cls is CookieReturned:
                sock._on_cookie(ev.cookie, lost=False)
            elif cls is CookieLost:
                sock._on_cookie(ev.cookie, lost=True)
            elif cls is CreditAvailable:
                pass
            elif cls is LinkEstablished:
                sock._on_established(ev)
            elif cls is LinkRefused:
                sock._on_refused(ev)
            elif cls is LinkClosed:
                sock._on_closed(ev)
            elif cls is ErrorReceived:
                sock._on_error(ev)
            touched.add(sock)

    def _process_native(self, n: int, left: int, slots: list[int], gone: list[str]) -> int:
        """Hand out a polled batch (its fast DATA is in the sockets' native queues already):
        wake the sockets touched, every other frame to the core, in order. Lock held."""
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
                            sock._on_fast(token, data[off + head : off + ints[k + 3]])
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
                                self._poller.set_key(image, self._fast.key_of(address))
                                addresses[image] = address
                            continue
                        addresses[image] = address
                    channel = channels.get(image)
                    if channel is None:
                        channel = channels[image] = transport.image_channel(image)
                    receive(address, frame, now=now, channel=channel)
        for address in gone:
            self._drop_peer(address)
            core.peer_gone(address, now=now)
        if transport is not None and transport.gone_channels:
            self._channels_gone(now)
        due = core.next_timer()
        if due is not None and due <= now:
            core.handle_timer(now=now)
        if self._backlog:
            self._retry_backlog()
        self._pump_locked()
        return count + len(gone)

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

    def _poll_once(self) -> int:
        """Poll the transport once (lock held on entry and exit, released while polling)."""
        transport = self._transport
        if transport is None:
            return 0
        transport.invoke()  # INVOKER: receive (and send) now, not at the agent's next cycle
        gone = transport.refresh(self._poller, self._fast.key_of)
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
            return self._process_native(n, left, slots, gone)
        now = _monotonic()
        if now >= self._next_publish:  # the CnC counters, on a clock read made anyway
            self._publish_counters(now=now)
        if now >= self._next_driver_check:
            self._next_driver_check = now + _DRIVER_CHECK_INTERVAL
            if self._driver_failure is None and self._check_driver():
                return 1
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
        self._lock.release()
        try:
            transport.wait(timeout, spin)
        finally:
            self._lock.acquire()

    def _await(self, cond: threading.Condition, ready: Callable[[], bool],
               deadline: float | None, spin: float = 0.0) -> bool:
        """Wait (lock held) until ``ready()``; True, or False at ``deadline``. Polls the
        transport itself when the poll role is free (leader/follower); as the leader it
        spins ``spin`` seconds before each futex sleep (request/reply waits)."""
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
                if self._role is not None or self._role_waiters or (busy and not
                                                                    self._async_waiters):
                    seen = activity
                    self._dispatch_cond.wait(DISPATCH_GRACE * 2)
                    continue
                self._role = _DISPATCHER
                try:
                    while not self._closed and not self._role_waiters:
                        try:
                            n = self._poll_once()
                        except errors.ExonError:
                            n = 0  # a transport hiccup: keep serving
                        if n == 0 and not self._role_waiters and not self._closed:
                            self._sleep_locked(_DISPATCH_SLICE)
                finally:
                    self._role = None
                    if self._role_waiters:
                        self._role_waiters[0].notify_all()
                self._last_client_poll = _monotonic()
