"""exon: messaging sockets (req/rep, push/pull, dealer/router, pub/sub) over an
Aeron-compatible transport.

The transport lives in :mod:`exon.transport.aeron`; the sans-IO middleware core in
:mod:`exon.core`. Errors are one hierarchy under :class:`exon.ExonError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from exon.errors import (
    ArgumentTypeError,
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

# The middleware and sockets load the native core: import them on first use, so that
# ``import exon`` (and ``exon --help``) stays light.
_LAZY = {
    "Node": "exon.middleware.node",
    "Socket": "exon.sockets.socket",
    "Message": "exon.sockets.messages",
    "Cookie": "exon.sockets.messages",
    "CookieLost": "exon.sockets.messages",
    "HeldBatch": "exon.sockets.messages",
    "Peer": "exon.sockets.messages",
    "DealerSocket": "exon.sockets.dealer",
    "RouterSocket": "exon.sockets.router",
    "Dropped": "exon.sockets.messages",
    "PubSocket": "exon.sockets.pub",
    "PubStatistics": "exon.sockets.pub",
    "SubSocket": "exon.sockets.sub",
    "default_node": "exon.middleware.default_node",
    "Keypair": "exon.crypto",
    "EncryptedPolicy": "exon.crypto",
    "ANY_KEY": "exon.crypto",
    "sweep_stale_driver_dirs": "exon.middleware.node_driver",
}

if TYPE_CHECKING:  # what the lazy names are, for type checkers (run time: __getattr__ below)
    from exon.crypto import ANY_KEY, EncryptedPolicy, Keypair
    from exon.middleware.default_node import default_node
    from exon.middleware.node import Node
    from exon.middleware.node_driver import sweep_stale_driver_dirs
    from exon.sockets.dealer import DealerSocket
    from exon.sockets.messages import Cookie, CookieLost, Dropped, HeldBatch, Message, Peer
    from exon.sockets.pub import PubSocket, PubStatistics
    from exon.sockets.router import RouterSocket
    from exon.sockets.socket import Socket
    from exon.sockets.sub import SubSocket


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'exon' has no attribute {name!r}")
    import importlib

    if name == "Socket":
        importlib.import_module("exon.sockets")  # registers every socket type
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ANY_KEY",
    "ArgumentTypeError",
    "BackPressured",
    "BrokenLink",
    "BrokenLinkError",
    "ClosedError",
    "ConfigurationError",
    "Cookie",
    "CookieLost",
    "DealerSocket",
    "Dropped",
    "EncryptedPolicy",
    "ExonError",
    "HeldBatch",
    "Keypair",
    "LinkRefused",
    "Message",
    "MessageTooLarge",
    "Node",
    "Peer",
    "ProtocolError",
    "PubSocket",
    "PubStatistics",
    "RouterSocket",
    "Socket",
    "SocketNotFound",
    "SocketNotLinked",
    "StateError",
    "SubSocket",
    "Timeout",
    "__version__",
    "default_node",
    "sweep_stale_driver_dirs",
]
