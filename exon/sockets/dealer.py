"""DEALER: many requests in flight, round-robin out, fair-queued in (push + pull in one).

``send`` goes to the next linked peer with credit (round-robin, blocking while none has
credit; ``send_nowait`` raises :class:`exon.BackPressured`), ``receive`` returns the next
reply, fair-queued over the links, as a :class:`~exon.sockets.messages.Message` whose
``.peer`` says who answered. Nothing pairs requests with replies: put an id in the payload
if you need to (a ROUTER answers each request on the link it came from). Credits and
cookies work as for every socket: ``send(..., cookie=obj)`` gives back ``Cookie(obj)``
through ``receive`` once the peer took the message, ``CookieLost(obj)`` if its link closed
first.

A DEALER links with ROUTERs and with REPs (docs/protocol.md 2.4). A REP expects the REQ
envelope (2.16: an 8-byte request id in front of the request, echoed in front of the
reply), so towards a REP the DEALER adds a fresh id to each request and strips it from the
reply; towards a ROUTER nothing is added (links are point-to-point with identities, so
ZeroMQ's envelope frames have nothing to carry). A reply from a REP shorter than the
envelope is dropped and counted in :attr:`malformed_dropped`.

``receive`` raises :class:`exon.BrokenLink` when no link is established and a link broke
since the last ``receive`` that raised it (the replies it waits for cannot come), whether
the link broke while it waited, before it was called, or in the ``send`` that found the
peer's node gone.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from exon import errors
from exon.core import LinkClosed, LinkEstablished, PeerId
from exon.sockets.messages import Message
from exon.sockets.req import ENVELOPE
from exon.sockets.routed import RoutedDoorsMixin
from exon.sockets.socket import _payload
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["DealerSocket"]


class DealerSocket(RoutedDoorsMixin):
    """DEALER: many requests in flight, round-robin out over ROUTERs and REPs, replies
    fair-queued in (see :mod:`exon.sockets.dealer`)."""

    type = "dealer"
    _drop_attributes: ClassVar[dict[str, str]] = {"malformed": "malformed_dropped"}
    _framed_peer_type = "rep"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: socket type of every peer linked so far (kept after the link closes: its
        #: messages may still be queued)
        self._peer_types: dict[PeerId, str] = {}
        self._reps: set[PeerId] = set()  #: established links with a REP (framed requests)
        self._next_id = random.getrandbits(48)
        self.malformed_dropped = 0
        #: the links broken up to this epoch were reported by a receive (BrokenLink)
        self._reported_epoch = 0
        # send() round-robin and receive() as native calls while no link needs the REQ
        # envelope (exon.sockets.routed)
        self._open_doors(DealerSocket.send, takes_peer=False)
        if self._routes is not None:
            self._routes.round_robin = 1

    # ---- links ---------------------------------------------------------------------------

    def _on_established(self, ev: LinkEstablished) -> None:
        super()._on_established(ev)
        self._learn_peer_type(self._peer_types, ev)
        if ev.peer_metadata.socket_type == "rep":
            self._reps.add(ev.peer)
        else:
            self._reps.discard(ev.peer)
        self._route_established(ev)
        self._sync_round_robin()

    def _on_closed(self, ev: LinkClosed) -> None:
        super()._on_closed(ev)
        self._reps.discard(ev.peer)
        self._sync_round_robin()

    def _sync_round_robin(self) -> None:
        """The send door goes round-robin natively only while no REP is linked (a REP's
        requests need the envelope the method adds)."""
        if self._routes is not None:
            self._routes.round_robin = 0 if self._reps else 1

    # ---- sending -------------------------------------------------------------------------

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """Send ``data`` to the next linked peer with credit (round-robin); blocks up to
        ``timeout`` seconds while none has credit."""
        payload = _payload(data)
        with self._lock:
            self._send_request_locked(payload, cookie, _deadline(timeout), False)

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """Send now or raise :class:`exon.BackPressured` (no linked peer has credit)."""
        payload = _payload(data)
        with self._lock:
            self._send_request_locked(payload, cookie, None, True)

    def _send_request_locked(self, payload: bytes, cookie: Any, deadline: float | None,
                             nowait: bool) -> None:
        self._check_open()
        if not self._reps:
            # ROUTERs only: the payload goes as it is, round-robin natively when it can
            self._send_locked(payload, cookie, None, deadline, nowait)
            return
        # a REP among the links: pick the destination here, to frame for its type
        core, tag = self._core, self.tag
        epoch = self._broken_epoch
        polled = False
        while True:
            dest = core.pick_destination(tag)
            if dest is not None:
                if self._peer_types.get(dest) == "rep":
                    self._next_id = (self._next_id + 1) & 0xFFFF_FFFF_FFFF_FFFF
                    framed = ENVELOPE.pack(self._next_id) + payload
                else:
                    framed = payload
                self._send_locked(framed, cookie, dest, deadline, nowait)
                return
            if nowait:
                if self._polled_for_credit_locked(polled):
                    polled = True
                    continue
                raise errors.BackPressured(f"socket {tag}: no linked peer has credit")

            def ready() -> bool:
                if self._closed or (self._broken_epoch != epoch and not core.established(tag)):
                    return True
                return any(core.credits(tag, p) > 0 for p in core.established(tag))

            if not self._host.wait_until(self.wakeup, ready, deadline):
                raise self._credit_timeout_locked()
            self._check_open()
            if (broke := self._every_link_broke(epoch)) is not None:
                raise broke

    # ---- receiving -----------------------------------------------------------------------

    def _accept_locked(self, payload: bytes, peer: PeerId) -> Message | None:
        if self._peer_types.get(peer) == "rep":
            if len(payload) < ENVELOPE.size:
                self.malformed_dropped += 1
                return None
            payload = payload[ENVELOPE.size:]
        return Message(payload, self._host.peer(peer))

    def _receive_blocked_error(self, epoch: int) -> errors.ExonError | None:
        # not only the links that break while this call waits: once every link is down no
        # reply can come, whenever they broke (in the very send that found the peer's node
        # gone, or between the send and this call); each break is reported once
        return self._every_link_broke(self._reported_epoch)

    def _on_receive_failure(self) -> None:
        self._reported_epoch = self._broken_epoch
