"""A plain-Python stand-in for the archive's read side (positions of 32-byte aligned
records), for the pure planning tests."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from exon.archive import RecordingNotFound


@dataclass(frozen=True)
class Info:
    name: str
    start_position: int
    stop_position: int


class FakeArchive:
    """Recordings as lists of record lengths; positions like the archive's."""

    def __init__(self, **lengths: list[int]) -> None:
        self.positions: dict[str, list[int]] = {}
        self.stops: dict[str, int] = {}
        self.starts: dict[str, int] = {}
        self.stamps: dict[str, list[int]] = {}
        for name, sizes in lengths.items():
            position, positions = 0, []
            for size in sizes:
                positions.append(position)
                position += (32 + size + 31) // 32 * 32
            self.positions[name] = positions
            self.stops[name] = position
            self.starts[name] = 0

    def _check(self, name: str) -> list[int]:
        if name not in self.positions:
            raise RecordingNotFound(name)
        return self.positions[name]

    def recording(self, name: str) -> Info:
        self._check(name)
        return Info(name, self.starts[name], self.stops[name])

    def stop_position(self, name: str) -> int:
        self._check(name)
        return self.stops[name]

    def _end_of(self, name: str, index: int) -> int:
        positions = self.positions[name]
        return positions[index] if index < len(positions) else self.stops[name]

    def advance(self, name: str, start: int, max_records: int) -> int:
        positions = self._check(name)
        i = bisect.bisect_left(positions, start)
        return self._end_of(name, min(i + max_records, len(positions)))

    def boundaries(self, name: str, start: int, end: int, max_records: int) -> list[int]:
        positions = self._check(name)
        i = bisect.bisect_left(positions, start)
        j = bisect.bisect_left(positions, end)
        cuts = [start]
        for k in range(i + max_records, j, max_records):
            cuts.append(positions[k])
        cuts.append(end)
        return cuts

    def count(self, name: str, start: int, end: int | None = None,
              max_records: int | None = None) -> int:
        positions = self._check(name)
        end = self.stops[name] if end is None else end
        n = bisect.bisect_left(positions, end) - bisect.bisect_left(positions, start)
        return n if max_records is None else min(n, max_records)

    def position_at(self, name: str, timestamp: int) -> int:
        """Record ``i`` was received at ``i * 1000`` ns (``stamps`` overrides)."""
        positions = self._check(name)
        stamps = self.stamps.get(name) or [i * 1000 for i in range(len(positions))]
        for position, stamp in zip(positions, stamps, strict=True):
            if position >= self.starts[name] and stamp >= timestamp:
                return position
        return self.stops[name]

    def truncate(self, name: str, before: int) -> None:
        """Drop the records below ``before`` (a record boundary)."""
        self.starts[name] = before
