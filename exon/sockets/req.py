"""REQ: one request at a time, round-robin over linked REPs, reply only from the peer asked.

Each request travels in an envelope: an 8-byte little-endian request id, then the payload
(the REP echoes the id in front of its reply). The REQ accepts a reply only when both the
peer and the id match the pending request; anything else (a late reply to a request that
timed out, a reply from another peer) is dropped and counted in :attr:`stale_dropped`.

The REQ never wedges: ``receive`` timing out abandons the request (its late reply will be
dropped), and a broken or closed link with the asked peer wakes ``receive`` with
:class:`exon.BrokenLink`; either way the next call may be ``send`` again. Calling
``send`` twice or ``receive`` before ``send`` raises :class:`exon.StateError` saying
which call is expected. Cookies (``send(..., cookie=obj)``) come back through ``receive``
before the reply.
"""

from __future__ import annotations

import random
import struct
from typing import Any, ClassVar

from exon import errors
from exon.core import LinkClosed, PeerId
from exon.middleware.node import CLIENT_SPIN
from exon.sockets.messages import Message
from exon.sockets.socket import Socket, _payload
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["ENVELOPE", "ReqSocket"]

ENVELOPE = struct.Struct("<Q")


class ReqSocket(Socket):
    """REQ: one request at a time, round-robin over its linked REPs; accepts only the reply to its
    pending request."""

    type = "req"
    _drop_attributes: ClassVar[dict[str, str]] = {"stale_reply": "stale_dropped"}
    _wait_spin = CLIENT_SPIN

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: tuple[PeerId, int] | None = None
        self._pending_broken: str | None = None
        self._pending_cookie = False
        #: (request id, has a cookie) of the request being sent, until _send_locked returns
        self._sending: tuple[int, bool] | None = None
        self._next_id = random.getrandbits(48)
        self.stale_dropped = 0

    # ---- sending -----------------------------------------------------------------------

    def _send_request(self, data: bytes, cookie: Any, timeout: float | None,
                      nowait: bool) -> None:
        payload = _payload(data)
        deadline = None if nowait or timeout is None else _deadline(timeout)
        with self._lock:
            self._check_open()
            if self._pending is not None:
                raise errors.StateError(
                    f"a request to {self._pending[0]} is pending: call receive() for its reply "
                    "before the next send()")
            self._next_id = (self._next_id + 1) & 0xFFFF_FFFF_FFFF_FFFF
            rid = self._next_id
            self._sending = (rid, cookie is not None)
            try:
                # the request becomes pending in _on_sent_locked, before its frame goes
                # out: a link found broken while sending it breaks the pending request
                self._send_locked(ENVELOPE.pack(rid) + payload, cookie, None, deadline,
                                  nowait)
            finally:
                self._sending = None

    def _on_sent_locked(self, destination: PeerId) -> None:
        sending = self._sending
        if sending is not None:
            self._pending = (destination, sending[0])
            self._pending_broken = None
            self._pending_cookie = sending[1]

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """Send a request to the next linked REP with credit (round-robin)."""
        self._send_request(data, cookie, timeout, False)

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """Send a request now or raise :class:`exon.BackPressured` (no linked REP has credit)."""
        self._send_request(data, cookie, None, True)

    # ---- receiving -----------------------------------------------------------------------

    def _check_receive_locked(self) -> None:
        if self._pending is None:
            raise errors.StateError("no request is pending: call send() before receive()")

    def _may_take_message(self) -> bool:
        # The request's cookie comes back before its reply: the reply waits for the FLOW
        # that confirms the request (at most the core's flow_delay behind it).
        pending = self._pending
        if self._pending_cookie and pending is not None:
            if self._core.pending_cookies(self.tag, pending[0]) > 0:
                return False
            self._pending_cookie = False
        return True

    def _accept_locked(self, payload: bytes, peer: PeerId) -> Message | None:
        pending = self._pending
        if (pending is None or peer != pending[0] or len(payload) < ENVELOPE.size
                or ENVELOPE.unpack_from(payload)[0] != pending[1]):
            self.stale_dropped += 1
            return None
        self._pending = None
        return Message(payload[ENVELOPE.size:], self._host.peer(peer))

    def _on_closed(self, ev: LinkClosed) -> None:
        super()._on_closed(ev)
        if self._pending is not None and ev.peer == self._pending[0]:
            self._pending_broken = ev.reason

    def _receive_blocked_error(self, epoch: int) -> errors.ExonError | None:
        if self._pending is not None and self._pending_broken is not None:
            return errors.BrokenLink(
                f"the link with {self._pending[0]}, which has the pending request, closed "
                f"({self._pending_broken})")
        return None

    def _on_receive_timeout(self) -> None:
        self._pending_cookie = False
        self._pending = None  # abandon: a late reply is dropped by its id

    def _on_receive_failure(self) -> None:
        self._pending_cookie = False
        self._pending = None
        self._pending_broken = None

    def reset(self) -> None:
        """Abandon the pending request (its reply, if it comes, is dropped)."""
        with self._lock:
            self._pending = None
            self._pending_broken = None
