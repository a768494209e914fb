"""The base Socket: linking, fair-queued receiving, cookies, credit-blocking sends.

``exon.Socket(type="push", tag=None, node=None)`` returns the subclass for ``type``
(:class:`~exon.sockets.push.PushSocket`, ...); ``node=None`` means the process-wide
default node. Every method is thread-safe; every blocking call takes ``timeout`` (seconds,
None = no limit) and raises :class:`exon.Timeout`.

What ``receive()`` returns, in order of priority:

1. a :class:`~exon.sockets.messages.Cookie` or :class:`~exon.sockets.messages.CookieLost`
   when one is pending -- but after ``cookie_ratio`` cookies in a row, a waiting message
   goes first;
2. a :class:`~exon.sockets.messages.Message`, fair-queued over the links (round-robin over
   the peers that have something queued).

Credit goes back to the sender when ``receive()`` hands a message to the application.

Errors while waiting: :class:`exon.BrokenLink` when a link of the socket broke (the peer
node died, or an error closed it) and the call can no longer complete; cookies of the
messages not yet confirmed on that link come back as ``CookieLost``.
"""

from __future__ import annotations

import builtins
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from exon import errors
from exon.core import (
    LinkClosed,
    LinkEstablished,
    LinkPolicy,
    LinkRefused,
    LinkState,
    MessageReceived,
    PeerId,
)
from exon.core.events import ErrorReceived
from exon.core.frames import ErrorCode
from exon.middleware.fastpath import (
    HOLD_BACKLOG,
    HOLD_CLOSED,
    LINK_NONE,
    OFFER_SPINS,
    RETRY,
    ROUND_ROBIN,
)
from exon.middleware.hosted import register_socket_factory
from exon.middleware.node_transport import offer_retrying
from exon.middleware.spin_policy import new_spin_policy
from exon.middleware.wakeup import Wakeup
from exon.sockets.aio import AsyncSocketMixin
from exon.sockets.inbox import Inbox
from exon.sockets.linking import Linking, peer_id
from exon.sockets.messages import Cookie, CookieLost, Message, Peer
from exon.sockets.timeouts import check_timeout as _check_timeout
from exon.sockets.timeouts import deadline as _deadline

if TYPE_CHECKING:
    from exon.middleware.node import Node

__all__ = ["Socket"]

_monotonic = time.monotonic


def _payload(data: Any) -> bytes:
    """A payload as ``bytes``: ``bytes`` as is, any other buffer (``bytearray``,
    ``memoryview``, ...) copied; anything else (``int``: ``bytes(12345)`` would be 12,345
    zero bytes; ``str``: encode it first) raises :class:`exon.ArgumentTypeError`."""
    if type(data) is bytes:
        return data
    if isinstance(data, (str, int)):
        hint = " (encode a str first)" if isinstance(data, str) else ""
        raise errors.ArgumentTypeError(
            f"a payload is bytes-like (bytes, bytearray, memoryview), not "
            f"{type(data).__name__}{hint}")
    try:
        view = memoryview(data)
    except TypeError:
        raise errors.ArgumentTypeError(
            f"a payload is bytes-like (bytes, bytearray, memoryview), not "
            f"{type(data).__name__}") from None
    return view.tobytes()


