"""Offsets and partitions of an exon read: pure functions over an archive-like object.

An offset is the JSON dict Spark checkpoints: ``{recording name: archive position}``, one
entry per recording read. A micro-batch ``(start, end]`` in Spark's words is, per recording,
the position range ``[start[name], end[name])`` of the archive: every record whose position
falls in it. Positions are the archive's byte positions (record boundaries), so a range
replays the same records after any restart.

``archive`` below is anything with the methods of :class:`exon.archive.ArchiveClient` that
are used (``recording``, ``stop_position``, ``advance``, ``boundaries``): the driver passes
its client, tests pass a plain object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

from exon.errors import ExonError
from exon.spark.options import PositionSpec

__all__ = [
    "ArchiveView",
    "DataLoss",
    "DataLossError",
    "RangeSlice",
    "admit",
    "check_offset",
    "ending_offset",
    "plan_slices",
    "records_available",
    "skip_lost",
    "starting_offset",
]


class ArchiveView(Protocol):
    def recording(self, name: str) -> Any: ...
    def stop_position(self, name: str) -> int: ...
    def advance(self, name: str, start: int, max_records: int) -> int: ...
    def boundaries(self, name: str, start: int, end: int, max_records: int) -> list[int]: ...
    def count(self, name: str, start: int, end: int | None, max_records: int) -> int: ...
    def position_at(self, name: str, timestamp: int) -> int: ...


class DataLossError(ExonError):
    """Records a query was to read were truncated from the archive before it read them
    (option ``failOnDataLoss``, true by default): ``.recording``, ``.start``, ``.end`` are
    the lost positions ``[start, end)``."""

    def __init__(self, recording: str, start: int, end: int) -> None:
        super().__init__(
            f"exon: recording {recording!r}: positions [{start}, {end}) were truncated from "
            "the archive before this query read them (data loss). Set option "
            "failOnDataLoss=false to skip them (a warning, and a count of what was skipped)")
        self.recording = recording
        self.start = start
        self.end = end


@dataclass(frozen=True, slots=True)
class DataLoss:
    """Positions ``[start, end)`` of ``recording`` were truncated before they were read."""

    recording: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class RangeSlice:
    """Records of ``recording`` at positions ``[start, end)``: one input partition."""

    recording: str
    start: int
    end: int


def check_offset(offset: Mapping[str, Any], recordings: Sequence[str], *,
                 what: str) -> dict[str, int]:
    """An offset from Spark (a checkpoint) as ``{name: position}`` for exactly ``recordings``.

    A checkpoint written for other recordings is refused: the query's ``recording`` option
    changed, and reusing that checkpoint would silently skip or repeat data."""
    if not isinstance(offset, Mapping):
        raise ValueError(f"exon: {what} offset {offset!r} is not a JSON object")
    names = set(offset)
    if names != set(recordings):
        raise ValueError(
            f"exon: the {what} offset covers recordings {sorted(names)} but the query reads "
            f"{sorted(recordings)}; a checkpoint belongs to one set of recordings (start the "
            "query with a new checkpointLocation)")
    result: dict[str, int] = {}
    for name in recordings:
        position = offset[name]
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ValueError(f"exon: {what} offset of {name!r} is {position!r}, not a position")
        result[name] = position
    return result


def starting_offset(archive: ArchiveView, recordings: Sequence[str],
                    spec: PositionSpec, at: Mapping[str, int] | None = None) -> dict[str, int]:
    """Where a new query starts: ``earliest`` (the recording's start position, after any
    truncation), ``latest`` (its durable stop position now) or the positions given; with
    ``at`` (ns per recording), the first record received at or after that time (the start
    position when every record is, the stop position when none is)."""
    offset: dict[str, int] = {}
    for name in recordings:
        info = archive.recording(name)  # RecordingNotFound names a missing recording
        if at is not None:
            offset[name] = int(archive.position_at(name, at[name]))
        elif spec == "earliest":
            offset[name] = int(info.start_position)
        elif spec == "latest":
            offset[name] = int(archive.stop_position(name))
        else:
            assert isinstance(spec, dict)
            offset[name] = int(spec[name])
    return offset


def ending_offset(archive: ArchiveView, recordings: Sequence[str],
                  spec: PositionSpec, at: Mapping[str, int] | None = None) -> dict[str, int]:
    """Where a batch read ends: ``latest`` (the durable stop position) or the positions
    given (exclusive); with ``at``, the first record received at or after that time (the
    records before it are read)."""
    if at is not None:
        return {name: int(archive.position_at(name, at[name])) for name in recordings}
    if spec == "latest":
        return {name: int(archive.stop_position(name)) for name in recordings}
    assert isinstance(spec, dict)
    return {name: int(spec[name]) for name in recordings}


def skip_lost(archive: ArchiveView, start: Mapping[str, int], end: Mapping[str, int], *,
              fail: bool, firsts: Mapping[str, int] | None = None,
              ) -> tuple[dict[str, int], list[DataLoss]]:
    """``start`` moved past what the archive truncated, and what was lost.

    A recording whose start position is above ``start[name]`` lost ``[start[name],
    min(its start position, end[name]))``: with ``fail`` that is a :class:`DataLossError`
    naming the recording and the positions; else the range begins at what is left (at most
    ``end[name]``) and the loss is returned for the caller to warn about and count.
    ``firsts``: the recordings' start positions, when the caller has just asked for them."""
    moved: dict[str, int] = {}
    lost: list[DataLoss] = []
    for name, begin in start.items():
        begin, stop = int(begin), int(end[name])
        first = int(firsts[name] if firsts is not None
                    else archive.recording(name).start_position)
        if begin < first and begin < stop:
            loss = DataLoss(name, begin, min(first, stop))
            if fail:
                raise DataLossError(loss.recording, loss.start, loss.end)
            lost.append(loss)
            begin = min(first, stop)
        moved[name] = begin
    return moved, lost


