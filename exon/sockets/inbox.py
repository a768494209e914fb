"""A socket's inbox: what it received and has not handed out yet, fair-queued over peers.

Every receiving socket has ONE queue, native (``_nq``, exon_fast_inbox.c ``RecvQueue``),
whichever way its messages come: the fast path queues the DATA of the socket's attached
links there itself (``Poller.batch``), and the core's :class:`~exon.core.MessageReceived`
events are pushed there (:meth:`InboxMixin._on_message`), as is fast DATA the node hands
to Python (:meth:`InboxMixin._on_fast`). Each peer has a lane there (:meth:`_lane`), so
each peer's order holds whichever way its messages came, and the queue pops round-robin
over the lanes. That pop is the one place where fair queuing happens and where delivery
is counted: on the link table for the DATA of an attached link (:meth:`_on_due` when the
core must see it), through the core for the rest (:meth:`_on_core`). A peer's lane closes
once its link closed and the lane is empty: at LinkClosed, or when the last of its messages
is taken later. Cookies wait in their
own line (``_cookies``); while one waits, the receive doors leave the queue to Python
(``direct``), which applies the cookie ratio.

:class:`InboxMixin` is a base of :class:`~exon.sockets.socket.Socket`; every method runs
with the node's lock held.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from exon.core import LinkState, MessageReceived, PeerId, SocketCore
from exon.middleware.socket_host import SocketHost
from exon.sockets.batch_cookie import CookiePart
from exon.sockets.messages import Cookie, CookieLost, Message

__all__ = ["InboxMixin"]

_monotonic = time.monotonic
#: lanes a socket keeps before it first closes the idle ones (then: twice those left)
_LANE_SWEEP = 64


class InboxMixin:
    """The receive queue of a socket (a base of :class:`~exon.sockets.socket.Socket`)."""

    # the socket's state (exon.sockets.socket.Socket.__init__)
    tag: int
    _core: SocketCore
    _host: SocketHost
    _closed: bool
    _plain: bool
    _nq: Any  # the inbox (exon_fast_inbox.c RecvQueue); None once closed, or for a PUB
    _lanes: dict[PeerId, int]  # the inbox's lane of each peer
    _lane_sweep: int  # lanes kept before the idle ones are closed
    _cookies: deque[Cookie | CookieLost]
    _cookie_run: int  # cookies handed out in a row

    def _open_inbox(self) -> None:
        """Make the inbox (before the socket is registered: nothing can arrive earlier).
        A plain socket's items are Messages, the others' (payload, PeerId) for their own
        checks (``_accept_locked``)."""
        self._lane_sweep = _LANE_SWEEP
        self._nq = self._host.fast.open_queue(self, Message if self._plain else tuple)

    def _lane(self, peer: PeerId) -> int:
        """The inbox's lane of ``peer`` (opened on first use)."""
        lane = self._lanes.get(peer)
        if lane is None:
            if len(self._lanes) >= self._lane_sweep:
                self._close_idle_lanes()
            public = self._host.peer(peer)
            lane = self._nq.open_lane(public if self._plain else peer, peer, public)
            self._lanes[peer] = lane
        return lane

    def _idle_lane(self, peer: PeerId) -> int | None:
        """The lane of ``peer`` when it has one and nothing waits in it, else None."""
        lane = self._lanes.get(peer)
        nq = self._nq
        return lane if lane is not None and nq is not None and nq.idle(lane) else None

    def _drop_lane(self, peer: PeerId, lane: int) -> None:
        self._nq.close_lane(lane)
        del self._lanes[peer]

    def _close_lane_if_idle(self, peer: PeerId) -> None:
        """The link with ``peer`` closed: give its lane back unless messages still wait."""
        lane = self._idle_lane(peer)
        if lane is not None:
            self._drop_lane(peer, lane)

    def _close_idle_lanes(self) -> None:
        for peer in list(self._lanes):
            self._close_lane_if_idle(peer)
        self._lane_sweep = max(_LANE_SWEEP, 2 * len(self._lanes))

    def _on_due(self, link: int) -> None:
        """A delivery counted on an attached link needs the core (a FLOW is due, or the
        FLOW timer must be armed). Called by the inbox as it pops; lock held."""
        token = self._host.fast.tokens.get(link)
        if token is not None:
            self._core.delivered_natively(self.tag, token.peer, now=_monotonic())
            self._host.flush()

    def _on_core(self, peer: PeerId, incarnation: int, count: int) -> None:
        """``count`` messages of link incarnation ``incarnation`` with ``peer`` were handed
        out: the core counts them (ignored when that incarnation closed). Called by the
        inbox as it pops; lock held."""
        core = self._core
        core.deliver_many(self.tag, peer, incarnation, count, now=_monotonic())
        self._host.flush()
        # the last of a closed link's messages was taken: its lane goes now (at LinkClosed
        # it still held them, _close_lane_if_idle left it). Safe from inside the inbox's
        # pop: an idle lane is in no ready ring and the pop has done with it.
        lane = self._idle_lane(peer)
        if lane is not None and (not core.has_socket(self.tag)
                                 or core.link_state(self.tag, peer) is LinkState.IDLE):
            self._drop_lane(peer, lane)

    def _sync_direct(self) -> None:
        """Tell the inbox whether the receive door may pop it: only while no cookie waits
        (cookies go first, see ``cookie_ratio``) and the socket is open. Whatever queues a
        cookie clears it; receive() sets it again."""
        nq = self._nq
        if nq is not None:
            nq.direct = 0 if self._door_held_back() else 1

    def _door_held_back(self) -> bool:
        """Lock held: whether the receive door must leave the inbox to receive() now."""
        return bool(self._cookies) or self._closed

    def _queued(self) -> int:
        """Messages received and not yet taken (lock held)."""
        nq = self._nq
        return 0 if nq is None else len(nq)

    def _queued_bytes(self) -> int:
        """Payload bytes received and not yet taken (lock held; walks the queue)."""
        nq = self._nq
        return 0 if nq is None else int(nq.queued_bytes())

    def _on_message(self, ev: MessageReceived) -> None:
        """A message of the core's: behind everything of its peer in the inbox."""
        nq = self._nq
        if nq is None:  # no inbox (closing): nobody will take it, the core counts it
            self._core.deliver(ev, now=_monotonic())
            return
        nq.push(self._lane(ev.peer), ev.payload, ev.incarnation)

    def _on_fast(self, token: Any, payload: bytes) -> None:
        """DATA the fast path counted as received and handed to Python: into the inbox as
        the core's (the core counts its delivery, on the link's ledger)."""
        nq = self._nq
        if nq is None:
            self._core.deliver(MessageReceived(tag=self.tag, peer=token.peer, payload=payload,
                                               incarnation=token.incarnation),
                               now=_monotonic())
            return
        nq.push(self._lane(token.peer), payload, token.incarnation)

    def _on_cookie(self, value: Any, *, lost: bool) -> None:
        if type(value) is CookiePart:  # a part of a send_many's cookie (exon.sockets.batch)
            batch = value.batch
            outcome = batch.resolve(lost=lost)
            if outcome is None:
                return
            value, lost = batch.value, outcome
        if self._nq is not None:
            self._nq.direct = 0
        self._cookies.append(CookieLost(value) if lost else Cookie(value))
