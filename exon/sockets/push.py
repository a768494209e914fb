"""PUSH: sends round-robin over its linked PULLs, skipping those without credit.

``send`` blocks until some linked PULL has credit (``send_nowait`` raises
:class:`exon.BackPressured` instead). A PUSH receives nothing but its cookies:
``receive()`` returns Cookie/CookieLost items and raises :class:`exon.StateError` when no
cookie is pending or outstanding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from exon import errors
from exon.sockets.batch import send_many as _send_many
from exon.sockets.batch_cookie import CookiePart
from exon.sockets.socket import Socket, _payload
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["PushSocket"]


def _will_surface(cookie: Any) -> bool:
    """Whether a pending cookie will still come out of receive(): not the part of a
    send_many batch whose cookie was told already (lost at another part)."""
    return type(cookie) is not CookiePart or not cookie.batch.settled


class PushSocket(Socket):
    """PUSH: sends round-robin over its linked PULLs that have credit; receives only its cookies."""

    type = "push"
    can_receive = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        host = self._host
        with self._lock:
            # send() as one native call (credit, framing, offer); the method below takes
            # whatever the door cannot finish at once (cookie, no credit, backlog, ...)
            door = host.fast.send_door(host.lock, self._fast_slot, host.backlog,
                                       PushSocket.send.__get__(self))
            if (door is not None and not self._closed
                    and type(self).send is PushSocket.send):  # not for a subclass's own send
                self._doors.append(door)
                self.send = door  # type: ignore[method-assign]

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """Send ``data`` to the next linked PULL with credit; blocks up to ``timeout``."""
        payload = _payload(data)
        deadline = _deadline(timeout)
        with self._lock:  # the door missed: the link table's rule says why, once more
            self._send_locked(payload, cookie, None, deadline, False)

    def send_many(self, payloads: Iterable[Any], *, timeout: float | None = None,
                  cookie: Any = None) -> int:
        """Send every payload of ``payloads`` in order, as ``send`` would one after another,
        with one native call per run of credit; returns how many were sent (all).

        Where credit runs out midway it waits, as ``send`` does, until the whole batch is
        out or ``timeout`` (seconds for the whole batch; None: no limit) passed. An error
        has the type ``send`` would raise (:class:`exon.Timeout`,
        :class:`exon.MessageTooLarge`, :class:`exon.BrokenLink`, ...), says how many went
        out, and holds that count as ``.sent``: ``payloads[:sent]`` were sent, none after.

        ``cookie`` (not None) is the batch's one cookie: ``receive()`` returns
        ``Cookie(cookie)`` once the peers' applications took every message the batch sent,
        or ``CookieLost(cookie)`` as soon as a link broke before confirming its part of the
        batch; exactly one of them, and none when the batch sent nothing."""
        return _send_many(self, payloads, cookie, timeout)

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """Send now or raise :class:`exon.BackPressured` (no linked PULL has credit)."""
        payload = _payload(data)
        with self._lock:
            self._send_locked(payload, cookie, None, None, True)

    def _may_take_message(self) -> bool:
        return False

    def _check_receive_locked(self) -> None:
        if not self._core.any_pending_cookie(self.tag, _will_surface):
            raise errors.StateError(
                "a push socket cannot receive messages; receive() only returns the cookies "
                "of sends made with cookie=..., and none is pending")
