"""The process-wide default node, created lazily on first use.

``exon.Socket(type="push")`` with no ``node=`` uses it. Its endpoint is
``$EXON_ENDPOINT`` (default ``127.0.0.1:0``) and its driver ``$EXON_NODE_DRIVER_DIR`` when
set (an external driver), else what ``exon.Node()`` chooses (``driver="auto"``: the host
driver when one runs, else an embedded one). It is closed at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import threading

from exon.middleware.node import Node

__all__ = ["close_default_node", "default_node"]

_lock = threading.Lock()
_node: Node | None = None


def default_node() -> Node:
    """The default node (created on the first call; a closed one is replaced)."""
    global _node
    with _lock:
        if _node is None or _node.closed:
            _node = Node(os.environ.get("EXON_ENDPOINT", "127.0.0.1:0"),
                         driver_dir=os.environ.get("EXON_NODE_DRIVER_DIR") or None)
        return _node


def close_default_node(timeout: float = 5.0) -> None:
    global _node
    with _lock:
        node, _node = _node, None
    if node is not None:
        node.close(timeout)


atexit.register(close_default_node, 1.0)
