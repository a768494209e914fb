"""What a receiving chaos agent checks of every message: loss, duplication, order and the
origin (``(incarnation, sequence)``, two little-endian u64 in front of each payload).

Sans-IO: :meth:`SequenceChecker.take` is fed payloads, :meth:`SequenceChecker.stats` tells.
Its memory does not grow with the messages taken: per incarnation it keeps ``low`` (every
sequence from the first one to ``low`` was seen) and a bitmap of the sequences seen from
``low`` on, which the in-order case keeps empty. (It used to keep one byte for every
sequence since the first; the 30-minute soak counted that as a leak of the node hosting
the PULL: 8 MB for 8 M messages.) When a hole stays open longer than ``window`` sequences
the bitmap slides on anyway; a sequence that arrives from behind a slid window counts as
``stale`` (whether it is a duplicate or late cannot be told any more; the hole was counted
in ``gaps`` already).
"""

from __future__ import annotations

import struct
from typing import Any

SEQ = struct.Struct("<QQ")  # incarnation, sequence

#: sequences a hole may stay open for before the bitmap slides past it (1 MiB of bitmap)
WINDOW = 1 << 20


class _Stream:
    """One incarnation's sequences."""

    __slots__ = ("count", "first", "horizon", "last", "low", "next", "pending", "seen")

    def __init__(self, seq: int) -> None:
        self.count = 0  #: messages taken, duplicates included
        self.first = seq  #: the first sequence taken
        self.last = seq  #: the highest sequence taken
        self.next = seq  #: the highest sequence taken + 1
        self.low = seq  #: every sequence in [first, low) was seen
        self.pending = bytearray()  #: seen flags of the sequences from low on
        self.seen = 0  #: distinct sequences taken
        #: where the bitmap last slid past a hole: [first, horizon) may have holes,
        #: [horizon, low) was all seen
        self.horizon = seq


class SequenceChecker:
    """Counts ``received``, ``duplicates``, ``out_of_order`` (a sequence below one already
    taken), ``gaps`` (sequences skipped over), ``malformed`` (too short for the header),
    ``from_older`` (messages of an incarnation taken after a newer one appeared) and
    ``stale`` (from behind a window that slid); not thread-safe."""

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, not {window}")
        self.window = window
        self.received = 0
        self.duplicates = 0
        self.out_of_order = 0
        self.gaps = 0
        self.malformed = 0
        self.from_older = 0
        self.stale = 0
        self.streams: dict[int, _Stream] = {}
        self.order: list[int] = []  # incarnations in order of first appearance

    def take(self, payload: bytes) -> None:
        if len(payload) < SEQ.size:
            self.malformed += 1
            return
        inc, seq = SEQ.unpack_from(payload)
        rec = self.streams.get(inc)
        if rec is None:
            rec = self.streams[inc] = _Stream(seq)
            self.order.append(inc)
        elif inc != self.order[-1]:
            self.from_older += 1
        rec.count += 1
        self.received += 1
        if seq > rec.next:
            self.gaps += seq - rec.next
        off = seq - rec.low
        pending = rec.pending
        if off == 0 and not pending:  # the next one in order: nothing to remember
            rec.low += 1
            rec.seen += 1
        elif off < 0:
            if seq < rec.first:
                self.out_of_order += 1  # before the first one taken
            elif seq < rec.horizon:
                self.stale += 1
            else:
                self.duplicates += 1  # everything in [horizon, low) was seen
        else:
            if off >= len(pending):
                if off >= self.window:  # a hole held too long: slide past it
                    shift = off - self.window + 1
                    del pending[:shift]
                    rec.low += shift
                    rec.horizon = rec.low
                    self._advance(rec)
                    off = seq - rec.low
                if off >= len(pending):
                    pending.extend(bytes(off + 1 - len(pending)))
            if pending[off]:
                self.duplicates += 1
            else:
                if seq < rec.next:
                    self.out_of_order += 1
                pending[off] = 1
                rec.seen += 1
                if off == 0:  # the hole at low closed
                    self._advance(rec)
        if seq >= rec.next:
            rec.next = seq + 1
            rec.last = seq

    @staticmethod
    def _advance(rec: _Stream) -> None:
        """Move ``low`` past the run of seen sequences at the bitmap's start."""
        run = rec.pending.find(0)
        run = len(rec.pending) if run < 0 else run
        del rec.pending[:run]
        rec.low += run

    def footprint(self) -> int:
        """Bytes of bitmap held (what grows with open holes, and only with them)."""
        return sum(len(rec.pending) for rec in self.streams.values())

    def stats(self) -> dict[str, Any]:
        return {
            "received": self.received, "duplicates": self.duplicates,
            "out_of_order": self.out_of_order, "gaps": self.gaps,
            "malformed": self.malformed, "from_older": self.from_older, "stale": self.stale,
            # [incarnation, count, next expected, first, last, distinct sequences]
            "incarnations": [[inc, rec.count, rec.next, rec.first, rec.last, rec.seen]
                             for inc, rec in ((i, self.streams[i]) for i in self.order)],
        }
