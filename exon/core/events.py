"""Events the :class:`~exon.core.socket_core.SocketCore` reports to the layer above.

Frozen, slotted, keyword-only dataclasses. Every event names the local socket ``tag`` and
the ``peer`` (a :class:`PeerId`: the peer node's reply address and the peer socket's tag).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from exon.core.frames import Decision, LinkMetadata


class PeerId(NamedTuple):
    """A remote socket as the core knows it: its node's reply address and its tag."""

    address: str  #: opaque node address, e.g. "127.0.0.1:40123"
    tag: int  #: the remote socket's tag (u32)

    def __str__(self) -> str:
        return f"{self.address}/{self.tag}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkEstablished:
    tag: int  #: local socket
    peer: PeerId  #: remote socket
    incarnation: int  #: our incarnation id of this link
    peer_metadata: LinkMetadata  #: what the peer told us in the handshake
    credits: int  #: credits we may spend right away (the peer's initial grant)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRefused:
    tag: int
    peer: PeerId
    decision: Decision  #: the refusal code (the peer's if it refused, else ours)
    reason: str  #: human-readable text
    permanent: bool  #: False for temporary refusals
    by_peer: bool  #: True when the peer refused (or its node answered an ERROR)
    retry_at: float | None  #: when the core will send LINK again; None: it will not


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkClosed:
    tag: int
    peer: PeerId
    reason: str  #: "UNLINKED", "CANCELLED", "PEER_GONE", "PEER_RELINKED", "TIMEOUT", "ERROR:..."
    error: bool  #: True when the link broke instead of closing cleanly


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageReceived:
    tag: int
    peer: PeerId
    payload: bytes
    incarnation: int  #: pass the event to ``SocketCore.deliver`` when the app takes it


@dataclass(frozen=True, slots=True, kw_only=True)
class CreditAvailable:
    """The link went from no credit to some: a blocked sender may proceed."""

    tag: int
    peer: PeerId
    credits: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CookieReturned:
    """The peer's application received the message sent with this cookie (exactly once)."""

    tag: int
    peer: PeerId
    cookie: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class CookieLost:
    """The link closed before the peer confirmed delivery of the message with this cookie.

    The message may or may not have reached the peer's application; it was not confirmed.
    """

    tag: int
    peer: PeerId
    cookie: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReceived:
    """A peer node answered one of our frames with an ERROR frame."""

    tag: int
    peer: PeerId
    code: int  #: an :class:`~exon.core.frames.ErrorCode` value
    text: str


Event = (
    LinkEstablished
    | LinkRefused
    | LinkClosed
    | MessageReceived
    | CreditAvailable
    | CookieReturned
    | CookieLost
    | ErrorReceived
)
