"""exon: messaging sockets (req/rep, push/pull) over an Aeron-compatible transport.

The transport lives in :mod:`exon.transport.aeron`; the sans-IO middleware core in
:mod:`exon.core`. Errors are one hierarchy under :class:`exon.ExonError`.
"""

from __future__ import annotations

from exon.errors import (
    BackPressured,
    BrokenLink,
    BrokenLinkError,
    ClosedError,
    ConfigurationError,
    ExonError,
    LinkRefused,
    MessageTooLarge,
    ProtocolError,
    SocketNotFound,
    SocketNotLinked,
    StateError,
    Timeout,
)

__version__ = "0.1.0"

__all__ = [
    "BackPressured",
    "BrokenLink",
    "BrokenLinkError",
    "ClosedError",
    "ConfigurationError",
    "ExonError",
    "LinkRefused",
    "MessageTooLarge",
    "ProtocolError",
    "SocketNotFound",
    "SocketNotLinked",
    "StateError",
    "Timeout",
    "__version__",
]
