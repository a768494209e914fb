"""PUB: sends each message to every linked SUB subscribed to one of its prefixes.

Filtering happens here, at the publisher: every SUB tells its PUBs its prefixes over the
link (docs/protocol.md 2.19), so a message nobody wants never crosses the network, and a
message nobody subscribed to goes nowhere (as in ZeroMQ). Each subscriber's link has
credits like any other; what ``send`` does when a subscriber it must reach has none is the
socket option ``overflow``:

* ``"block"`` (default): nothing is lost. ``send`` waits (up to ``timeout``) until every
  subscriber the message is for has credit, then sends it to all of them; on
  :class:`exon.Timeout` it went to none. ``send_nowait`` raises :class:`exon.BackPressured`
  instead of waiting. One slow subscriber slows the publisher down.
* ``"drop"``: ``send`` never waits. A subscriber without credit misses the message; every
  such drop is counted per subscriber (:meth:`statistics`) and that SUB gets a
  :class:`~exon.sockets.messages.Dropped` item with the count in its stream, in the place of
  the gap: the notice goes out (it takes one credit) before the next message sent to that
  subscriber, at the next ``send`` of any message when the subscriber has credit again, or
  in :meth:`flush` (also done by :meth:`close`). Dropped count + messages delivered = sent.

A PUB receives nothing (``receive`` raises :class:`exon.StateError`), takes no cookies (a
message goes to many subscribers, or none) and has no ``subscribe``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, ClassVar

from exon import errors
from exon.core import LinkClosed, LinkEstablished, LinkState, MessageReceived, PeerId
from exon.core.pubsub import MESSAGE, PrefixFilter, SubKind, decode_subscription, encode_dropped
from exon.middleware.fastpath import HOLD_BACKLOG
from exon.sockets.messages import Peer
from exon.sockets.socket import Socket, _monotonic, _payload
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["PubSocket", "PubStatistics"]

_OVERFLOW = ("block", "drop")


@dataclass(frozen=True, slots=True, kw_only=True)
class PubStatistics:
    """A snapshot of a PUB's counters."""

    published: int  #: messages given to send() and sent (or dropped)
    sent: int  #: copies sent to subscribers (one per subscriber reached)
    dropped: int  #: copies dropped for subscribers without credit (policy "drop")
    dropped_by_peer: dict[Peer, int]  #: the drops per subscriber (ever linked)
    subscribers: int  #: linked SUBs now
    malformed_dropped: int  #: subscription payloads from SUBs that did not decode


class _Subscriber:
    __slots__ = ("filter", "pending", "rec", "token")

    def __init__(self) -> None:
        self.filter = PrefixFilter()
        self.pending = 0  #: drops not told to the subscriber yet
        self.token: Any = None  #: the native link (FastLink) while attached
        self.rec: Any = None  #: its link-table record (credit: limit - sent)


