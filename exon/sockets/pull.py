"""PULL: receives fair-queued from its linked PUSHes; cannot send."""

from __future__ import annotations

from typing import Any

from exon import errors
from exon.sockets.socket import Socket

__all__ = ["PullSocket"]


class PullSocket(Socket):
    type = "pull"
    can_send = False

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        raise errors.StateError("a pull socket cannot send; link a push socket to send")

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        raise errors.StateError("a pull socket cannot send; link a push socket to send")