class Socket(AsyncSocketMixin):
    """Base of every socket type. Construct through ``exon.Socket(type=...)`` or
    ``node.socket(type)``."""

    type: ClassVar[str] = ""
    _types: ClassVar[dict[str, builtins.type[Socket]]] = {}  # builtins: `type` is shadowed
    can_send: ClassVar[bool] = True
    can_receive: ClassVar[bool] = True
    #: seconds receive() spins before parking when it leads the polling (REQ/REP: answers
    #: come fast, see exon.middleware.node.CLIENT_SPIN)
    _wait_spin: ClassVar[float] = 0.0
    #: False: no inbox; every DATA for the socket reaches ``_on_fast`` / ``_on_message``
    #: as it arrives (PUB applies subscriptions there, see pub.py)
    _native_queue: ClassVar[bool] = True
    #: what the socket type drops and counts, by reason: {reason: the attribute counting
    #: them} (the metrics' ``exon_socket_drops_total``)
    _drop_attributes: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.type:
            Socket._types[cls.type] = cls

    def __new__(cls, type: str | None = None, tag: int | None = None,
                node: Node | None = None, **options: Any) -> Socket:
        if cls is Socket:
            if type is None:
                raise errors.ConfigurationError(
                    "exon.Socket needs type= (req, rep, push, pull, dealer, router, pub, sub)")
            if not isinstance(type, str):
                raise errors.ConfigurationError(
                    f"a socket type is a name (req, rep, push, pull, ...), not {type!r}")
            sub = Socket._types.get(type.lower())
            if sub is None:
                raise errors.ConfigurationError(
                    f"unknown socket type {type!r} (known: {', '.join(sorted(Socket._types))})")
            cls = sub
        return object.__new__(cls)

    def __init__(
        self,
        type: str | None = None,
        tag: int | None = None,
        node: Node | None = None,
        *,
        credits: int | None = None,
        max_message_size: int | None = None,
        max_links: int | None = None,
        policy: LinkPolicy | None = None,
        cookie_ratio: int = 8,
        start_credits: int | None = None,
    ) -> None:
        if type is not None and type.lower() != self.type:
            raise errors.ConfigurationError(f"{self.__class__.__name__} is a {self.type} socket")
        if cookie_ratio < 1:
            raise errors.ConfigurationError("cookie_ratio must be >= 1")
        if node is None:
            from exon.middleware.default_node import default_node

            node = default_node()
        self.node = node
        #: what this socket uses of its node (exon.middleware.socket_host): nothing else
        host = self._host = node.socket_host
        self._lock = host.lock
        self._core = host.core
        #: who waits on it (blocking calls, asyncio tasks): the node wakes them
        self.wakeup = Wakeup(host.lock, self)
        self._fast_slot = -1  # the node's link-table slot (host.open_socket gives it)
        self.cookie_ratio = cookie_ratio
        self._cookie_run = 0
        self._broken_epoch = 0
        self._broken: dict[PeerId, str] = {}
        self._closes = 0  # LinkClosed events seen (blocked waits re-check their errors)
        self._closed = False
        self._aio_waiters: dict[Any, deque[Any]] = {}  # lines of asyncio tasks (sockets.aio)
        self._aio_spin: Any = new_spin_policy()  # when areceive spins
        # a "plain" socket takes every message as it comes (no gate, no envelope): its
        # inbox holds Messages, and its receive() pops them in one call (the door)
        cls = self.__class__
        self._plain = (cls._accept_locked is Socket._accept_locked
                       and cls._may_take_message is Socket._may_take_message)
        # every message received waits in the inbox (exon.sockets.inbox), whichever way
        # it came; made before the socket is registered, so nothing arrives before it
        self._inbox = Inbox(host=host, plain=self._plain, native=cls._native_queue)
        # the inbox's cookies' line (never rebound), bound once: every receive looks at it
        self._cookies = self._inbox.cookies
        options: dict[str, Any] = {"policy": policy, "budgeted": self.can_receive}
        if credits is not None:
            options["initial_credits"] = credits
        if max_message_size is not None:
            options["max_message_size"] = max_message_size
        if max_links is not None:
            options["max_links"] = max_links
        if start_credits is not None:
            options["start_credits"] = start_credits
        self.tag: int
        self.tag, self._fast_slot = host.open_socket(self, self.type, tag, options)
        self._inbox.tag = self.tag
        #: the handshakes with its peers (exon.sockets.linking): link(), unlink(), ...
        self._linking = Linking(host=host, tag=self.tag, wakeup=self.wakeup,
                                is_closed=lambda: self._closed, check_open=self._check_open)
        #: the refusals the node reported, by peer (the linking's, never rebound)
        self._refusals = self._linking.refusals
        fast = host.fast
        self._deliver = fast.deliver
        self._fast_send = fast.send
        #: the native doors replacing this instance's send/receive (exon_fast.c)
        self._doors: list[Any] = []
        nq = self._inbox.nq
        if nq is not None:
            with self._lock:
                # the fast path queues the DATA of this socket's links there from now on
                fast.register_queue(self._fast_slot, nq, self, self._inbox)
                nq.direct = 1
                # the door stands in for Socket.receive only (not for a subclass's own)
                if self._plain and cls.receive is Socket.receive:
                    door = fast.receive_door(host.lock, nq, Socket.receive.__get__(self))
                    if door is not None:
                        self._doors.append(door)
                        self.receive = door  # type: ignore[method-assign]

    # ==== events (called by the node, lock held; the message queues: exon.sockets.inbox) ====

    def _on_message(self, ev: MessageReceived) -> None:
        """A message of the core's: into the inbox, behind everything of its peer."""
        self._inbox.push_message(ev)

    def _on_fast(self, token: Any, payload: bytes) -> None:
        """DATA the fast path handed to Python: into the inbox as the core's."""
        self._inbox.push_fast(token, payload)

    def _on_cookie(self, value: Any, *, lost: bool) -> None:
        self._inbox.push_cookie(value, lost=lost)

    def _queued(self) -> int:
        """Messages received and not yet taken (lock held)."""
        return self._inbox.queued()

    def _queued_bytes(self) -> int:
        """Payload bytes received and not yet taken (lock held; walks the queue)."""
        return self._inbox.queued_bytes()

    def _sync_direct(self) -> None:
        """Tell the inbox whether the receive door may pop it: only while no cookie waits
        (cookies go first, see ``cookie_ratio``) and the socket is open. Whatever queues a
        cookie clears it; receive() sets it again."""
        nq = self._inbox.nq
        if nq is not None:
            nq.direct = 0 if self._door_held_back() else 1

    def _door_held_back(self) -> bool:
        """Lock held: whether the receive door must leave the inbox to receive() now."""
        return bool(self._cookies) or self._closed

    def _on_established(self, ev: LinkEstablished) -> None:
        self._broken.pop(ev.peer, None)

    def _on_refused(self, ev: LinkRefused) -> None:
        self._refusals[ev.peer] = ev

    def _on_closed(self, ev: LinkClosed) -> None:
        self._closes += 1
        self._inbox.close_lane_if_idle(ev.peer)
        if ev.error:
            self._broken_epoch += 1
            self._broken[ev.peer] = ev.reason

    def _on_error(self, ev: ErrorReceived) -> None:
        if ev.code == ErrorCode.SOCKET_NOT_FOUND and ev.peer not in self._refusals:
            self._refusals[ev.peer] = ev

    # ==== receiving ==========================================================================

    def _accept_locked(self, payload: bytes, peer: PeerId) -> Message | None:
        """Turn a taken message into what the application gets (None: drop it)."""
        return Message(payload, self._host.peer(peer))

    def _may_take_message(self) -> bool:
        """Hook: False while the socket's state forbids taking a message (REP replying)."""
        return True

    def _take_locked(self) -> Cookie | CookieLost | Message | None:
        """The next cookie or message (lock held): cookies first, but after
        ``cookie_ratio`` in a row a waiting message; messages as the inbox pops them,
        fair-queued, each delivery counted as it pops."""
        cookies = self._cookies
        nq = self._inbox.nq
        if cookies and (self._cookie_run < self.cookie_ratio or nq is None or not len(nq)
                        or not self._may_take_message()):
            self._cookie_run += 1
            return cookies.popleft()
        if nq is None:
            return None
        if self._plain:
            msg = nq()
            if msg is not None:
                self._cookie_run = 0
                return msg  # type: ignore[no-any-return]
        else:
            while len(nq) and self._may_take_message():
                payload, peer = nq()  # delivered and credited
                msg = self._accept_locked(payload, peer)
                self._host.flush()
                if msg is not None:
                    self._cookie_run = 0
                    return msg
        if cookies:
            self._cookie_run += 1
            return cookies.popleft()
        return None

    def _drop_counts(self) -> dict[str, int]:
        """The messages dropped so far, by reason (lock held; 0 before they are counted)."""
        return {reason: int(getattr(self, attribute, 0))
                for reason, attribute in self._drop_attributes.items()}

    def _can_take_locked(self) -> bool:
        nq = self._inbox.nq
        return bool(self._cookies) or (
            nq is not None and len(nq) > 0 and self._may_take_message())

    def _check_receive_locked(self) -> None:
        """Raise StateError when this socket cannot receive now (subclasses)."""

    def _receive_blocked_error(self, epoch: int) -> errors.ExonError | None:
        """Raise-worthy condition while blocked in receive (subclasses refine)."""
        return self._every_link_broke(epoch)

    def _every_link_broke(self, epoch: int) -> errors.BrokenLink | None:
        """The error when a link broke since ``epoch`` and none is established now."""
        if self._broken_epoch != epoch and not self._core.established(self.tag):
            reasons = ", ".join(f"{p}: {r}" for p, r in self._broken.items())
            return errors.BrokenLink(f"socket {self.tag}: every link broke ({reasons})")
        return None

    def receive(self, timeout: float | None = None) -> Message | Cookie | CookieLost:
        """The next cookie or message; blocks up to ``timeout`` seconds."""
        if timeout is not None:
            _check_timeout(timeout)
        with self._lock:
            try:
                return self._receive_locked(timeout)
            finally:
                self._sync_direct()

    def _receive_locked(self, timeout: float | None) -> Message | Cookie | CookieLost:
        nq = self._inbox.nq
        if nq is not None and self._plain and not self._cookies:
            msg = nq()
            if msg is not None:
                self._host.activity += 1
                return msg  # type: ignore[no-any-return]
        self._check_open()
        self._host.activity += 1
        item = self._take_locked()
        if item is not None:
            return item
        self._check_receive_locked()
        got: Message | Cookie | CookieLost = self._wait_and_take(
            self._take_locked, self._can_take_locked, self._check_open, timeout, self._wait_spin)
        return got

    def _has_links(self) -> bool:
        """Lock held: whether this socket has a link (a receive without one does not lead
        the node's polling: see ``wait_until``)."""
        return self._core.has_links(self.tag)

    # Any: each caller's take() returns its own union (mypy cannot solve a TypeVar from a
    # Callable returning ``A | B | None``); callers annotate what they get back.
    def _wait_and_take(self, take: Callable[[], Any], can_take: Callable[[], bool],
                       check: Callable[[], None], timeout: float | None,
                       spin: float = 0.0) -> Any:
        """The one blocking wait of the receive calls (lock held): until ``take()`` gives
        something, waking when ``can_take()``, the socket closes or every link broke;
        ``check()`` after each wake-up. Raises Timeout, or the error that ended the wait."""
        deadline = None if timeout is None else _deadline(timeout)
        epoch = self._broken_epoch
        failure: list[errors.ExonError] = []
        # the blocked-error hook is asked once now, then only after a link of the socket
        # closed (every condition it reports starts at a LinkClosed: _on_closed), not on
        # every wake-up of a request/reply wait
        closes = [-1]

        def ready() -> bool:
            if self._closed or failure or can_take():
                return True
            if self._closes != closes[0]:
                closes[0] = self._closes
                err = self._receive_blocked_error(epoch)
                if err is not None:
                    failure.append(err)
                    return True
            return False

        while True:
            if not self._host.wait_until(self.wakeup, ready, deadline, spin, self._has_links):
                self._on_receive_timeout()
                raise errors.Timeout(f"nothing received in {timeout}s")
            check()
            item = take()
            if item is not None:
                return item
            if failure:
                self._on_receive_failure()
                raise failure[0]

    def receive_nowait(self) -> Message | Cookie | CookieLost:
        """The next cookie or message; raises :class:`exon.Timeout` when none is waiting."""
        with self._lock:
            try:
                return self._receive_nowait_locked()
            finally:
                self._sync_direct()

    def _receive_nowait_locked(self) -> Message | Cookie | CookieLost:
        self._check_open()
        item = self._take_locked()
        if item is not None:
            return item
        self._check_receive_locked()
        # nothing queued: look at the transport once if nobody else is polling
        if self.node.poll_once_if_idle():
            item = self._take_locked()
            if item is not None:
                return item
        raise errors.Timeout("nothing to receive")

    def _on_receive_timeout(self) -> None:
        """Hook: REQ abandons its request."""

    def _on_receive_failure(self) -> None:
        """Hook: REQ resets after a broken link."""

    # ==== sending ============================================================================

    def _send_locked(self, payload: bytes, cookie: Any, destination: PeerId | None,
                     deadline: float | None, nowait: bool) -> PeerId:
        core = self._core
        tag = self.tag
        host = self._host
        host.activity += 1
        epoch = self._broken_epoch
        polled = False
        while True:
            sent = self._send_native_locked(payload, cookie, destination)
            if sent is not None:
                self._on_sent_locked(sent)
                return sent
            # no credit, too large, not connected, a cookie...: the core's path decides
            self._check_open()
            try:
                dest = core.send(tag, payload, cookie=cookie, destination=destination,
                                 now=_monotonic())
            except errors.BackPressured:
                if nowait:
                    if self._polled_for_credit_locked(polled):
                        polled = True
                        continue
                    raise
            except errors.SocketNotLinked:
                if destination is not None and destination in self._broken:
                    raise errors.BrokenLink(
                        f"the link with {destination} broke: {self._broken[destination]}"
                    ) from None
                raise
            else:
                # before the flush: offering the frame may find the peer gone, and the
                # flush then hands out the LinkClosed (at once, within this call), which
                # must find the message recorded, as the core ordered them
                self._on_sent_locked(dest)
                host.flush()
                return dest

            def ready() -> bool:
                if self._closed:
                    return True
                if destination is not None:
                    if core.link_state(tag, destination) is not LinkState.ESTABLISHED:
                        return True
                    return core.credits(tag, destination) > 0
                if self._broken_epoch != epoch and not core.established(tag):
                    return True
                return any(core.credits(tag, p) > 0 for p in core.established(tag))

            if not host.wait_until(self.wakeup, ready, deadline):
                raise self._credit_timeout_locked()
            if destination is None and (broke := self._every_link_broke(epoch)) is not None:
                raise broke

    def _credit_timeout_locked(self) -> errors.Timeout:
        """The Timeout of a send that waited for credit: which of the two it waited for."""
        if not self._core.established(self.tag):
            return errors.Timeout(
                "no peer was linked before the timeout: link() first (sock.peers lists the "
                "links; a peer that unlinked or broke is gone from it)")
        return errors.Timeout("no linked peer had credit before the timeout")

    def _on_sent_locked(self, destination: PeerId) -> None:
        """Hook (lock held): :meth:`_send_locked` sent the message to ``destination``.
        Called before the send's frames go to the transport, so the events that sending
        them may raise (the link breaking: the peer's node was found gone) reach the socket
        after it, in the core's order (REQ records its pending request here)."""

    def _polled_for_credit_locked(self, polled: bool) -> bool:
        """A non-blocking send found no credit: look at the transport once, as
        receive_nowait does, unless this send did already. True if it looked (try again).
        The FLOWs that give credit back may wait there unread: a sender that only calls
        send_nowait keeps its node busy, so the node's dispatcher stands aside."""
        return not polled and self.node.poll_once_if_idle()

    def _send_native_locked(self, payload: bytes, cookie: Any,
                            destination: PeerId | None) -> PeerId | None:
        """Send through the link table if its rule lets this message (exon_lt_hold_reason,
        then exon_lt_send): the peer it went to, else None (the core's path decides). A
        cookie goes to the core against the DATA just sent (``cookie_on_last_sent``, as a
        send_many's parts do): the door leaves cookies to this method, the table sends."""
        host = self._host
        fast = host.fast
        hold = (HOLD_BACKLOG if host.backlog else 0) | (HOLD_CLOSED if self._closed else 0)
        if destination is None:
            link = ROUND_ROBIN
        else:
            token = fast.by_link.get((self.tag, destination))
            link = LINK_NONE if token is None else token.index
        rc = fast.send(self._fast_slot, link, payload, hold)
        if rc in RETRY:
            rc = offer_retrying(rc, fast.send, (self._fast_slot, link, payload, hold),
                                OFFER_SPINS)
        if rc < 0:
            return None
        peer: PeerId = fast.tokens[rc].peer
        if cookie is not None:
            self._core.cookie_on_last_sent(self.tag, peer, cookie)
        return peer

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """Send ``data`` (with an optional ``cookie``); blocks up to ``timeout`` (None: no limit)
        for credit. Socket types that cannot send raise :class:`exon.StateError`."""
        raise errors.StateError(f"a {self.type} socket cannot send")

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """Send now or raise :class:`exon.BackPressured`. Socket types that cannot send raise
        :class:`exon.StateError`."""
        raise errors.StateError(f"a {self.type} socket cannot send")

    # ==== linking (exon.sockets.linking) ======================================================

    _peer_id = staticmethod(peer_id)

    def link(self, peer: str | Peer, timeout: float | None = 5.0) -> None:
        """Link with ``peer`` ("HOST:PORT/TAG"); returns once established.

        Raises :class:`exon.LinkRefused` on a permanent refusal (``.reason`` names it),
        :class:`exon.SocketNotFound` when the peer node has no such socket by the deadline,
        :class:`exon.Timeout` otherwise. Temporary refusals are retried by the core with a
        randomised, growing delay until the deadline.
        """
        self._linking.link(peer, timeout)

    def unlink(self, peer: str | Peer, timeout: float | None = 5.0) -> None:
        """Unlink from ``peer``; returns once the link closed. Nothing sent before is lost:
        the link closes when both directions were delivered (or the core's unlink timeout
        expired, in which case unconfirmed cookies come back as CookieLost)."""
        self._linking.unlink(peer, timeout)

    @property
    def peers(self) -> list[Peer]:
        """Peers with an established link."""
        return self._linking.peers()

    def windows(self) -> dict[Peer, int]:
        """The receive window (credits) each established link has now: the socket's
        ``credits``, or less while the node's memory budget is shared among more links (a
        window is budget / (links x max_message_size), docs/guide/tuning.md). A receiver
        that holds what it takes (``receive_held``) sizes its batches below these."""
        return self._linking.windows()

    def wait_for_links(self, count: int = 1, timeout: float | None = 5.0) -> None:
        """Block until at least ``count`` links are established (e.g. a REP or PULL waiting
        for its peers)."""
        self._linking.wait_for_links(count, timeout)

    #: how many peers' socket types _learn_peer_type remembers before it forgets closed links
    _PEER_TYPES_MAX: ClassVar[int] = 4096

    def _learn_peer_type(self, types: dict[PeerId, str], ev: LinkEstablished) -> list[PeerId]:
        """Lock held: note ``ev.peer``'s socket type in ``types`` (kept after its link
        closes: its messages may still be queued); past ``_PEER_TYPES_MAX`` entries the
        peers whose links are gone are forgotten first. Returns the forgotten peers."""
        forgotten: list[PeerId] = []
        if len(types) >= self._PEER_TYPES_MAX:
            live = self._core.links(self.tag)
            forgotten = [p for p in types if p not in live]
            for peer in forgotten:
                del types[peer]
        types[ev.peer] = ev.peer_metadata.socket_type
        return forgotten

    def _link_applied_locked(self, pid: PeerId) -> bool:
        """Lock held: whatever this socket type needs once a link is established is done
        (a SUB: the PUB applied its prefixes; ``alink`` waits for it). True for most types."""
        return True

    # ==== closing ============================================================================

    def _check_open(self) -> None:
        if self._closed:
            raise errors.ClosedError(f"socket {self.tag} is closed")
        if self.node.closed:
            raise errors.ClosedError("the node is closed")

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def close(self, timeout: float | None = 5.0) -> None:
        """Unlink everything and close. Everything sent before is delivered (the peers'
        applications receive it) within ``timeout``; after it, links are dropped and
        unconfirmed cookies are lost. What this socket received and its application did
        not take is dropped at once, with the links it came on (their senders get
        CookieLost for it). Idempotent."""
        deadline = _deadline(timeout)
        host = self._host
        with self._lock:
            if self._closed:
                return
            core = self._core
            unlinking = core.has_socket(self.tag) and not self.node.closed
            if unlinking:
                core.close_socket(self.tag, now=_monotonic())
            self._on_closing_locked()
            if unlinking:
                self._abort_untaken_locked()
                host.pump()
                try:
                    host.wait_until(self.wakeup, lambda: not core.has_socket(self.tag), deadline)
                except errors.ClosedError:
                    pass
            if core.has_socket(self.tag):
                core.close_socket(self.tag, now=_monotonic(), force=True)
                host.pump()
            self._closed = True
            self._close_doors()
            host.close_socket(self.tag)
            self._inbox.close()  # the queue holds the inbox's callbacks: a cycle, cut
            self._fast_slot = -1  # the slot may go to a new socket: never send on it again
            self.wakeup.notify_all()
            self.wakeup.wake_loops()  # async waiters see the close (ClosedError)

    def _abort_untaken_locked(self) -> None:
        """close() began: the messages still in the inbox will never be taken, so the links
        they came on cannot drain (a peer's DATA must be delivered before its link closes
        gracefully) and close() would wait out its timeout. Those links are dropped at
        once instead, as a PULL's held batches are: their senders get CookieLost for what
        was not taken, and the UNLINK already queued tells them."""
        self._abort_links_locked((peer, None) for peer in self._inbox.waiting_peers())

    def _abort_links_locked(self, links: Iterable[tuple[PeerId, int | None]],
                            tell: bool = False) -> None:
        """Drop the links with these peers (of these incarnations; None: the current one)
        at once (lock held); ``tell``: send each an UNLINK first. Stops once the core has
        let a closing socket go (its last link went)."""
        core = self._core
        now = _monotonic()
        aborted = False
        for peer, incarnation in links:
            if not core.has_socket(self.tag):
                break
            if tell:
                core.unlink(self.tag, peer, now=now, incarnation=incarnation)
            core.abort(self.tag, peer, now=now, incarnation=incarnation)
            aborted = True
        if aborted:
            self._host.pump()

    def _on_closing_locked(self) -> None:
        """Hook (lock held): close() began; every link is unlinking (its UNLINK queued for
        the peer) unless the node is closed. A subclass drops here the links that cannot
        drain (PULL: those with held messages, see PullSocket.receive_held)."""

    def _close_doors(self) -> None:
        """Disable the native doors (lock held) and drop them: calls go to the methods."""
        for door in self._doors:
            door.disable()
        self._doors.clear()
        self._sync_direct()
        for name in ("send", "receive"):
            self.__dict__.pop(name, None)

    def __enter__(self) -> Socket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<exon.Socket {self.type} {self.node.address}/{self.tag}>"


register_socket_factory(Socket)  # Node.socket(type) builds sockets through this
