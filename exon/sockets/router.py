"""ROUTER: receives fair-queued from every link and answers each peer by name.

``receive()`` returns a :class:`~exon.sockets.messages.Message` whose ``.peer`` names the
sender; ``send(data, peer=msg.peer)`` sends to that peer alone (blocking while its link has
no credit; ``send_nowait`` raises :class:`exon.BackPressured`). Unlike ZeroMQ's ROUTER,
which drops a message to an unknown peer without a word, a ``send`` to a peer that is not
linked (never was, unlinked, or its link broke) raises :class:`exon.SocketNotLinked`; a
``send`` without ``peer`` raises :class:`exon.ConfigurationError`. Cookies work as for
every socket (they come back through ``receive``).

A ROUTER links with DEALERs and with REQs (docs/protocol.md 2.4). A REQ puts its request
id in front of each request (2.16) and accepts only a reply carrying it: the ROUTER strips
the id from the request and keeps it, per REQ peer in arrival order, and puts the oldest
kept id in front of the next ``send`` to that peer. So answer each REQ's requests in the
order they came (a REQ has one live request; an older one it abandoned gets its answer
dropped by the REQ, as it would from a REP). A ``send`` to a REQ that has no request
waiting for an answer raises :class:`exon.StateError` (the REQ would drop it). A request
shorter than the envelope is dropped and counted in :attr:`malformed_dropped`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

from exon import errors
from exon.core import LinkEstablished, LinkState, PeerId
from exon.sockets.messages import Message, Peer
from exon.sockets.req import ENVELOPE
from exon.sockets.routed import RoutedDoorsMixin
from exon.sockets.socket import _payload
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["RouterSocket"]


class RouterSocket(RoutedDoorsMixin):
    """ROUTER: receives fair-queued from DEALERs and REQs, each message naming its sender;
    ``send(data, peer=...)`` answers that peer alone (see :mod:`exon.sockets.router`)."""

    type = "router"
    _drop_attributes: ClassVar[dict[str, str]] = {"malformed": "malformed_dropped"}
    _framed_peer_type = "req"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: socket type of every peer linked so far (kept after the link closes: its
        #: messages may still be queued)
        self._peer_types: dict[PeerId, str] = {}
        #: per REQ peer: the envelopes of its requests taken and not answered yet
        self._envelopes: dict[PeerId, deque[bytes]] = {}
        self.malformed_dropped = 0
        # send(data, peer=msg.peer) and receive() as native calls for the links with DEALERs
        # (exon.sockets.routed); REQ peers' envelopes keep the methods
        self._open_doors(RouterSocket.send, takes_peer=True)

    def _on_established(self, ev: LinkEstablished) -> None:
        super()._on_established(ev)
        for peer in self._learn_peer_type(self._peer_types, ev):
            self._envelopes.pop(peer, None)
        self._envelopes.pop(ev.peer, None)  # a new link: the old requests died with the old one
        self._route_established(ev)

    # ---- receiving -----------------------------------------------------------------------

    def _accept_locked(self, payload: bytes, peer: PeerId) -> Message | None:
        if self._peer_types.get(peer) == "req":
            if len(payload) < ENVELOPE.size:
                self.malformed_dropped += 1
                return None
            waiting = self._envelopes.get(peer)
            if waiting is None:
                waiting = self._envelopes[peer] = deque()
            waiting.append(payload[: ENVELOPE.size])
            payload = payload[ENVELOPE.size:]
        return Message(payload, self._host.peer(peer))

    # ---- sending -------------------------------------------------------------------------

    def send(self, data: bytes, *, peer: str | Peer | None = None, cookie: Any = None,
             timeout: float | None = None) -> None:
        """Send ``data`` to ``peer`` (a :class:`~exon.sockets.messages.Peer` such as a
        received message's ``.peer``, or ``"HOST:PORT/TAG"``); blocks up to ``timeout``
        seconds while that link has no credit."""
        self._route(data, peer, cookie, _deadline(timeout), False)

    def send_nowait(self, data: bytes, *, peer: str | Peer | None = None,
                    cookie: Any = None) -> None:
        """Send to ``peer`` now or raise :class:`exon.BackPressured` (no credit)."""
        self._route(data, peer, cookie, None, True)

    def _route(self, data: bytes, peer: str | Peer | None, cookie: Any,
               deadline: float | None, nowait: bool) -> None:
        if peer is None:
            raise errors.ConfigurationError(
                "a router socket sends to one peer: send(data, peer=message.peer)")
        pid = self._peer_id(peer)
        payload = _payload(data)
        with self._lock:
            self._check_open()
            if self._core.link_state(self.tag, pid) is not LinkState.ESTABLISHED:
                raise errors.SocketNotLinked(f"router {self.tag} is not linked with {pid}")
            envelope = None
            if self._peer_types.get(pid) == "req":
                waiting = self._envelopes.get(pid)
                if not waiting:
                    raise errors.StateError(
                        f"the req socket {pid} has no request waiting for an answer (a req "
                        "accepts one reply per request)")
                envelope = waiting.popleft()
                payload = envelope + payload
            try:
                self._send_locked(payload, cookie, pid, deadline, nowait)
            except errors.BrokenLink as exc:  # broke while waiting for credit
                raise errors.SocketNotLinked(f"router {self.tag}: {exc}") from None
            except (errors.BackPressured, errors.Timeout):
                if envelope is not None:  # not sent: the request still waits for its answer
                    self._envelopes[pid].appendleft(envelope)
                raise
