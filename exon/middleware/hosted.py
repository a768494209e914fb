"""What a Node needs of the sockets it hosts, so the middleware never imports the sockets.

:class:`HostedSocket` is the interface a socket offers its node: the node calls these when
the core or the native fast path has something for the socket (the node's lock held).
The other direction, what a socket may call on its node, is
:class:`~exon.middleware.socket_host.SocketHost`.
The socket classes themselves live above, in ``exon.sockets``; they give the node their
constructor through :func:`register_socket_factory` when they are imported (``import
exon`` does), and ``Node.socket(type)`` calls it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from exon import errors
from exon.core import (
    ErrorReceived,
    LinkClosed,
    LinkEstablished,
    LinkRefused,
    MessageReceived,
    PeerId,
)
from exon.middleware.wakeup import Wakeup

__all__ = ["HostedSocket", "InboxOwner", "make_socket", "register_socket_factory"]


class InboxOwner(Protocol):
    """A socket's inbox (:class:`exon.sockets.inbox.Inbox`), as the fast path
    (:mod:`exon.middleware.fastpath`) and the native receive queue call it (the node's
    lock held)."""

    def lane(self, peer: PeerId) -> int: ...  # the inbox lane of the links with peer
    def on_due(self, link: int) -> None: ...  # a delivery counted on link needs the core
    # count messages of link incarnation with peer were handed out: the core counts them
    def on_core(self, peer: PeerId, incarnation: int, count: int) -> None: ...


class HostedSocket(Protocol):
    """A socket as its node sees it (every call with the node's lock held)."""

    tag: int
    type: ClassVar[str]  # "push", "pull", ...
    #: who waits on it (threads in blocking calls, event loops' tasks): woken when touched
    wakeup: Wakeup

    def _on_message(self, ev: MessageReceived) -> None: ...
    def _on_fast(self, token: Any, payload: bytes) -> None: ...
    def _on_cookie(self, value: Any, *, lost: bool) -> None: ...
    def _on_established(self, ev: LinkEstablished) -> None: ...
    def _on_refused(self, ev: LinkRefused) -> None: ...
    def _on_closed(self, ev: LinkClosed) -> None: ...
    def _on_error(self, ev: ErrorReceived) -> None: ...
    def _queued_bytes(self) -> int: ...  # payload bytes received, not yet taken
    def _queued(self) -> int: ...  # messages received, not yet taken
    def _drop_counts(self) -> dict[str, int]: ...  # messages it dropped, by reason
    def close(self, timeout: float | None = ...) -> None: ...


_factory: Callable[..., Any] | None = None


def register_socket_factory(factory: Callable[..., Any]) -> None:
    """Called by ``exon.sockets`` at import: ``factory(type=, tag=, node=, **options)``."""
    global _factory
    _factory = factory


#: the package that registers the default socket types, loaded by name on first use (the
#: middleware has no import of it: the sockets plug into the node, not the other way)
DEFAULT_SOCKETS = "exon.sockets"


def make_socket(node: Any, socket_type: str, tag: int | None, options: dict[str, Any]) -> Any:
    if _factory is None:
        importlib.import_module(DEFAULT_SOCKETS)
    if _factory is None:
        raise errors.StateError(f"no socket types are registered ({DEFAULT_SOCKETS} did not)")
    return _factory(type=socket_type, tag=tag, node=node, **options)
