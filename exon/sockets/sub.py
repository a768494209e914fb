"""SUB: receives, fair-queued, the messages of its PUBs that start with one of its prefixes.

``subscribe(prefix)`` / ``unsubscribe(prefix)`` (bytes; ``b""`` = everything) are counted
as in ZeroMQ: two subscribes of one prefix need two unsubscribes. The SUB tells every
linked PUB each change (docs/protocol.md 2.19) and the PUB filters, so unwanted messages do
not cross the network. Both calls return once every linked PUB has applied the change (its
delivery came back, as a cookie does), so a message published after that is filtered by
it; :meth:`link` likewise returns once the new PUB has every current prefix. A message
that was in flight when its prefix was unsubscribed is dropped here (counted in
:attr:`filtered`).

``receive()`` returns :class:`~exon.sockets.messages.Message` items and, from a PUB whose
``overflow`` is ``"drop"``, :class:`~exon.sockets.messages.Dropped` items: how many messages
that PUB dropped for this SUB at that point of its stream. A SUB cannot send
(:class:`exon.StateError`). Credits (``credits=``) bound what a PUB may send ahead.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

from exon import errors
from exon.core import LinkClosed, LinkEstablished, LinkState, PeerId
from exon.core.pubsub import (
    MAX_PREFIX,
    PrefixFilter,
    PubKind,
    SubKind,
    decode_published,
    encode_subscription,
)
from exon.sockets.messages import Dropped, Message, Peer
from exon.sockets.socket import Socket, _monotonic
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["SubSocket"]


class _Told:
    """The (internal) cookie of a subscription message: which PUB it went to."""

    __slots__ = ("peer",)

    def __init__(self, peer: PeerId) -> None:
        self.peer = peer


class SubSocket(Socket):
    """SUB: receives, fair-queued, the messages of its PUBs that start with one of its
    prefixes (:meth:`subscribe`); cannot send (see :mod:`exon.sockets.sub`)."""

    type = "sub"
    _drop_attributes: ClassVar[dict[str, str]] = {"malformed": "malformed_dropped"}
    can_send = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._counts: dict[bytes, int] = {}  #: subscribe() minus unsubscribe() per prefix
        self._filter = PrefixFilter()
        #: per PUB: subscription messages sent and not yet applied (their cookie pending)
        self._unconfirmed: dict[PeerId, int] = {}
        #: per PUB: subscription messages waiting for credit, in order
        self._untold: dict[PeerId, deque[bytes]] = {}
        self.malformed_dropped = 0
        self.filtered = 0
        super().__init__(*args, **kwargs)
        host = self._host
        with self._lock:
            # receive() as one native call while this SUB takes every published message
            # (the queue's pass_all): the method below takes the rest (Dropped, filtering)
            nq = self._inbox.nq
            door = None if nq is None else host.fast.sub_door(
                host.lock, nq, Message, Socket.receive.__get__(self))
            if (door is not None and not self._closed
                    and type(self).receive is Socket.receive):  # not for a subclass's own
                self._doors.append(door)
                self.receive = door  # type: ignore[method-assign]

    # ---- subscriptions ------------------------------------------------------------------------

    @staticmethod
    def _check_prefix(prefix: Any) -> bytes:
        if not isinstance(prefix, (bytes, bytearray, memoryview)):
            raise errors.ConfigurationError(f"a prefix is bytes, not {type(prefix).__name__}")
        data = bytes(prefix)
        if len(data) > MAX_PREFIX:
            raise errors.ConfigurationError(f"a prefix is at most {MAX_PREFIX} bytes")
        return data

    def subscribe(self, prefix: bytes = b"", timeout: float | None = 5.0) -> None:
        """Receive the messages that start with ``prefix`` (``b""``: all); returns once
        every linked PUB applied it (:class:`exon.Timeout` otherwise; the subscription
        stands and reaches the PUBs as credit allows)."""
        prefix = self._check_prefix(prefix)
        deadline = _deadline(timeout)
        with self._lock:
            self._check_open()
            count = self._counts.get(prefix, 0)
            self._counts[prefix] = count + 1
            if count == 0:
                self._filter.add(prefix)
                self._filter_changed()
                self._tell_all_locked(SubKind.SUBSCRIBE, prefix)
            self._wait_applied_locked(None, deadline, timeout)

    def unsubscribe(self, prefix: bytes = b"", timeout: float | None = 5.0) -> None:
        """Undo one :meth:`subscribe` of ``prefix``; :class:`exon.StateError` when it is not
        subscribed. Returns once every linked PUB applied it."""
        prefix = self._check_prefix(prefix)
        deadline = _deadline(timeout)
        with self._lock:
            self._check_open()
            count = self._counts.get(prefix, 0)
            if count == 0:
                raise errors.StateError(f"not subscribed to {prefix!r}")
            if count == 1:
                del self._counts[prefix]
                self._filter.discard(prefix)
                self._filter_changed()
                self._tell_all_locked(SubKind.UNSUBSCRIBE, prefix)
            else:
                self._counts[prefix] = count - 1
            self._wait_applied_locked(None, deadline, timeout)

    def _filter_changed(self) -> None:
        """The native queue's door may hand out messages unfiltered only while the filter
        takes everything (lock held)."""
        if self._inbox.nq is not None:
            self._inbox.nq.pass_all = 1 if self._filter.everything else 0

    @property
    def subscriptions(self) -> list[bytes]:
        """The prefixes subscribed now (each once)."""
        with self._lock:
            return sorted(self._counts)

    def _tell_all_locked(self, kind: SubKind, prefix: bytes) -> None:
        payload = encode_subscription(kind, prefix)
        for peer in self._core.established(self.tag):
            self._tell_locked(peer, payload)
        self._host.pump()

    def _tell_locked(self, peer: PeerId, payload: bytes) -> None:
        """Send one subscription message to ``peer`` (or queue it behind those waiting for
        credit). The caller sends the core's frames."""
        untold = self._untold.get(peer)
        if untold:
            untold.append(payload)
            return
        try:
            self._core.send(self.tag, payload, cookie=_Told(peer), destination=peer,
                            now=_monotonic())
        except errors.BackPressured:
            self._untold.setdefault(peer, deque()).append(payload)
        else:
            self._unconfirmed[peer] = self._unconfirmed.get(peer, 0) + 1

    def _retell_locked(self) -> None:
        """Send what waited for credit, as far as credit allows (lock held)."""
        core, tag = self._core, self.tag
        for peer in list(self._untold):
            queue = self._untold[peer]
            if core.link_state(tag, peer) is not LinkState.ESTABLISHED:
                del self._untold[peer]
                continue
            while queue and core.credits(tag, peer) > 0:
                core.send(tag, queue.popleft(), cookie=_Told(peer), destination=peer,
                          now=_monotonic())
                self._unconfirmed[peer] = self._unconfirmed.get(peer, 0) + 1
            if not queue:
                del self._untold[peer]
        self._host.flush()

    def _wait_applied_locked(self, peer: PeerId | None, deadline: float | None,
                             timeout: float | None) -> None:
        """Until the PUB ``peer`` (None: every PUB) applied every subscription message."""

        def applied() -> bool:
            if self._untold:
                self._retell_locked()
            if self._closed:
                return True
            if peer is not None:
                return not self._unconfirmed.get(peer) and peer not in self._untold
            return not any(self._unconfirmed.values()) and not self._untold

        if not self._host.wait_until(self.wakeup, applied, deadline):
            raise errors.Timeout(f"the pub socket(s) did not apply the subscription in "
                                 f"{timeout}s")
        self._check_open()

    def link(self, peer: str | Peer, timeout: float | None = 5.0) -> None:
        """Link with the PUB ``peer``; returns once established and the PUB has every
        current prefix of this SUB."""
        pid = self._peer_id(peer)
        deadline = _deadline(timeout)
        super().link(peer, timeout)
        with self._lock:
            self._wait_applied_locked(pid, deadline, timeout)

    def _link_applied_locked(self, pid: PeerId) -> bool:
        """The PUB ``pid`` has applied every current prefix (alink waits for it too)."""
        return self._closed or (not self._unconfirmed.get(pid) and pid not in self._untold)

    # ---- node callbacks (lock held) -----------------------------------------------------------

    def _on_established(self, ev: LinkEstablished) -> None:
        super()._on_established(ev)
        for prefix in self._counts:  # the new PUB learns every prefix (sent by the pump)
            self._tell_locked(ev.peer, encode_subscription(SubKind.SUBSCRIBE, prefix))

    def _on_closed(self, ev: LinkClosed) -> None:
        super()._on_closed(ev)
        self._unconfirmed.pop(ev.peer, None)
        self._untold.pop(ev.peer, None)

    def _on_cookie(self, value: Any, *, lost: bool) -> None:
        if isinstance(value, _Told):  # every cookie of a SUB is one of these
            left = self._unconfirmed.get(value.peer, 0) - 1
            if left > 0 and not lost:
                self._unconfirmed[value.peer] = left
            else:
                self._unconfirmed.pop(value.peer, None)

    # ---- receiving ----------------------------------------------------------------------------

    def _accept_locked(self, payload: bytes, peer: PeerId) -> Any:
        try:
            kind, value = decode_published(payload)
        except errors.FrameDecodeError:
            self.malformed_dropped += 1
            return None
        if kind is PubKind.DROPPED:
            return Dropped(int(value), self._host.peer(peer))
        data = value
        assert isinstance(data, bytes)
        if not self._filter.matches(data):
            self.filtered += 1  # in flight when its prefix was unsubscribed
            return None
        return Message(data, self._host.peer(peer))

    # ---- not for a SUB --------------------------------------------------------------------

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """A SUB cannot send: raises :class:`exon.StateError`."""
        raise errors.StateError("a sub socket cannot send; publish with a pub socket")

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """A SUB cannot send: raises :class:`exon.StateError`."""
        raise errors.StateError("a sub socket cannot send; publish with a pub socket")
