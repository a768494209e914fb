"""A Node's connections to peer nodes: one publication per peer node, made without waiting.

Connecting never blocks anybody: a publication towards a new peer node is created
outside the lock (one driver round trip, no wait for the peer), then the node's polling
checks, without waiting, whether the peer's driver answered and sends HELLO. Frames for
such a peer wait in a bounded per-peer backlog meanwhile, in order. A peer that does not
answer within :data:`CONNECT_TIMEOUT` is unreachable: its frames are dropped (counted,
``frames_dropped``), its links break or their handshakes count as temporary refusals
(the core retries them), and the address is not tried again before a back-off (from
0.25 s, doubling, up to 5 s) -- frames for it meanwhile are dropped the same way.

A frame longer than the publication's largest message (an eighth of its term) leaves as
node-protocol FRAGMENTs, in order (docs/protocol.md 2.14), each offered as two pieces (its
16-byte header and a view of the frame: no chunk is built). Back pressure in the middle
puts the frame, with the offset reached, into the address's backlog (a PendingFragments:
the chunks left are cut as they go out); a frame that waits in the backlog is cut when its
turn comes (the limit is known once the publication is). The chunks of one frame
stay contiguous among the DATA on the publication: every frame the Python path sends to
an address with a backlog is appended behind it (:meth:`_send_frames`), and the native
doors (PUSH/REQ/...: ``exon_fast.c``, ``exon_fast_peers.c``; PUB: ``exon_fast_pubsub.c``)
send nothing while ANY backlog exists (they check ``PyDict_GET_SIZE(backlog) == 0``
under the node's lock, which this code holds). Only FLOWs that the link table offers
natively (``exon_lt_deliver``, ``flush_flows``) may land between two chunks; the
receiver passes non-fragment frames through while an assembly is in progress, and FLOW
is order-insensitive (absolute credit, applied with max).

:class:`NodeConnections` is a part of :class:`~exon.middleware.node.Node` (a base class
of it): the connection state, and the methods that send the core's frames through it.
Every method runs with the node's lock held unless it says otherwise.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from typing import Any

from exon import errors
from exon.middleware.node_transport import (
    _OFFER_SPINS,
    ConnectBackoff,
    NodeTransport,
    PendingFragments,
)
from exon.transport.aeron import ADMIN_ACTION, BACK_PRESSURED
from exon.transport.aeron.layout import (
    DATA_HEADER_LENGTH,
    SETUP_LENGTH,
    TERM_MIN_LENGTH,
    max_message_length,
)

__all__ = ["CONNECT_TIMEOUT", "NodeConnections"]

CONNECT_TIMEOUT = 1.0  #: seconds a new peer node's driver has to answer our publication
_CONNECTS_PENDING = 64  #: connections in progress at once; more addresses: dropped, counted
_CONNECT_BACKLOG = 4096  #: frames that may wait for one connection; more: the peer is lost
#: what a UDP stream sends its address each SETUP interval while the peer's driver has not
#: answered: a SETUP and a heartbeat (docs/protocol.md 2.6.1: counted against the
#: anti-amplification limit of an unvalidated address)
CONNECT_ROUND_BYTES = SETUP_LENGTH + DATA_HEADER_LENGTH
#: seconds between those rounds when the node cannot read its driver's settings (an
#: external driver): Aeron's default setup and heartbeat intervals
_DEFAULT_ROUND = 0.1
#: the largest message of the shortest term (64 KiB / 8): a frame up to this long fits
#: every publication, and only longer ones are measured against theirs
_FITS_ANY = max_message_length(TERM_MIN_LENGTH)


def _needs_fragments(frame: bytes, pub: Any) -> bool:
    """True if ``frame`` is longer than ``pub``'s largest message (only frames above the
    shortest term's largest are measured against it)."""
    return len(frame) > _FITS_ANY and len(frame) > pub.max_message_length


def _monotonic() -> float:
    return time.monotonic()