def records_available(archive: ArchiveView, start: Mapping[str, int],
                      stop: Mapping[str, int], enough: int) -> int:
    """Records in ``[start, stop)`` over every recording, counting no further than
    ``enough`` (each recording's count is capped by what is still wanted)."""
    total = 0
    for name, begin in start.items():
        if total >= enough:
            break
        if int(stop[name]) > int(begin):
            total += int(archive.count(name, int(begin), int(stop[name]), enough - total))
    return total


def admit(archive: ArchiveView, start: Mapping[str, int], stop: Mapping[str, int],
          max_records: int | None) -> dict[str, int]:
    """The end of the next micro-batch: ``stop`` (what is durable now), capped at
    ``max_records`` records over all recordings when admission control is on.

    The budget is shared in turns: each recording in order may take up to an equal share of
    what is left, so the total never exceeds ``max_records`` and an idle recording leaves its
    share to the others only in the next trigger (simple, and never more than asked). A
    recording never goes backwards: an end below ``start`` (a stop position from an archive
    that lost its tail) stays at ``start``."""
    end: dict[str, int] = {}
    names = list(start)
    if max_records is None:
        return {name: max(int(stop[name]), int(start[name])) for name in names}
    share = max(1, max_records // max(1, len(names)))
    for name in names:
        begin, limit = int(start[name]), int(stop[name])
        if limit <= begin:
            end[name] = begin
            continue
        end[name] = max(begin, min(limit, int(archive.advance(name, begin, share))))
    return end


def _cut(archive: ArchiveView, name: str, begin: int, stop: int,
         max_records: int) -> list[RangeSlice]:
    cuts = [int(p) for p in archive.boundaries(name, begin, stop, max_records)]
    if not cuts or cuts[0] != begin or cuts[-1] != stop or any(
            b <= a for a, b in pairwise(cuts)):
        raise ValueError(f"exon: the archive cut [{begin}, {stop}) of {name!r} into "
                         f"{cuts!r}, not an increasing list from start to end")
    return [RangeSlice(name, a, b) for a, b in pairwise(cuts)]


def plan_slices(archive: ArchiveView, start: Mapping[str, int], end: Mapping[str, int],
                max_records: int, min_partitions: int = 1) -> list[RangeSlice]:
    """Cut ``[start, end)`` of every recording into slices of at most ``max_records``
    records each, using the archive's record index (``boundaries``).

    With fewer slices than ``min_partitions`` (a small batch on many cores), the ranges are
    cut again into smaller pieces (a few requests, each cutting finer) until there are more
    pieces than ``min_partitions``, and the pieces are grouped into about
    ``min_partitions`` slices of about equal size (each range gets a share of the slices
    by its size; a slice never spans two recordings)."""
    ranges = []
    for name in end:
        begin, stop = int(start.get(name, 0)), int(end[name])
        if stop < begin:
            raise ValueError(f"exon: the range of {name!r} ends at {stop}, before its start "
                             f"{begin}")
        if stop > begin:
            ranges.append((name, begin, stop))
    pieces = [_cut(archive, *r, max_records) for r in ranges]
    piece, total = max_records, sum(len(p) for p in pieces)
    if total >= min_partitions or not total:
        return [s for p in pieces for s in p]
    while total < min_partitions and piece > 1:
        piece = max(1, piece // (4 * -(-min_partitions // total)))
        pieces = [_cut(archive, *r, piece) for r in ranges]
        total = sum(len(p) for p in pieces)
    if total <= min_partitions:
        return [s for p in pieces for s in p]
    planned: list[RangeSlice] = []
    for mine in pieces:
        if not mine:
            continue
        groups = max(1, round(min_partitions * len(mine) / total),
                     -(-len(mine) * piece // max_records))
        groups = min(groups, len(mine))
        for g in range(groups):
            lo, hi = g * len(mine) // groups, (g + 1) * len(mine) // groups
            planned.append(RangeSlice(mine[lo].recording, mine[lo].start, mine[hi - 1].end))
    return planned