class PubSocket(Socket):
    """PUB: sends each message to every linked SUB subscribed to a prefix of it (the PUB
    filters); ``overflow="block"`` or ``"drop"`` says what a subscriber without credit
    costs (see :mod:`exon.sockets.pub`)."""

    type = "pub"
    _drop_attributes: ClassVar[dict[str, str]] = {
        "malformed_subscription": "malformed_dropped",
        "subscriber_without_credit": "_dropped_total"}
    can_receive = False
    _native_queue = False  # subscriptions are applied as they arrive (_on_fast/_on_message)

    def __init__(self, *args: Any, overflow: str = "block", **kwargs: Any) -> None:
        if overflow not in _OVERFLOW:
            raise errors.ConfigurationError(
                f"overflow must be 'block' or 'drop', not {overflow!r}")
        self.overflow = overflow
        self._subs: dict[PeerId, _Subscriber] = {}
        self._dropped: dict[PeerId, int] = {}
        self._published = 0
        self._sent = 0
        self.malformed_dropped = 0
        #: the native send (exon_fast_pubsub.c PubSend), None without it; it publishes while
        #: it has the subscribers' description (_describe_locked), the order of _targets
        self._door: Any = None
        self._targets: list[tuple[PeerId, _Subscriber]] = []
        super().__init__(*args, **kwargs)
        host = self._host
        with self._lock:
            door = host.fast.pub_door(host.lock, self._fast_slot, host.backlog,
                                      PubSocket.send.__get__(self), self._door_rest)
            if (door is not None and not self._closed
                    and type(self).send is PubSocket.send):  # not for a subclass's own send
                self._door = door
                self._doors.append(door)
                self.send = door  # type: ignore[method-assign]

    # ---- subscriptions (node callbacks, lock held) ------------------------------------------

    def _may_take_message(self) -> bool:
        return False  # nothing to hand out (and not "plain": no native receive door)

    def _forget_targets(self) -> None:
        """The subscribers changed (lock held): the door steps aside until described again."""
        if self._door is not None:
            self._door.set_targets(None)

    def _describe_locked(self) -> None:
        """Give the door every subscriber (its link and prefixes) if it can publish for all
        of them: each linked natively, none with drops to tell. Lock held."""
        door = self._door
        if door is None or door.valid or self._closed:
            return
        fast = self._host.fast
        targets: list[tuple[PeerId, _Subscriber]] = []
        described: list[tuple[int, int, int, int, tuple[bytes, ...] | None]] = []
        for peer, sub in self._subs.items():
            if sub.pending:
                return
            token = fast.by_link.get((self.tag, peer))
            if token is None or not token.attached:
                if self._core.link_state(self.tag, peer) is LinkState.ESTABLISHED:
                    return  # on the core's path: Python sends to it
                continue  # unlinking (no target) or not established yet (no credit)
            if not len(sub.filter):
                continue
            prefixes = sub.filter.as_tuple()
            targets.append((peer, sub))
            described.append((*fast.target(token), prefixes))
        self._targets = targets
        door.set_targets(described)

    def _door_rest(self, payload: bytes, start: int) -> None:
        """The door's offer to ``_targets[start]`` failed (lock held, the others before it
        have the message): send to it and the rest the Python way, which queues what cannot
        go now."""
        data = payload[1:]
        for peer, sub in self._targets[start:]:
            if sub.filter.matches(data) and self._credit(peer, sub) > 0:
                self._emit(peer, sub, payload)
                self._sent += 1
        self._host.flush()

    def _apply(self, peer: PeerId, payload: bytes) -> None:
        self._forget_targets()
        try:
            kind, prefix = decode_subscription(payload)
        except errors.FrameDecodeError:
            self.malformed_dropped += 1
            return
        sub = self._subs.get(peer)
        if sub is None:
            sub = self._subs[peer] = _Subscriber()
        if kind is SubKind.SUBSCRIBE:
            sub.filter.add(prefix)
        else:
            sub.filter.discard(prefix)

    def _on_fast(self, token: Any, payload: bytes) -> None:
        self._apply(token.peer, payload)
        # delivered at once: the credit (and the SUB's cookie, which its subscribe() waits
        # for) goes back in the next FLOW
        if token.attached:
            if self._deliver(token.index):
                self._core.delivered_natively(self.tag, token.peer, now=_monotonic())
        else:
            self._core.deliver(MessageReceived(tag=self.tag, peer=token.peer, payload=payload,
                                               incarnation=token.incarnation), now=_monotonic())

    def _on_message(self, ev: MessageReceived) -> None:
        self._apply(ev.peer, ev.payload)
        self._core.deliver(ev, now=_monotonic())

    def _on_established(self, ev: LinkEstablished) -> None:
        super()._on_established(ev)
        self._forget_targets()
        self._subs.setdefault(ev.peer, _Subscriber())

    def _on_closed(self, ev: LinkClosed) -> None:
        super()._on_closed(ev)
        self._forget_targets()
        self._subs.pop(ev.peer, None)

    # ---- sending ----------------------------------------------------------------------------

    def _credit(self, peer: PeerId, sub: _Subscriber) -> int:
        """Credit towards ``peer``; -1 when its link is no longer ESTABLISHED (unlinking:
        it takes no more DATA, so it is no target any more)."""
        token = sub.token
        if token is None or not token.attached:
            token = sub.token = self._host.fast.by_link.get((self.tag, peer))
            sub.rec = None if token is None else self._host.fast.record(token)
        if token is not None:
            rec = sub.rec
            return int(rec.limit - rec.sent)
        if self._core.link_state(self.tag, peer) is not LinkState.ESTABLISHED:
            return -1
        return self._core.credits(self.tag, peer)

    def _emit(self, peer: PeerId, sub: _Subscriber, payload: bytes) -> None:
        """Send one payload to ``peer`` (credit checked by the caller). Lock held."""
        token = sub.token
        if token is not None and token.attached:
            hold = HOLD_BACKLOG if self._host.backlog else 0
            if self._fast_send(self._fast_slot, token.index, payload, hold) >= 0:
                return
        self._send_locked(payload, None, peer, None, True)

    def _count_drop(self, peer: PeerId, sub: _Subscriber) -> None:
        self._forget_targets()
        sub.pending += 1
        self._dropped[peer] = self._dropped.get(peer, 0) + 1

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """Publish ``data`` to every subscriber with a matching prefix (see the module
        docstring for ``overflow``)."""
        self._publish(data, cookie, _deadline(timeout), False)

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """Publish now; under "block" raise :class:`exon.BackPressured` (nothing sent) when
        a subscriber the message is for has no credit."""
        self._publish(data, cookie, None, True)

    def _publish(self, data: bytes, cookie: Any, deadline: float | None, nowait: bool) -> None:
        if cookie is not None:
            raise errors.ConfigurationError(
                "a pub socket takes no cookie: a message goes to many subscribers, or none")
        data = _payload(data)
        payload = MESSAGE + data
        with self._lock:
            self._check_open()
            self._host.activity += 1
            if self.overflow == "block":
                self._publish_block_locked(data, payload, deadline, nowait)
            else:
                self._publish_drop_locked(data, payload)
            self._published += 1
            self._host.flush()
            self._describe_locked()

    def _publish_block_locked(self, data: bytes, payload: bytes, deadline: float | None,
                              nowait: bool) -> None:
        subs = self._subs
        polled = False
        while True:
            targets = [(p, s) for p, s in subs.items() if s.filter.matches(data)]
            credits = [self._credit(p, s) for p, s in targets]
            if 0 not in credits:
                targets = [t for t, c in zip(targets, credits, strict=True) if c > 0]
                break
            if nowait:
                if self._polled_for_credit_locked(polled):
                    polled = True
                    continue
                raise errors.BackPressured(f"pub {self.tag}: a subscriber has no credit")

            def ready() -> bool:
                return self._closed or all(
                    self._credit(p, s) != 0 for p, s in subs.items() if s.filter.matches(data))

            if not self._host.wait_until(self.wakeup, ready, deadline):
                raise errors.Timeout("a subscriber had no credit before the timeout "
                                     "(the message was sent to none)")
            self._check_open()
        for peer, sub in targets:
            if sub.pending:  # the socket was switched from "drop": tell the gap first
                self._tell_drops(peer, sub)
            self._emit(peer, sub, payload)
            self._sent += 1

    def _tell_drops(self, peer: PeerId, sub: _Subscriber) -> None:
        count, sub.pending = sub.pending, 0
        self._emit(peer, sub, encode_dropped(count))

    def _publish_drop_locked(self, data: bytes, payload: bytes) -> None:
        for peer, sub in self._subs.items():
            match = sub.filter.matches(data)
            if not match and not sub.pending:
                continue
            credit = self._credit(peer, sub)
            if credit < 0:
                continue  # unlinking: no more DATA to it
            if sub.pending:
                if credit <= 0:
                    if match:
                        self._count_drop(peer, sub)
                    continue
                if match and credit == 1:  # room for the notice only: it covers this one too
                    self._count_drop(peer, sub)
                    match = False
                self._tell_drops(peer, sub)
                credit -= 1
            if match:
                if credit > 0:
                    self._emit(peer, sub, payload)
                    self._sent += 1
                else:
                    self._count_drop(peer, sub)

    def flush(self, timeout: float | None = 5.0) -> None:
        """Send every pending :class:`Dropped` notice (policy "drop"), waiting up to
        ``timeout`` for the subscribers' credit; :class:`exon.Timeout` if some could not be
        told (their SUBs still get the count before their next message)."""
        deadline = _deadline(timeout)
        with self._lock:
            self._check_open()
            subs = self._subs

            def told() -> bool:
                for peer, sub in subs.items():
                    if sub.pending and self._credit(peer, sub) > 0:
                        self._tell_drops(peer, sub)
                self._host.flush()
                return self._closed or not any(
                    s.pending and self._credit(p, s) >= 0 for p, s in subs.items())

            if not self._host.wait_until(self.wakeup, told, deadline):
                waiting = sum(1 for s in subs.values() if s.pending)
                raise errors.Timeout(f"drop notices for {waiting} subscriber(s) still wait for "
                                     f"credit after {timeout}s")

    def close(self, timeout: float | None = 5.0) -> None:
        """Tell every subscriber its pending drops (:meth:`flush`), then close as every
        socket does (everything sent is delivered within ``timeout``)."""
        deadline = _deadline(timeout)
        if not self._closed and any(s.pending for s in self._subs.values()):
            with contextlib.suppress(errors.Timeout, errors.ClosedError):
                self.flush(None if deadline is None else max(0.0, deadline - _monotonic()))
        super().close(None if deadline is None else max(0.0, deadline - _monotonic()))

    # ---- not for a PUB ---------------------------------------------------------------------

    def receive(self, timeout: float | None = None) -> Any:
        """A PUB receives nothing: raises :class:`exon.StateError`."""
        raise errors.StateError("a pub socket cannot receive; link a sub socket to receive")

    def receive_nowait(self) -> Any:
        """A PUB receives nothing: raises :class:`exon.StateError`."""
        raise errors.StateError("a pub socket cannot receive; link a sub socket to receive")

    def subscribe(self, prefix: bytes = b"", timeout: float | None = 5.0) -> None:
        """Only a SUB subscribes: raises :class:`exon.StateError`."""
        raise errors.StateError("subscribe() is for sub sockets; a pub filters for its subs")

    def unsubscribe(self, prefix: bytes = b"", timeout: float | None = 5.0) -> None:
        """Only a SUB unsubscribes: raises :class:`exon.StateError`."""
        raise errors.StateError("unsubscribe() is for sub sockets; a pub filters for its subs")

    @property
    def _dropped_total(self) -> int:
        """Copies dropped for subscribers without credit, all subscribers (lock held)."""
        return sum(self._dropped.values())

    def statistics(self) -> PubStatistics:
        """A snapshot of the PUB's counters: messages published, and per subscriber the
        messages dropped for it (``overflow="drop"``)."""
        with self._lock:
            peer = self._host.peer
            door = self._door
            return PubStatistics(
                published=self._published + (0 if door is None else door.published),
                sent=self._sent + (0 if door is None else door.sent),
                dropped=sum(self._dropped.values()),
                dropped_by_peer={peer(p): n for p, n in self._dropped.items()},
                subscribers=len(self._subs),
                malformed_dropped=self.malformed_dropped,
            )
