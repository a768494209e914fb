"""A socket's inbox: what it received and has not handed out yet, fair-queued over peers.

Messages come two ways: from the core (:class:`~exon.core.MessageReceived`, via
``_on_message``) and from the native fast path (``_on_fast``: a payload and its link's
token, counted as received already). Plain sockets keep the fast path's messages in the
native receive queue (``_nq``, exon_fast.c RecvQueue) as long as nothing waits on the
Python side; whatever must queue behind them drains it into the Python queues first, so
each peer's order holds. The Python queues are one deque per peer and a round-robin
line of the peers that have something (``_ready``); cookies wait in their own line.

:class:`InboxMixin` is a base of :class:`~exon.sockets.socket.Socket`; every method runs
with the node's lock held.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from exon.core import MessageReceived, PeerId, SocketCore
from exon.middleware.socket_host import SocketHost
from exon.sockets.messages import Cookie, CookieLost, Message

__all__ = ["InboxMixin"]

_monotonic = time.monotonic
_new_message = tuple.__new__


class InboxMixin:
    """The receive queues of a socket (a base of :class:`~exon.sockets.socket.Socket`)."""

    # the socket's state (exon.sockets.socket.Socket.__init__)
    tag: int
    _core: SocketCore
    _host: SocketHost
    _closed: bool
    _nq: Any  # the native receive queue, or None
    _inq: dict[PeerId, deque[Any]]  # per peer: MessageReceived or (payload, FastLink)
    _ready: deque[PeerId]  # peers with something queued, in round-robin order
    _queued: int  # messages in _inq
    _cookies: deque[Cookie | CookieLost]
    _cookie_run: int  # cookies handed out in a row
    _deliver: Callable[..., Any]  # the link table's deliver(link[, count])

    def _on_due(self, link: int) -> None:
        """A delivery popped from the native queue needs the core (a FLOW is due, or the
        FLOW timer must be armed). Lock held."""
        token = self._host.fast.tokens.get(link)
        if token is not None:
            self._core.delivered_natively(self.tag, token.peer, now=_monotonic())
            self._host.flush()

    def _drain_native(self, items: list[tuple[int, bytes]]) -> None:
        """Every message of the native queue moves to the Python queues, in order (a link
        detaches, or a core-path message must queue behind them). Lock held."""
        tokens = self._host.fast.tokens
        for link, payload in items:
            self._on_fast(tokens[link], payload)

    def _sync_direct(self) -> None:
        """Tell the native receive queue whether the receive door may pop it: only while
        nothing waits on the Python side (queued messages, cookies) and the socket is open.
        Everything that queues on the Python side clears it first; receive() sets it again."""
        nq = self._nq
        if nq is not None:
            nq.direct = 0 if (self._queued or self._cookies or self._closed) else 1

    def _queued_bytes(self) -> int:
        """Payload bytes received and not yet taken (lock held; walks the queues)."""
        total = 0 if self._nq is None else self._nq.queued_bytes()
        for q in self._inq.values():
            for item in q:
                total += len(item[0]) if type(item) is tuple else len(item.payload)
        return total

    def _on_message(self, ev: MessageReceived) -> None:
        nq = self._nq
        if nq is not None:
            nq.direct = 0
            if len(nq):
                self._drain_native(nq.take_all())  # keep each peer's order
        q = self._inq.get(ev.peer)
        if q is None:
            q = self._inq[ev.peer] = deque()
        if not q:
            self._ready.append(ev.peer)
        q.append(ev)
        self._queued += 1

    def _on_fast(self, token: Any, payload: bytes) -> None:
        """DATA taken natively (exon.middleware.fastpath); counted as received already."""
        if self._nq is not None:
            self._nq.direct = 0
        peer = token.peer
        q = self._inq.get(peer)
        if q is None:
            q = self._inq[peer] = deque()
        if not q:
            self._ready.append(peer)
        q.append((payload, token))
        self._queued += 1

    def _on_cookie(self, value: Any, *, lost: bool) -> None:
        if self._nq is not None:
            self._nq.direct = 0
        self._cookies.append(CookieLost(value) if lost else Cookie(value))

    def _pop_locked(self) -> tuple[PeerId, Any] | None:
        """Pop the next item of the Python queues, fair-queued over peers, NOT counted as
        delivered: (peer, MessageReceived or (payload, FastLink)); None when empty. The one
        round-robin of the Python queues (receive and the batches both take from it)."""
        ready = self._ready
        inq = self._inq
        while ready:
            peer = ready.popleft()
            q = inq[peer]
            if not q:
                continue
            item = q.popleft()
            self._queued -= 1
            if q:
                ready.append(peer)
            else:
                del inq[peer]
            return peer, item
        return None

    def _take_message_locked(self) -> tuple[bytes, PeerId] | None:
        """Pop the next message, fair-queued over peers, and credit it back:
        (payload, peer)."""
        popped = self._pop_locked()
        if popped is None:
            return None
        peer, item = popped
        if type(item) is tuple:
            payload, token = item
            if token.attached:
                if self._deliver(token.index):
                    self._core.delivered_natively(self.tag, peer, now=_monotonic())
            else:  # detached since (unlinking, closed): the core counts it
                self._core.deliver(MessageReceived(
                    tag=self.tag, peer=peer, payload=payload,
                    incarnation=token.incarnation), now=_monotonic())
            return payload, peer
        self._core.deliver(item, now=_monotonic())
        return item.payload, peer

    def _take_plain_locked(self) -> Message | None:
        """The short path of a plain socket with no cookie pending and a message queued
        natively: the next message, fair-queued, delivered and credited. None: take the
        general path (:meth:`_take_locked`)."""
        ready = self._ready
        peer = ready[0]
        q = self._inq[peer]
        item = q[0]
        if type(item) is not tuple:
            return None
        payload, token = item
        if not token.attached:
            return None
        q.popleft()
        ready.popleft()
        self._queued -= 1
        if q:
            ready.append(peer)
        else:
            del self._inq[peer]
        if self._deliver(token.index):
            self._core.delivered_natively(self.tag, peer, now=_monotonic())
            self._host.flush()
        self._cookie_run = 0
        public = token.public
        if public is None:
            public = token.public = self._host.peer(peer)
        return _new_message(Message, (payload, public))
