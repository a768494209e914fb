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

    def count(self, name: str, start: int, end: int) -> int:
        positions = self.positions[name]
        return bisect.bisect_left(positions, end) - bisect.bisect_left(positions, start)