class NodeConnections:
    """The connection side of a Node: backlogs, connections in progress, back-off."""

    #: peer nodes that did not answer within :data:`CONNECT_TIMEOUT`
    connects_failed: int
    #: frames for unreachable peer nodes (dropped, counted)
    frames_dropped: int
    #: old streams retired early: quiet while a newer one came from their address (2.7)
    streams_retired: int

    # the node's own, used here
    _lock: Any
    _core: Any
    _closed: bool
    _transport: NodeTransport | None

    def _init_connections(self) -> None:
        #: frames refused by back pressure or waiting for a connection, in order, per
        #: address; a long frame whose FRAGMENTs are under way is a PendingFragments
        self._backlog: dict[str, deque[bytes | PendingFragments]] = {}
        self._to_connect: set[str] = set()  # addresses whose publication must be created
        self._pending: dict[str, tuple[Any, float]] = {}  # address -> (publication, deadline)
        self._to_close: list[Any] = []  # publications to close outside the lock
        self._backoff = ConnectBackoff()
        self._connecting = threading.Lock()
        self.connects_failed = 0  #: peer nodes that did not answer in CONNECT_TIMEOUT
        self._lost: set[str] = set()
        self.frames_dropped = 0  #: frames for unreachable peer nodes
        #: old streams of an address found quiet once a newer one came from it (its node
        #: restarted there): retired before their liveness timeout (2.7)
        self.streams_retired = 0
        self._restart_suspects: dict[tuple[str, int], float] = {}  # -> watched until
        self._next_suspect_check = 0.0

    def _pump_locked(self) -> None:
        """The node's (:meth:`Node._pump_locked`): hand out the core's events and frames."""
        raise NotImplementedError

    def _send_frames(self, frames: list[tuple[str, bytes]]) -> None:
        transport = self._transport
        if transport is None:
            return
        pubs = transport.publications
        backlog = self._backlog
        offer = transport.offer
        for address, data in frames:
            pub = pubs.get(address)
            if pub is None or address in backlog:
                if address in self._lost:
                    self.frames_dropped += 1
                    continue
                if pub is None:
                    queue = backlog.get(address)
                    if queue is None:
                        if not self._want_connection(address):
                            self.frames_dropped += 1
                            self._lost.add(address)  # handshakes with it: temporary refusal
                            continue
                        queue = backlog[address] = deque()
                    elif len(queue) >= _CONNECT_BACKLOG:
                        self.frames_dropped += 1
                        self._lost.add(address)
                        continue
                    queue.append(data)
                    continue
                backlog[address].append(data)
                continue
            item: bytes | PendingFragments = data
            if _needs_fragments(data, pub):
                # FRAGMENTs, each a header and a view of data (no chunk is built); when back
                # pressure refuses one, the rest wait in the backlog as one entry
                item = PendingFragments(data)
                rc = item.offer(pub, pub.max_message_length, _OFFER_SPINS)
            else:
                rc = offer(pub, data)
            if rc < 0:
                if rc in (BACK_PRESSURED, ADMIN_ACTION):
                    backlog.setdefault(address, deque()).append(item)
                else:  # NOT_CONNECTED, CLOSED, MAX_POSITION_EXCEEDED: the peer is gone
                    self.frames_dropped += 1
                    self._lost.add(address)

    def _retry_backlog(self) -> None:
        transport = self._transport
        if transport is None or not self._backlog:
            return
        for address in list(self._backlog):
            pub = transport.publications.get(address)
            if pub is None:
                continue
            queue = self._backlog[address]
            while queue:
                head = queue[0]
                if isinstance(head, PendingFragments):
                    rc = head.offer(pub, pub.max_message_length)
                elif _needs_fragments(head, pub):
                    # a frame that waited for its publication: its FRAGMENTs take its place
                    queue[0] = PendingFragments(head)
                    continue
                else:
                    rc = pub.offer(head)
                if rc < 0:
                    if rc not in (BACK_PRESSURED, ADMIN_ACTION):
                        self._lost.add(address)
                    break
                queue.popleft()
            if not queue:
                del self._backlog[address]

    def _drop_peer(self, address: str) -> None:
        dropped = self._backlog.pop(address, None)
        if dropped:
            self.frames_dropped += len(dropped)
        self._to_connect.discard(address)
        pending = self._pending.pop(address, None)
        if pending is not None:
            self._to_close.append(pending[0])
        if self._transport is not None:
            self._transport.drop_publication(address)

    def _want_connection(self, address: str) -> bool:
        """Frames wait for a connection to ``address``: ask for one. False: the address is
        in its back-off, or too many connections are in progress (drop the frames)."""
        if address in self._pending or address in self._to_connect:
            return True
        if len(self._backoff) and self._backoff.blocked(address, _monotonic()):
            return False
        if len(self._pending) + len(self._to_connect) >= _CONNECTS_PENDING:
            return False
        self._to_connect.add(address)
        return True

    def _connect_pending(self) -> None:
        """Create the publications asked for and close the ones given up (lock NOT held):
        driver round trips only, never a wait for a peer. One thread at a time."""
        if not self._connecting.acquire(blocking=False):
            return
        try:
            with self._lock:
                transport = self._transport
                if transport is None or self._closed:
                    return
                todo = [a for a in self._to_connect
                        if a not in transport.publications and a not in self._pending]
                self._to_connect.clear()
                closing, self._to_close = self._to_close, []
            for pub in closing:
                with contextlib.suppress(errors.ExonError):
                    pub.close()
            if not todo:
                return
            with self._lock:
                windows = {address: self._connect_window(address) for address in todo}
                now = _monotonic()
                for address in [a for a, window in windows.items() if window is None]:
                    self._connect_failed(address, now)  # not one SETUP fits: not tried
                    todo.remove(address)
            started = [(address, transport.start_connect(address)) for address in todo]
            with self._lock:
                now = _monotonic()
                for address, pub in started:
                    if pub is None:
                        self._connect_failed(address, now)
                    elif self._transport is None or address not in self._backlog:
                        self._to_close.append(pub)  # closed, or nobody waits for it now
                    else:
                        self._pending[address] = (pub, now + (windows[address] or 0.0))
                if any(window is None for window in windows.values()):
                    self._pump_locked()  # the frames dropped: their links learn it
                self._progress_connections(now)
                self._pump_locked()
        finally:
            self._connecting.release()

    def _connect_window(self, address: str) -> float | None:
        """Seconds a connection attempt to ``address`` may wait for the peer's driver:
        :data:`CONNECT_TIMEOUT`, or less when the address is not validated (2.6.1) and 3x
        what came from it does not cover the SETUP rounds of a whole attempt; None when
        not one round fits (no attempt: counted held by the core). Lock held."""
        transport = self._transport
        if transport is None or not transport.sends_setups(address):
            return CONNECT_TIMEOUT  # IPC: no SETUP goes anywhere
        interval = self._round_interval()
        rounds = int(CONNECT_TIMEOUT / interval + 1e-9) + 1  # one at 0, then each interval
        granted: int = self._core.reserve_unvalidated(address, CONNECT_ROUND_BYTES, rounds)
        if granted == 0:
            return None
        # rounds go out at 0, interval, ...: given up half an interval after the last paid
        return (granted - 0.5) * interval

    def _round_interval(self) -> float:
        """Seconds between the SETUP rounds of this node's driver (the shorter of its
        setup and heartbeat intervals: each round is counted as both)."""
        driver = getattr(self, "_driver", None)
        settings = getattr(driver, "settings", None)
        if settings is None:
            return _DEFAULT_ROUND
        shortest: int = min(settings.setup_interval_ns, settings.heartbeat_interval_ns)
        return shortest / 1e9

    def _connect_failed(self, address: str, now: float) -> None:
        self.connects_failed += 1
        self._backoff.failed(address, now)
        self._lost.add(address)

    def _progress_connections(self, now: float) -> None:
        """Move the connections whose peer answered to the publications (HELLO sent, their
        backlog offered); give up those past their deadline. Never waits. Lock held."""
        transport = self._transport
        if transport is None:
            return
        ready = False
        for address, (pub, deadline) in list(self._pending.items()):
            if transport.finish_connect(pub):
                del self._pending[address]
                self._backoff.succeeded(address)
                transport.publications[address] = pub
                ready = True
            elif now >= deadline:
                del self._pending[address]
                self._to_close.append(pub)
                self._connect_failed(address, now)
        if ready:
            self._retry_backlog()
