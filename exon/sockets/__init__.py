"""User-facing sockets: ``exon.Socket(type="req" | "rep" | "push" | "pull", ...)``."""

from __future__ import annotations

from exon.sockets.messages import Cookie, CookieLost, HeldBatch, Message, Peer
from exon.sockets.pull import PullSocket
from exon.sockets.push import PushSocket
from exon.sockets.rep import RepSocket
from exon.sockets.req import ReqSocket
from exon.sockets.socket import Socket

__all__ = [
    "Cookie",
    "CookieLost",
    "HeldBatch",
    "Message",
    "Peer",
    "PullSocket",
    "PushSocket",
    "RepSocket",
    "ReqSocket",
    "Socket",
]
