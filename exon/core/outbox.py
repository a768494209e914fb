"""What the core has for the layer above: frames to send, events, counters, and the
anti-amplification limit every frame out passes (docs/protocol.md 2.6.1).

:class:`Outbox` is owned by :class:`~exon.core.socket_core.SocketCore` and shared, by
reference, with its :class:`~exon.core.link_actions.LinkActions`: both emit through it.
The node reads :attr:`Outbox.frames` and :attr:`Outbox.events` to learn, without a call,
whether the core has output (the hot path binds the two containers once: they are the
same objects for the core's life, emptied in place). Sans-IO.
"""

from __future__ import annotations

from collections import deque

from exon.core.events import Event
from exon.core.records import CoreStatistics
from exon.core.records import LinkRecord as _Link
from exon.core.sealing import seal_frame

__all__ = ["AMPLIFICATION_FACTOR", "Outbox"]

#: until an address is validated, at most this many times the bytes received from it are
#: sent to it (docs/protocol.md 2.6.1; QUIC's anti-amplification limit, RFC 9000 8.1)
AMPLIFICATION_FACTOR = 3
#: unvalidated addresses whose byte counts are kept; beyond, the oldest is forgotten
#: (and gets nothing more until frames come in its name again)
UNVALIDATED_MAX = 4096


class Outbox:
    """Frames and events waiting for the layer above, the core's counters, and which
    addresses are validated."""

    __slots__ = ("events", "frames", "stats", "unvalidated", "validated")

    def __init__(self) -> None:
        #: (reply address, frame bytes) to send, in order
        self.frames: list[tuple[str, bytes]] = []
        self.events: deque[Event] = deque()  #: events for the layer above, in order
        #: the counters of :class:`~exon.core.records.CoreStatistics`, by name
        self.stats: dict[str, int] = dict.fromkeys(CoreStatistics.__slots__, 0)
        #: addresses validated (we linked to them, or a token came back)
        self.validated: set[str] = set()
        #: address -> [bytes received, bytes sent] while not validated
        self.unvalidated: dict[str, list[int]] = {}

    def take_frames(self) -> list[tuple[str, bytes]]:
        """Every frame waiting, in order; the outbox keeps none."""
        frames = self.frames[:]
        self.frames.clear()
        return frames

    def emit(self, address: str, data: bytes) -> None:
        """Queue ``data`` for ``address``, within its anti-amplification limit."""
        if address not in self.validated:
            # anti-amplification: an address that has not shown it receives what we send
            # gets at most AMPLIFICATION_FACTOR x the bytes that came in its name
            spent = self.unvalidated.get(address)
            if spent is None or spent[1] + len(data) > AMPLIFICATION_FACTOR * spent[0]:
                self.stats["amplification_held"] += 1
                self.stats["amplification_held_bytes"] += len(data)
                return
            spent[1] += len(data)
        self.stats["frames_sent"] += 1
        self.frames.append((address, data))

    def emit_link(self, link: _Link, data: bytes) -> None:
        """A frame of ``link``: sealed when the link is encrypted and its keys are agreed."""
        if link.seal is not None:
            data = seal_frame(link.seal, data)
        self.emit(link.peer.address, data)

    def validate(self, address: str) -> None:
        """``address`` is validated: no limit on what goes to it from now on."""
        self.validated.add(address)
        self.unvalidated.pop(address, None)

    def count_received(self, address: str, length: int) -> None:
        """``length`` bytes came in the name of ``address`` (not validated)."""
        spent = self.unvalidated.get(address)
        if spent is None:
            if len(self.unvalidated) >= UNVALIDATED_MAX:
                del self.unvalidated[next(iter(self.unvalidated))]
            spent = self.unvalidated[address] = [0, 0]
        spent[0] += length

    def reserve(self, address: str, round_bytes: int, rounds: int) -> int:
        """See :meth:`SocketCore.reserve_unvalidated <exon.core.socket_core.SocketCore.
        reserve_unvalidated>`."""
        if address in self.validated:
            return rounds
        spent = self.unvalidated.get(address)
        room = 0 if spent is None else AMPLIFICATION_FACTOR * spent[0] - spent[1]
        granted = max(0, min(rounds, room // round_bytes))
        if granted == 0:
            self.stats["amplification_held"] += 1
            self.stats["amplification_held_bytes"] += round_bytes
            return 0
        assert spent is not None
        spent[1] += granted * round_bytes
        return granted
