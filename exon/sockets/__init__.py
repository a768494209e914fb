"""User-facing sockets: ``exon.Socket(type="req" | "rep" | "push" | "pull" | "dealer" |
"router", ...)``."""

from __future__ import annotations

from exon.sockets.dealer import DealerSocket
from exon.sockets.messages import Cookie, CookieLost, HeldBatch, Message, Peer
from exon.sockets.pull import PullSocket
from exon.sockets.push import PushSocket
from exon.sockets.rep import RepSocket
from exon.sockets.req import ReqSocket
from exon.sockets.router import RouterSocket
from exon.sockets.socket import Socket

__all__ = [
    "Cookie",
    "CookieLost",
    "DealerSocket",
    "HeldBatch",
    "Message",
    "Peer",
    "PullSocket",
    "PushSocket",
    "RepSocket",
    "ReqSocket",
    "RouterSocket",
    "Socket",
]
