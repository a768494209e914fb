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
* Leader/follower polling and the dispatcher thread: the node's
  :class:`~exon.middleware.node_polling.PollLoop`.
* Connecting never blocks anybody: the node's
  :class:`~exon.middleware.node_connections.Connections`.

The Node is the composition root: it builds its collaborators and hands each explicit
references to what it needs (no base classes; docs/internals.md draws them). It owns the
driver, the Aeron client and the transport, the core, the fast path (``FastLinks``), the
socket registry, the CnC counters, and the engine that hands the core's events to the
sockets and its frames to the connections (``_pump_locked``, ``_flush_fast``).

Which driver a node uses (``Node(driver=...)``): see :mod:`exon.middleware.node_driver`;
what happens when it dies: :mod:`~exon.middleware.node_polling`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import shutil
import threading
import time
import uuid
from typing import Any

from exon import errors
from exon.core import (
    CookieLost,
    CookieReturned,
    CoreStatistics,
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
from exon.core.frames import HEADER_LENGTH
from exon.middleware.fastpath import FastLinks
from exon.middleware.frame_assembly import FrameAssembler
from exon.middleware.hosted import HostedSocket, make_socket
from exon.middleware.node_connections import CONNECT_TIMEOUT, Connections, round_interval
from exon.middleware.node_counters import NodeCounters, statistics_of
from exon.middleware.node_driver import (
    DRIVER_CHOICES,
    EMBEDDED_DRIVER_DEFAULTS,
    check_dir_prefix,
    choose_driver,
    sweep_stale_driver_dirs,
)
from exon.middleware.node_metrics import (
    MetricKind,
    NodeMetric,
    SocketMetrics,
    metric_samples,
    socket_figures,
)
from exon.middleware.node_polling import CLIENT_SPIN, DISPATCH_GRACE, PollLoop
from exon.middleware.node_transport import (
    NODE_DIR_PREFIX,
    NodeTransport,
)
from exon.middleware.socket_host import SocketHost
from exon.native import node_lock
from exon.transport.aeron import (
    Aeron,
    MediaDriver,
)
from exon.transport.aeron.settings import fresh_driver_dir

# DRIVER_CHOICES and EMBEDDED_DRIVER_DEFAULTS live in exon.middleware.node_driver,
# CONNECT_TIMEOUT in exon.middleware.node_connections, CLIENT_SPIN and DISPATCH_GRACE in
# exon.middleware.node_polling
__all__ = ["CLIENT_SPIN", "CONNECT_TIMEOUT", "DISPATCH_GRACE", "DRIVER_CHOICES",
           "EMBEDDED_DRIVER_DEFAULTS", "Node", "NodeStatistics"]

log = logging.getLogger("exon.node")

_POLL_LIMIT = 256  #: frames one native poll hands out at most


def _monotonic() -> float:
    return time.monotonic()


@dataclasses.dataclass(frozen=True, slots=True)
class NodeStatistics(CoreStatistics):
    """:meth:`Node.statistics`: the core's counters and what the node's sockets hold."""

    #: payload bytes received and not yet taken by the application (walks the queues):
    #: within ``LinkSettings.memory_budget`` plus one message per link
    queued_bytes: int


class Node:
    """An exon node: ``Node(endpoint="127.0.0.1:0")``; see :mod:`exon.middleware.node`.

    ``endpoint`` is ``"HOST:PORT"`` (port 0: pick a free one); :attr:`address` is the
    address peers link to. ``driver``: ``"auto"`` (the default, or ``$EXON_NODE_DRIVER``:
    the host driver if one is live, else an embedded one), ``"embedded"``, ``"shared"``
    (the host driver or :class:`~exon.errors.DriverUnavailable`) or a driver directory;
    ``driver_dir=DIR`` is the same as ``driver=DIR``. ``driver_options``:
    :class:`~exon.transport.aeron.DriverSettings` fields for an embedded driver;
    ``driver_dir_prefix``: its directory's name, ``PREFIX-<pid>-<random>`` (those of the
    prefix whose process is gone are removed first; see :mod:`exon.middleware.node_driver`).
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
        driver_dir_prefix: str = NODE_DIR_PREFIX,
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
        driver_dir, self.driver_kind = choose_driver(driver, driver_dir)
        check_dir_prefix(driver_dir_prefix)
        try:
            if driver_dir is not None and self.driver_kind == "host":
                try:
                    self._aeron = Aeron.connect(driver_dir)
                except errors.ExonError as exc:  # it died between the probe and now
                    log.warning("the host driver in %s did not answer (%s); this node "
                                "embeds a driver of its own", driver_dir, exc)
                    driver_dir, self.driver_kind = None, "embedded"
            if driver_dir is None:
                sweep_stale_driver_dirs(driver_dir_prefix)  # what killed nodes left behind
                directory = fresh_driver_dir(f"{driver_dir_prefix}-{os.getpid()}")
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
        self._fast = FastLinks(publications.get)
        self._poller = self._fast.poller(_POLL_LIMIT)
        self._core = SocketCore(node_id=self.node_id, reply_address=self.address,
                                settings=settings, rng=self._rng, accelerator=self._fast)
        self._fast.set_flow_delay(self._core.settings.flow_delay)  # FLOW timers stay native
        # the core's output, bound once: the engine tests them after every send and delivery
        self._core_frames = self._core.outbox.frames
        self._core_events = self._core.outbox.events
        self._lock = node_lock()  # shared with the sockets' native doors (exon_fast.c)
        self._sockets: dict[int, HostedSocket] = {}
        self._next_tag = 1 << 31
        self._connections = Connections(lock=self._lock, core=self._core,
                                        transport=self._transport, pump=self._pump_locked,
                                        round_interval=round_interval(self._driver))
        # bound once: the engine below uses them per send and delivery
        self._lost = self._connections.lost
        self._send_frames = self._connections.send_frames
        #: FRAGMENTs back into frames; a frame may be as long as the largest
        #: max_message_size of a socket the node opened (never lowered: a closing socket
        #: may still receive) plus the exon header
        self._assembler = FrameAssembler(
            max_total=HEADER_LENGTH + self._core.settings.max_message_size)
        self._touched: set[HostedSocket] = set()  # the same set for the node's life
        self._peer_cache: dict[PeerId, Any] = {}
        #: the statistics as counters in the driver's CnC (``exon stat``)
        self._counters = NodeCounters(self._aeron, node_id=self.node_id, address=self.address)
        #: each socket's metrics in the CnC (exon.middleware.node_metrics), by tag
        self._socket_metrics: dict[int, SocketMetrics] = {}
        #: who polls the transport and how the others wait
        self._poll = poll = PollLoop(
            address=self.address, lock=self._lock, aeron=self._aeron, core=self._core,
            fast=self._fast, poller=self._poller, assembler=self._assembler,
            transport=self._transport, connections=self._connections, sockets=self._sockets,
            touched=self._touched, pump=self._pump_locked, notify_touched=self._notify_touched,
            publish_counters=self._publish_counters, client_activity=self._client_activity)
        #: what the sockets use of this node (:mod:`exon.middleware.socket_host`)
        self.socket_host = SocketHost(
            lock=self._lock, core=self._core, fast=self._fast,
            backlog=self._connections.backlog, wait_until=poll.wait_until,
            pump=self._pump_locked, flush=self._flush_fast, open_socket=self._open_socket,
            close_socket=self._forget_socket, peer=self._peer,
            async_waiting=poll.async_waiting, loop_polling=poll.loop_polling)
        self._dispatcher = threading.Thread(target=poll.dispatch_loop,
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
    def link_settings(self) -> LinkSettings:
        """The :class:`~exon.core.LinkSettings` of this node's links (credits, FLOW
        batching, memory budget, ...): the ``settings`` given, or the defaults."""
        return self._core.settings

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def frames_dropped(self) -> int:
        """Frames for unreachable peer nodes this node dropped (counted, never sent)."""
        return self._connections.frames_dropped

    @property
    def connects_failed(self) -> int:
        """Peer nodes that did not answer within :data:`CONNECT_TIMEOUT`."""
        return self._connections.connects_failed

    @property
    def streams_retired(self) -> int:
        """Old streams retired early: quiet while a newer one came from their address (their
        node restarted there; docs/protocol.md 2.7)."""
        return self._connections.streams_retired

    def poll_once_if_idle(self) -> bool:
        """Lock held: look at the transport once unless another thread holds the poll
        role (a non-blocking receive that found nothing queued). True if it looked."""
        return self._poll.poll_once_if_idle()

    @property
    def fragments_dropped(self) -> int:
        """FRAGMENTs (pieces of frames longer than the transport's largest message) this
        node threw away: malformed, out of order, above its largest ``max_message_size``,
        or of a frame left unfinished by a peer node that went (docs/protocol.md 2.14)."""
        return self._assembler.dropped

    @property
    def malformed_native(self) -> int:
        """Messages the native poll dropped as no exon frame at all (bad version, length,
        protocol or type: docs/protocol.md 2.17), each before any Python saw it; they are
        counted in ``statistics().malformed_dropped`` too."""
        return self._fast.malformed_dropped

    def statistics(self) -> Any:
        """An immutable snapshot of the node's core counters (frames, links, cookies, refusals,
        drops) and the payload bytes its sockets hold (``queued_bytes``, which the memory
        budget bounds): a :class:`NodeStatistics`. The same figures but ``queued_bytes`` are
        in the driver's CnC file as exon counters, for ``exon stat`` (refreshed every
        :data:`PUBLISH_INTERVAL` seconds and by this call)."""
        with self._lock:
            stats = self._core.statistics()
            self._publish_counters(stats)
            queued = sum(sock._queued_bytes() for sock in self._sockets.values())
        fields = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}
        fields["malformed_dropped"] = self._malformed_dropped(stats)
        fields["unopened_dropped"] = self._unopened_dropped(stats)
        return NodeStatistics(**fields, queued_bytes=queued)

    def _malformed_dropped(self, stats: Any) -> int:
        """The core's malformed drops and the native poll's (``malformed_native``)."""
        return int(stats.malformed_dropped) + self._fast.malformed_dropped

    def _unopened_dropped(self, stats: Any) -> int:
        """Sealed frames that did not open: the core's drops and the native classifier's
        (which opens in place and drops there; each frame is counted by one of them)."""
        return int(stats.unopened_dropped) + self._fast.unopened_dropped

    def _publish_counters(self, core_statistics: Any = None) -> None:
        """Copy the statistics into the node's CnC counters (lock held; every
        :data:`PUBLISH_INTERVAL` seconds by the poll loop)."""
        counters = getattr(self, "_counters", None)
        if counters is None or not len(counters):
            return
        stats = self._core.statistics() if core_statistics is None else core_statistics
        counters.publish(self._statistics_of(stats))
        sockets = self._sockets
        for tag, metrics in self._socket_metrics.items():
            sock = sockets.get(tag)
            if sock is not None:
                metrics.publish(socket_figures(self._core, tag, sock))

    def _statistics_of(self, core_statistics: Any) -> dict[str, int]:
        return statistics_of(core_statistics, frames_dropped=self.frames_dropped,
                             connects_failed=self.connects_failed,
                             fragments_dropped=self.fragments_dropped,
                             malformed_dropped=self._malformed_dropped(core_statistics),
                             unopened_dropped=self._unopened_dropped(core_statistics))

    def metrics(self) -> dict[str, list[dict[str, Any]]]:
        """The node's metrics as ``exon stat --serve`` serves them, by Prometheus name:
        ``{"exon_node_frames_received_total": [{"labels": {"node": ADDRESS}, "value": 12}],
        "exon_socket_inbox_messages": [{"labels": {"node": ..., "tag": "5", "type":
        "pull"}, "value": 3}], ...}``: the node statistics (drops in
        ``exon_node_drops_total`` by ``reason``) and per socket its credits available,
        inbox, cookies pending, links and drops by reason
        (:mod:`exon.middleware.node_metrics`). Read now, under the node's lock."""
        with self._lock:
            values = self._statistics_of(self._core.statistics())
            sockets = [(tag, sock.type, socket_figures(self._core, tag, sock))
                       for tag, sock in self._sockets.items()]
        return metric_samples(values, self.address, sockets)

    def add_metric(self, name: str, kind: MetricKind = "gauge", **labels: str) -> NodeMetric:
        """A metric of this node's in its driver's CnC, which ``exon stat --serve`` serves
        with the node's (``name`` is ``exon_...``, ``_total`` for a counter; labels are
        words without spaces): ``m = node.add_metric("exon_app_queue_depth", queue="in");
        m.set(12)``. It goes with the node; :meth:`NodeMetric.close` frees it before.
        Raises ConfigurationError for a bad name or label, DriverError when the driver has
        no counter left."""
        if self._closed or self._aeron is None:
            raise errors.ClosedError("the node is closed")
        return NodeMetric(self._aeron, name, kind, node_id=self.node_id,
                          address=self.address, labels=labels)

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
            self._connections.closed = True
            self._close_doors()
            self._poll.close()
            for sock in list(self._sockets.values()):
                sock.wakeup.notify_all()
                sock.wakeup.wake_loops()
        if self._transport is not None:
            self._transport.wake()
        if self._dispatcher is not threading.current_thread():
            self._dispatcher.join(timeout=2.0)
        # wait for a client thread still holding the poll role to let it go
        end = _monotonic() + 2.0
        while self._poll.role is not None and _monotonic() < end:
            if self._transport is not None:
                self._transport.wake()
            time.sleep(0.001)
        self._release_transport()

    def _release_transport(self) -> None:
        counters = getattr(self, "_counters", None)
        if counters is not None:
            with getattr(self, "_lock", contextlib.nullcontext()):
                counters.close()  # the driver frees them with the Aeron client, below
                getattr(self, "_socket_metrics", {}).clear()
        fast = getattr(self, "_fast", None)
        if fast is not None:
            with getattr(self, "_lock", contextlib.nullcontext()):
                self._close_doors()
                fast.close()
        connections = getattr(self, "_connections", None)
        for pub in connections.publications_left() if connections is not None else []:
            with contextlib.suppress(errors.ExonError):
                pub.close()
        if connections is not None:
            connections.transport = None
        poll = getattr(self, "_poll", None)
        if poll is not None:
            poll.transport = None
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
            size = core_options.get("max_message_size")
            if size is not None:
                self._assembler.max_total = max(self._assembler.max_total, HEADER_LENGTH + size)
            self._sockets[tag] = sock
            slot = self._fast.open_socket(tag)
        counters = getattr(self, "_counters", None)
        if counters is not None and len(counters) and self._aeron is not None:
            # a driver round trip per series: outside the lock, the poll loop goes on
            metrics = SocketMetrics(self._aeron, node_id=self.node_id, address=self.address,
                                    tag=tag, socket_type=socket_type,
                                    drop_reasons=sock._drop_counts())
            with self._lock:
                kept = self._sockets.get(tag) is sock and not self._closed
                if kept:
                    self._socket_metrics[tag] = metrics
            if not kept:
                metrics.release()
        return tag, slot

    def _forget_socket(self, tag: int) -> None:
        self._sockets.pop(tag, None)
        self._fast.close_socket(tag)
        metrics = self._socket_metrics.pop(tag, None)
        if metrics is not None:
            metrics.release()

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
        if not self._core_frames and not self._core_events and not self._lost:
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
                now = _monotonic()
                drop_peer = self._connections.drop_peer
                for address in self._connections.take_lost():
                    drop_peer(address)
                    core.peer_gone(address, now=now)
                continue
            if not events and not frames:
                break
        self._notify_touched()

    def _notify_touched(self) -> None:
        """Wake the threads waiting on the sockets that got something."""
        touched = self._touched
        if touched:
            woken = list(touched)
            touched.clear()  # in place: the poll loop and the dispatch below hold the set
            for sock in woken:
                wakeup = sock.wakeup
                if wakeup.threads or wakeup.loops:  # somebody waits on it
                    wakeup.wake()

    def _flush_fast(self) -> None:
        """After a send or a delivery: send the core's frames; pump fully only when the
        core also produced events (the common case has none)."""
        core = self._core
        if not self._core_frames and not self._core_events and not self._lost:
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
            cls = type(ev)
            if cls is LinkClosed:
                # the peer's public form (a Message's .peer) is made again if still asked for;
                # kept, the entries of peers that linked once would pile up (issue #13: the
                # REQ sockets of every soak round, each a new tag)
                self._peer_cache.pop(ev.peer, None)
            sock = sockets.get(ev.tag)
            if sock is None:
                continue
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

