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
an address with a backlog is appended behind it (:meth:`Connections.send_frames`), and the native
doors (PUSH/REQ/...: ``exon_fast.c``, ``exon_fast_peers.c``; PUB: ``exon_fast_pubsub.c``)
send nothing while ANY backlog exists (they check ``PyDict_GET_SIZE(backlog) == 0``
under the node's lock, which this code holds). Only FLOWs that the link table offers
natively (``exon_lt_deliver``, ``flush_flows``) may land between two chunks; the
receiver passes non-fragment frames through while an assembly is in progress, and FLOW
is order-insensitive (absolute credit, applied with max).

:class:`Connections` is owned by :class:`~exon.middleware.node.Node`: the connection
state (backlogs, connections in progress, back-off, streams of restarted peers), and the
methods that send the core's frames through it. It holds references to the node's lock,
core and transport, and calls the node's ``pump`` after a connection round. Every method
runs with the node's lock held unless it says otherwise.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from exon import errors
from exon.middleware.fastpath import OFFER_SPINS, RETRY
from exon.middleware.node_transport import (
    ConnectBackoff,
    NodeTransport,
    PendingFragments,
)
from exon.transport.aeron.layout import (
    DATA_HEADER_LENGTH,
    SETUP_LENGTH,
    TERM_MIN_LENGTH,
    max_message_length,
)

__all__ = ["CONNECT_TIMEOUT", "Connections"]

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
#: seconds an old stream must have been quiet (no packet, heartbeats included: a live
#: sender sends one every 100 ms) for a peer's LINK from a new stream to replace it (2.7)
RELINK_QUIET = 1.0
#: seconds an old stream is watched after a newer one from its address came (past it, only
#: its liveness timeout ends it), and between two looks at it
_SUSPECT_WATCH = 15.0
_SUSPECT_INTERVAL = 0.1
#: the largest message of the shortest term (64 KiB / 8): a frame up to this long fits
#: every publication, and only longer ones are measured against theirs
_FITS_ANY = max_message_length(TERM_MIN_LENGTH)


def _needs_fragments(frame: bytes, pub: Any) -> bool:
    """True if ``frame`` is longer than ``pub``'s largest message (only frames above the
    shortest term's largest are measured against it)."""
    return len(frame) > _FITS_ANY and len(frame) > pub.max_message_length


def _monotonic() -> float:
    return time.monotonic()


def round_interval(driver: Any) -> float:
    """Seconds between the SETUP rounds of ``driver`` (the shorter of its setup and
    heartbeat intervals: each round is counted as both); the Aeron defaults when the node
    cannot read its driver's settings (an external driver)."""
    settings = getattr(driver, "settings", None)
    if settings is None:
        return _DEFAULT_ROUND
    shortest: int = min(settings.setup_interval_ns, settings.heartbeat_interval_ns)
    return shortest / 1e9


class Connections:
    """A node's connections to peer nodes: backlogs, connections in progress, back-off.

    ``lock``, ``core`` and ``transport`` are the node's; ``pump`` is the node's (hand the
    core's events and frames out), called after a connection round; ``round_interval``:
    seconds between the driver's SETUP rounds (:func:`round_interval`). The node sets
    :attr:`transport` to None when it releases its transport.
    """

    def __init__(self, *, lock: Any, core: Any, transport: NodeTransport | None,
                 pump: Callable[[], None], round_interval: float) -> None:
        self.lock = lock
        self.core = core
        self.transport = transport
        self._pump = pump
        self._round = round_interval
        self.closed = False  #: set by the node's close: no more connections are made
        #: frames refused by back pressure or waiting for a connection, in order, per
        #: address; a long frame whose FRAGMENTs are under way is a PendingFragments. The
        #: same dict for the node's life: the native doors hold it (they send nothing while
        #: it is not empty)
        self.backlog: dict[str, deque[bytes | PendingFragments]] = {}
        self.to_connect: set[str] = set()  # addresses whose publication must be created
        self.pending: dict[str, tuple[Any, float]] = {}  # address -> (publication, deadline)
        self.to_close: list[Any] = []  # publications to close outside the lock
        self._backoff = ConnectBackoff()
        self._connecting = threading.Lock()
        #: addresses found unreachable since the last pump: the node drops them (the same
        #: set for the node's life, emptied in place: the node's pump holds it)
        self.lost: set[str] = set()
        self.connects_failed = 0  #: peer nodes that did not answer in CONNECT_TIMEOUT
        self.frames_dropped = 0  #: frames for unreachable peer nodes
        #: old streams of an address found quiet once a newer one came from it (its node
        #: restarted there): retired before their liveness timeout (2.7)
        self.streams_retired = 0
        #: old streams watched, (address, channel) -> until when (never rebound)
        self.restart_suspects: dict[tuple[str, int], float] = {}
        self._next_suspect_check = 0.0

    def busy(self) -> bool:
        """True while frames wait or connections are made or closed (the poll loop comes
        back within a millisecond)."""
        return bool(self.backlog or self.to_connect or self.pending or self.to_close)

    def addresses(self) -> set[str]:
        """Every address with a publication, a backlog or a connection in progress."""
        found = set(self.backlog) | set(self.pending)
        if self.transport is not None:
            found.update(self.transport.publications)
        return found

    def take_lost(self) -> list[str]:
        """The addresses found unreachable since the last call, emptied."""
        lost = list(self.lost)
        self.lost.clear()
        return lost

    def publications_left(self) -> list[Any]:
        """The publications still to close (connections in progress and given up)."""
        return [pub for pub, _deadline in self.pending.values()] + self.to_close

    def send_frames(self, frames: list[tuple[str, bytes]]) -> None:
        transport = self.transport
        if transport is None:
            return
        pubs = transport.publications
        backlog = self.backlog
        offer = transport.offer
        for address, data in frames:
            pub = pubs.get(address)
            if pub is None or address in backlog:
                if address in self.lost:
                    self.frames_dropped += 1
                    continue
                if pub is None:
                    queue = backlog.get(address)
                    if queue is None:
                        if not self._want_connection(address):
                            self.frames_dropped += 1
                            self.lost.add(address)  # handshakes with it: temporary refusal
                            continue
                        queue = backlog[address] = deque()
                    elif len(queue) >= _CONNECT_BACKLOG:
                        self.frames_dropped += 1
                        self.lost.add(address)
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
                rc = item.offer(pub, pub.max_message_length, OFFER_SPINS)
            else:
                rc = offer(pub, data)
            if rc < 0:
                if rc in RETRY:
                    backlog.setdefault(address, deque()).append(item)
                else:  # NOT_CONNECTED, CLOSED, MAX_POSITION_EXCEEDED: the peer is gone
                    self.frames_dropped += 1
                    self.lost.add(address)

    def retry_backlog(self) -> None:
        transport = self.transport
        if transport is None or not self.backlog:
            return
        for address in list(self.backlog):
            pub = transport.publications.get(address)
            if pub is None:
                continue
            queue = self.backlog[address]
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
                    if rc not in RETRY:
                        self.lost.add(address)
                    break
                queue.popleft()
            if not queue:
                del self.backlog[address]

    def drop_peer(self, address: str) -> None:
        dropped = self.backlog.pop(address, None)
        if dropped:
            self.frames_dropped += len(dropped)
        self.to_connect.discard(address)
        pending = self.pending.pop(address, None)
        if pending is not None:
            self.to_close.append(pending[0])
        if self.transport is not None:
            self.transport.drop_publication(address)

    def _want_connection(self, address: str) -> bool:
        """Frames wait for a connection to ``address``: ask for one. False: the address is
        in its back-off, or too many connections are in progress (drop the frames)."""
        if address in self.pending or address in self.to_connect:
            return True
        if len(self._backoff) and self._backoff.blocked(address, _monotonic()):
            return False
        if len(self.pending) + len(self.to_connect) >= _CONNECTS_PENDING:
            return False
        self.to_connect.add(address)
        return True

    def connect_pending(self) -> None:
        """Create the publications asked for and close the ones given up (lock NOT held):
        driver round trips only, never a wait for a peer. One thread at a time."""
        if not self._connecting.acquire(blocking=False):
            return
        try:
            with self.lock:
                transport = self.transport
                if transport is None or self.closed:
                    return
                todo = [a for a in self.to_connect
                        if a not in transport.publications and a not in self.pending]
                self.to_connect.clear()
                closing = list(self.to_close)
                self.to_close.clear()  # in place: the poll loop holds the list
            for pub in closing:
                with contextlib.suppress(errors.ExonError):
                    pub.close()
            if not todo:
                return
            with self.lock:
                windows = {address: self._connect_window(address) for address in todo}
                now = _monotonic()
                for address in [a for a, window in windows.items() if window is None]:
                    self._connect_failed(address, now)  # not one SETUP fits: not tried
                    todo.remove(address)
            started = [(address, transport.start_connect(address)) for address in todo]
            with self.lock:
                now = _monotonic()
                for address, pub in started:
                    if pub is None:
                        self._connect_failed(address, now)
                    elif self.transport is None or address not in self.backlog:
                        self.to_close.append(pub)  # closed, or nobody waits for it now
                    else:
                        self.pending[address] = (pub, now + (windows[address] or 0.0))
                if any(window is None for window in windows.values()):
                    self._pump()  # the frames dropped: their links learn it
                self.progress_connections(now)
                self._pump()
        finally:
            self._connecting.release()

    def _connect_window(self, address: str) -> float | None:
        """Seconds a connection attempt to ``address`` may wait for the peer's driver:
        :data:`CONNECT_TIMEOUT`, or less when the address is not validated (2.6.1) and 3x
        what came from it does not cover the SETUP rounds of a whole attempt; None when
        not one round fits (no attempt: counted held by the core). Lock held."""
        transport = self.transport
        if transport is None or not transport.sends_setups(address):
            return CONNECT_TIMEOUT  # IPC: no SETUP goes anywhere
        interval = self._round
        rounds = int(CONNECT_TIMEOUT / interval + 1e-9) + 1  # one at 0, then each interval
        granted: int = self.core.reserve_unvalidated(address, CONNECT_ROUND_BYTES, rounds)
        if granted == 0:
            return None
        # rounds go out at 0, interval, ...: given up half an interval after the last paid
        return (granted - 0.5) * interval

    def _connect_failed(self, address: str, now: float) -> None:
        self.connects_failed += 1
        self._backoff.failed(address, now)
        self.lost.add(address)

    def progress_connections(self, now: float) -> None:
        """Move the connections whose peer answered to the publications (HELLO sent, their
        backlog offered); give up those past their deadline. Never waits. Lock held."""
        transport = self.transport
        if transport is None:
            return
        ready = False
        for address, (pub, deadline) in list(self.pending.items()):
            if transport.finish_connect(pub):
                del self.pending[address]
                self._backoff.succeeded(address)
                transport.publications[address] = pub
                ready = True
            elif now >= deadline:
                del self.pending[address]
                self.to_close.append(pub)
                self._connect_failed(address, now)
        if ready:
            self.retry_backlog()

    # ==== streams of restarted peer nodes (docs/protocol.md 2.7) ==========================

    def new_stream(self, address: str, image: int, now: float) -> None:
        """A new stream (``image``'s HELLO) announces ``address`` while older ones from it
        live on: its node may have restarted there (kill -9: no EOS, and the old image
        stays until its liveness timeout, 10 s). Watch the older ones (2.7). Lock held."""
        transport = self.transport
        if transport is None:
            return
        for channel in transport.other_channels(address, image):
            self.restart_suspects.setdefault((address, channel), now + _SUSPECT_WATCH)
        if self.restart_suspects:
            self._next_suspect_check = now  # at once: the old one may be quiet already

    def restarts_due(self, now: float) -> bool:
        """True when old streams are watched and the next look at them is due."""
        return bool(self.restart_suspects) and now >= self._next_suspect_check

    def check_restarts(self, now: float) -> None:
        """An old stream of an address that also has a newer one, quiet for
        :data:`RELINK_QUIET` (a live sender heartbeats every 100 ms), is from a process
        that died: it goes now, as if it had timed out -- its links break, and our stream
        to the address starts again, HELLO first, for the process there now to read --
        so that process links at once instead of after the liveness timeout. Lock held."""
        transport = self.transport
        self._next_suspect_check = now + _SUSPECT_INTERVAL
        if transport is None:
            self.restart_suspects.clear()
            return
        for (address, channel), until in list(self.restart_suspects.items()):
            quiet = transport.channel_quiet(channel)
            if quiet is None or now > until:
                del self.restart_suspects[(address, channel)]  # gone, or not an exon image
            elif quiet >= RELINK_QUIET:
                del self.restart_suspects[(address, channel)]
                self.streams_retired += 1
                self.core.channel_gone(address, channel, now=now)
                self.drop_peer(address)

    def channels_gone(self, now: float) -> None:
        """Images gone while their address lives on in another image (the peer node
        restarted): break the links whose handshake came on them. Lock held."""
        transport = self.transport
        if transport is None:
            return
        gone, transport.gone_channels = transport.gone_channels, []
        for address, channel in gone:
            if self.core.channel_gone(address, channel, now=now):
                # the node those links were with is gone; a successor at its address reads
                # a new stream of ours from its start (HELLO first), never the old one's
                # middle (UDP: one session continues) nor a dead IPC stream id
                self.drop_peer(address)
