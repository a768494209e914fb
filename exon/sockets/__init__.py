"""User-facing sockets: ``exon.Socket(type="req" | "rep" | "push" | "pull" | "dealer" |
"router" | "pub" | "sub", ...)``."""

from __future__ import annotations

from exon.sockets.dealer import DealerSocket
from exon.sockets.messages import Cookie, CookieLost, Dropped, HeldBatch, Message, Peer
from exon.sockets.pub import PubSocket, PubStatistics
from exon.sockets.pull import PullSocket
from exon.sockets.push import PushSocket
from exon.sockets.rep import RepSocket
from exon.sockets.req import ReqSocket
from exon.sockets.router import RouterSocket
from exon.sockets.socket import Socket
from exon.sockets.sub import SubSocket

__all__ = [
    "Cookie",
    "CookieLost",
    "DealerSocket",
    "Dropped",
    "HeldBatch",
    "Message",
    "Peer",
    "PubSocket",
    "PubStatistics",
    "PullSocket",
    "PushSocket",
    "RepSocket",
    "ReqSocket",
    "RouterSocket",
    "Socket",
    "SubSocket",
]
