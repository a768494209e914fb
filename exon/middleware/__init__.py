"""The middleware: the Node binds a SocketCore to the Aeron transport (threads, I/O)."""

from __future__ import annotations

from exon.middleware.default_node import close_default_node, default_node
from exon.middleware.node import Node

__all__ = ["Node", "close_default_node", "default_node"]
