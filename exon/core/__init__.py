"""Sans-IO core of the exon middleware: frames, link state machine, credits, cookies.

Nothing here does I/O, reads a clock or starts a thread (``tests/core/test_imports.py``).
The Node (``exon.middleware``) feeds frames and time into a :class:`SocketCore` and sends
what it returns; the sockets (``exon.sockets``) consume its events.
"""

from __future__ import annotations

from exon.core.events import (
    CookieLost,
    CookieReturned,
    CreditAvailable,
    ErrorReceived,
    Event,
    LinkClosed,
    LinkEstablished,
    LinkRefused,
    MessageReceived,
    PeerId,
)
from exon.core.frames import Decision, ErrorCode, FrameType, LinkMetadata
from exon.core.link_state import LinkState
from exon.core.policy import LinkPolicy, SharedSecretPolicy, compatible, register_socket_type
from exon.core.records import CoreStatistics, LinkAccelerator
from exon.core.settings import LinkSettings
from exon.core.socket_core import SocketCore

__all__ = [
    "CookieLost",
    "CookieReturned",
    "CoreStatistics",
    "CreditAvailable",
    "Decision",
    "ErrorCode",
    "ErrorReceived",
    "Event",
    "FrameType",
    "LinkAccelerator",
    "LinkClosed",
    "LinkEstablished",
    "LinkMetadata",
    "LinkPolicy",
    "LinkRefused",
    "LinkSettings",
    "LinkState",
    "MessageReceived",
    "PeerId",
    "SharedSecretPolicy",
    "SocketCore",
    "compatible",
    "register_socket_type",
]
