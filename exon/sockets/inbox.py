"""A socket's inbox: what it received and has not handed out yet, fair-queued over peers.

Every receiving socket has ONE queue, native (:attr:`Inbox.nq`, exon_fast_inbox.c
``RecvQueue``), whichever way its messages come: the fast path queues the DATA of the
socket's attached links there itself (``Poller.batch``), and the core's
:class:`~exon.core.MessageReceived` events are pushed there (:meth:`Inbox.push_message`),
as is fast DATA the node hands to Python (:meth:`Inbox.push_fast`). Each peer has a lane
there (:meth:`Inbox.lane`), so each peer's order holds whichever way its messages came,
and the queue pops round-robin over the lanes. That pop is the one place where fair
queuing happens and where delivery is counted: on the link table for the DATA of an
attached link (:meth:`Inbox.on_due` when the core must see it), through the core for the
rest (:meth:`Inbox.on_core`). A peer's lane closes once its link closed and the lane is
empty: at LinkClosed, or when the last of its messages is taken later. Cookies wait in
their own line (:attr:`Inbox.cookies`); while one waits, the receive doors leave the queue
to Python (``direct``), which applies the cookie ratio.

:class:`Inbox` is owned by :class:`~exon.sockets.socket.Socket` (its ``_inbox``), with
references to the node's core and socket host; it is the ``InboxOwner`` the fast path and
the native queue call (:mod:`exon.middleware.hosted`). Every method runs with the node's
lock held.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from exon.core import LinkState, MessageReceived, PeerId, SocketCore
from exon.middleware.socket_host import SocketHost
from exon.sockets.batch_cookie import CookiePart
from exon.sockets.messages import Cookie, CookieLost, Message

__all__ = ["Inbox"]

_monotonic = time.monotonic
#: lanes a socket keeps before it first closes the idle ones (then: twice those left)
_LANE_SWEEP = 64


class Inbox:
    """The receive queue of a socket, its lanes per peer and its cookies.

    ``host``: the node's :class:`~exon.middleware.socket_host.SocketHost`; ``plain``: the
    queue's items are Messages (else ``(payload, PeerId)`` for the socket's own checks);
    ``native``: False for a socket without a queue (PUB: every DATA reaches it as it
    arrives), whose :attr:`nq` stays None. :attr:`tag` is set once the socket is
    registered (nothing reaches the inbox earlier)."""

    def __init__(self, *, host: SocketHost, plain: bool, native: bool) -> None:
        self.tag = -1
        self._core: SocketCore = host.core
        self._host = host
        self._plain = plain
        #: the native queue (exon_fast_inbox.c RecvQueue); None once closed, or for a PUB
        self.nq: Any = None
        self.lanes: dict[PeerId, int] = {}  #: the queue's lane of each peer
        self._lane_sweep = _LANE_SWEEP  # lanes kept before the idle ones are closed
        #: cookies (and lost ones) waiting to be handed out, in order
        self.cookies: deque[Cookie | CookieLost] = deque()
        if native:
            # made before the socket is registered: nothing can arrive earlier
            self.nq = host.fast.open_queue(self, Message if plain else tuple)

    def close(self) -> None:
        """The socket closed: drop the queue. It holds our ``on_due`` and ``on_core`` (a
        cycle the collector cannot see into): kept, the closed socket and its queue would
        stay alive for good; what it still holds is released with it."""
        self.nq = None
        self.lanes.clear()

    def lane(self, peer: PeerId) -> int:
        """The inbox's lane of ``peer`` (opened on first use)."""
        lane = self.lanes.get(peer)
        if lane is None:
            if len(self.lanes) >= self._lane_sweep:
                self._close_idle_lanes()
            public = self._host.peer(peer)
            lane = self.nq.open_lane(public if self._plain else peer, peer, public)
            self.lanes[peer] = lane
        return lane

    def _idle_lane(self, peer: PeerId) -> int | None:
        """The lane of ``peer`` when it has one and nothing waits in it, else None."""
        lane = self.lanes.get(peer)
        nq = self.nq
        return lane if lane is not None and nq is not None and nq.idle(lane) else None

    def _drop_lane(self, peer: PeerId, lane: int) -> None:
        self.nq.close_lane(lane)
        del self.lanes[peer]

    def waiting_peers(self) -> list[PeerId]:
        """The peers whose messages wait in the queue, not taken yet."""
        nq = self.nq
        if nq is None or not len(nq):
            return []
        return [peer for peer, lane in self.lanes.items() if not nq.idle(lane)]

    def close_lane_if_idle(self, peer: PeerId) -> None:
        """The link with ``peer`` closed: give its lane back unless messages still wait."""
        lane = self._idle_lane(peer)
        if lane is not None:
            self._drop_lane(peer, lane)

    def _close_idle_lanes(self) -> None:
        for peer in list(self.lanes):
            self.close_lane_if_idle(peer)
        self._lane_sweep = max(_LANE_SWEEP, 2 * len(self.lanes))

    def on_due(self, link: int) -> None:
        """A delivery counted on an attached link needs the core (a FLOW is due, or the
        FLOW timer must be armed). Called by the queue as it pops; lock held."""
        token = self._host.fast.tokens.get(link)
        if token is not None:
            self._core.delivered_natively(self.tag, token.peer, now=_monotonic())
            self._host.flush()

    def on_core(self, peer: PeerId, incarnation: int, count: int) -> None:
        """``count`` messages of link incarnation ``incarnation`` with ``peer`` were handed
        out: the core counts them (ignored when that incarnation closed). Called by the
        queue as it pops; lock held."""
        core = self._core
        core.deliver_many(self.tag, peer, incarnation, count, now=_monotonic())
        self._host.flush()
        # the last of a closed link's messages was taken: its lane goes now (at LinkClosed
        # it still held them, close_lane_if_idle left it). Safe from inside the queue's
        # pop: an idle lane is in no ready ring and the pop has done with it.
        lane = self._idle_lane(peer)
        if lane is not None and (not core.has_socket(self.tag)
                                 or core.link_state(self.tag, peer) is LinkState.IDLE):
            self._drop_lane(peer, lane)

    def queued(self) -> int:
        """Messages received and not yet taken."""
        nq = self.nq
        return 0 if nq is None else len(nq)

    def queued_bytes(self) -> int:
        """Payload bytes received and not yet taken (walks the queue)."""
        nq = self.nq
        return 0 if nq is None else int(nq.queued_bytes())

    def push_message(self, ev: MessageReceived) -> None:
        """A message of the core's: behind everything of its peer in the queue."""
        nq = self.nq
        if nq is None:  # no queue (closing): nobody will take it, the core counts it
            self._core.deliver(ev, now=_monotonic())
            return
        nq.push(self.lane(ev.peer), ev.payload, ev.incarnation)

    def push_fast(self, token: Any, payload: bytes) -> None:
        """DATA the fast path counted as received and handed to Python: into the queue as
        the core's (the core counts its delivery, on the link's ledger)."""
        nq = self.nq
        if nq is None:
            self._core.deliver(MessageReceived(tag=self.tag, peer=token.peer, payload=payload,
                                               incarnation=token.incarnation),
                               now=_monotonic())
            return
        nq.push(self.lane(token.peer), payload, token.incarnation)

    def push_cookie(self, value: Any, *, lost: bool) -> None:
        """A cookie came back (or was lost): into the cookies' line; the receive doors leave
        the queue to Python until it is handed out."""
        if type(value) is CookiePart:  # a part of a send_many's cookie (exon.sockets.batch)
            batch = value.batch
            outcome = batch.resolve(lost=lost)
            if outcome is None:
                return
            value, lost = batch.value, outcome
        if self.nq is not None:
            self.nq.direct = 0
        self.cookies.append(CookieLost(value) if lost else Cookie(value))
