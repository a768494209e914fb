"""The one cookie of a ``send_many`` batch, made of one part per link it sent on.

Every link the batch sent on gets a *part* on the last message the batch put there
(``SocketCore.cookie_on_last_sent``). A link confirms its messages in order, so a returned
part means the peer's application took every message of the batch on that link. The
batch's cookie comes back once: as ``Cookie`` when every part came back, or as
``CookieLost`` at the first part lost (parts that come back after that are dropped). A
batch that sent nothing has no cookie. The socket's ``_on_cookie`` (exon.sockets.inbox)
resolves the parts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BatchCookie", "CookiePart"]


class BatchCookie:
    """The cookie of one ``send_many``: settled once, when its outcome is known."""

    __slots__ = ("open_parts", "parts", "sealed", "settled", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.parts = 0  #: parts attached so far
        self.open_parts = 0  #: parts neither returned nor lost
        self.sealed = False  #: the batch attaches no more parts
        self.settled = False  #: its Cookie or CookieLost went to the socket

    def part(self) -> CookiePart:
        self.parts += 1
        self.open_parts += 1
        return CookiePart(self)

    def resolve(self, *, lost: bool) -> bool | None:
        """A part came back (or was lost): None while the outcome is open or already told,
        else whether the batch's cookie is lost."""
        self.open_parts -= 1
        if self.settled:
            return None
        if lost:
            self.settled = True
            return True
        if self.sealed and self.open_parts == 0:
            self.settled = True
            return False
        return None

    def seal(self) -> bool | None:
        """No more parts: as :meth:`resolve`, for a batch whose parts all came back
        already (None too when the batch sent nothing: no cookie)."""
        self.sealed = True
        if self.settled or self.parts == 0 or self.open_parts:
            return None
        self.settled = True
        return False


class CookiePart:
    """What the core holds for one link of a batch (see :class:`BatchCookie`)."""

    __slots__ = ("batch",)

    def __init__(self, batch: BatchCookie) -> None:
        self.batch = batch
