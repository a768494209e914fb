"""The CookieJar: per-link cookies waiting for delivery confirmation.

``send(data, cookie=obj)`` stores ``obj`` against the DATA frame's sequence number; the
object never leaves the sender. When FLOW says the peer's application has received every
message below ``delivered``, the cookies of those sequence numbers come back, each exactly
once (:meth:`CookieJar.confirm`). When the link closes first, :meth:`CookieJar.lose_all`
hands back every cookie still waiting: the core reports each as a ``CookieLost`` event
(delivery *not confirmed*; the message may or may not have been delivered).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any


class CookieJar:
    """Cookies of one link, in sequence order. Messages without a cookie cost nothing."""

    __slots__ = ("_pending", "lost", "returned")

    def __init__(self) -> None:
        self._pending: deque[tuple[int, Any]] = deque()
        self.returned = 0
        self.lost = 0

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, sequence: int, cookie: Any) -> None:
        """Remember ``cookie`` for the DATA frame numbered ``sequence`` (increasing)."""
        if self._pending and sequence <= self._pending[-1][0]:
            raise ValueError("cookie sequence numbers must increase")
        self._pending.append((sequence, cookie))

    def values(self) -> Iterator[Any]:
        """The cookies waiting, in sequence order."""
        return (cookie for _sequence, cookie in self._pending)

    def confirm(self, delivered: int) -> list[Any]:
        """Pop and return the cookies of every sequence number < ``delivered``."""
        out: list[Any] = []
        pending = self._pending
        while pending and pending[0][0] < delivered:
            out.append(pending.popleft()[1])
        self.returned += len(out)
        return out

    def lose_all(self) -> list[Any]:
        """Pop and return every cookie still waiting (the link closed first)."""
        out = [cookie for _seq, cookie in self._pending]
        self._pending.clear()
        self.lost += len(out)
        return out
