"""REP: fair-queues requests over its links and sends each reply to its requester.

``receive`` then ``send``, strictly alternating (:class:`exon.StateError` otherwise, saying
which call is expected). The reply goes to the peer of the last request with the request's
envelope (see :mod:`exon.sockets.req`) in front. If that requester's link is gone, the
reply is dropped and counted in :attr:`replies_dropped`, as ZeroMQ does.

A ``send`` that fails before the reply went out (:class:`exon.MessageTooLarge`: over what
the requester accepts; :class:`exon.Timeout` or :class:`exon.BackPressured`: no credit)
leaves the request unanswered: the next call is ``send`` again (a smaller reply, an error
reply, the same one later) or :meth:`reset`, which gives the request up (its REQ times
out). Any other failure gives the request up itself, so no failure leaves the REP unable to
take the next request.
"""

from __future__ import annotations

from typing import Any, ClassVar

from exon import errors
from exon.core import PeerId
from exon.middleware.node import CLIENT_SPIN
from exon.sockets.messages import Message
from exon.sockets.req import ENVELOPE
from exon.sockets.socket import Socket, _payload
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["RepSocket"]

#: send failures raised before anything went out: the request still waits for its answer
_NOT_SENT = (errors.MessageTooLarge, errors.Timeout, errors.BackPressured)


class RepSocket(Socket):
    """REP: receives requests fair-queued and sends each reply to its requester (receive, then
    send)."""

    type = "rep"
    _drop_attributes: ClassVar[dict[str, str]] = {"malformed": "malformed_dropped",
                                                  "requester_gone": "replies_dropped"}
    _wait_spin = CLIENT_SPIN

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._replying: tuple[PeerId, bytes] | None = None
        self.replies_dropped = 0
        self.malformed_dropped = 0

    def _may_take_message(self) -> bool:
        return self._replying is None

    def _check_receive_locked(self) -> None:
        if self._replying is not None:
            raise errors.StateError(
                f"the request from {self._replying[0]} is not answered yet: call send() with "
                "the reply before the next receive()")

    def _accept_locked(self, payload: bytes, peer: PeerId) -> Message | None:
        if len(payload) < ENVELOPE.size:
            self.malformed_dropped += 1
            return None
        self._replying = (peer, payload[: ENVELOPE.size])
        return Message(payload[ENVELOPE.size:], self._host.peer(peer))

    def _reply(self, data: bytes, cookie: Any, timeout: float | None, nowait: bool) -> None:
        payload = _payload(data)
        deadline = None if nowait or timeout is None else _deadline(timeout)
        with self._lock:
            self._check_open()
            if self._replying is None:
                raise errors.StateError("no request to answer: call receive() before send()")
            peer, envelope = self._replying
            try:
                self._send_locked(envelope + payload, cookie, peer, deadline, nowait)
            except (errors.SocketNotLinked, errors.BrokenLink):
                self.replies_dropped += 1  # the requester is gone
            except _NOT_SENT:
                raise  # nothing went out: the request still waits for its answer
            except BaseException:
                self._replying = None  # a reply that may be half gone is not sent again
                raise
            self._replying = None

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """Send the reply to the requester of the last received request."""
        self._reply(data, cookie, timeout, False)

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """Send the reply now or raise :class:`exon.BackPressured` (the requester has no credit for
        us)."""
        self._reply(data, cookie, None, True)

    def reset(self) -> None:
        """Give up the request being answered, if any (its REQ gets no reply and times out):
        the next call is ``receive``. For a reply that cannot be sent (see the module's
        doc)."""
        with self._lock:
            self._replying = None
