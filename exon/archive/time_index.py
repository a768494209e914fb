"""The archive's time index: ``position_at(recording, timestamp)``, the position of the first
record the archive received at or after ``timestamp`` (ns since the Unix epoch).

The index is built from the archive's record-reading API (``Archive.files(...).batches``:
what a replay reads, as decoded records), never from the layout of the segment files, so it
holds whatever the on-disk format becomes. (Not ``replay_batches``: its range check walks
the record headers from the segment's start to the range's, up to 100 ms on a 128 MiB
segment of small records, and the index's positions are record boundaries already.)

Per recording it keeps one *sample* per run of up to :data:`CHUNK_RECORDS` records: the
run's first position, and the running maximum of the timestamps up to the run's end.

Receive times come from the wall clock, which can step back (NTP), so timestamps are not
sorted. The running maximum is: the first record whose timestamp is at or after ``t`` is the
first record where the running maximum reaches ``t``. A binary search over the samples finds
the run that holds it and a replay of that one run finds the record, so the answer is the
one a scan of every record would give, for the cost of one run's replay.

Out of range (documented in docs/spark.md and the CLI): a time at or before the first record
held gives the recording's start position (its first record, after any truncation); a time
after the last record gives the stop position (nothing recorded yet is that late: a reader
starting there reads what is recorded next). An empty recording gives its start position.

The index grows with the recording (only new records are read) and is rebuilt when the
recording was truncated (its start moved) or cut back (its stop went below the indexed
end). Memory: two integers per run of :data:`CHUNK_RECORDS` records.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

from exon.archive.errors import IndexBuilding
from exon.archive.format import Record

__all__ = ["CHUNK_RECORDS", "IndexBuilding", "RecordBatches", "RecordSource", "TimeIndex"]

#: records per sample of the index (a lookup replays at most about this many)
CHUNK_RECORDS = 4096

_TIMESTAMP = itemgetter(3)


class RecordBatches(Protocol):
    """The records of one recording: :class:`exon.archive.segments.RecordingFiles`."""

    def batches(self, start: int, end: int) -> Iterator[list[Record]]: ...

    def close(self) -> None: ...


class RecordSource(Protocol):
    """What the index reads: an :class:`exon.archive.Archive`."""

    def recording(self, recording: str | int) -> Any: ...

    def files(self, recording: str | int) -> RecordBatches: ...


@dataclass(slots=True)
class _Samples:
    """The index of one recording: run ``i`` starts at ``positions[i]``; ``maxima[i]`` is the
    largest timestamp of the records from ``start`` to the end of run ``i``."""

    start: int
    end: int
    positions: list[int] = field(default_factory=list)
    maxima: list[int] = field(default_factory=list)
    last_count: int = 0  # records in the last run (a short one takes the next records)


class TimeIndex:
    """``TimeIndex(archive).position_at(recording, timestamp)``; thread-safe."""

    def __init__(self, source: RecordSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._recordings: dict[int, _Samples] = {}
        #: position_at(wait=): the threads extending an index, and how far each has read
        self._builders: dict[int, threading.Thread] = {}
        self._reached: dict[int, int] = {}

    def forget(self, recording_id: int) -> None:
        """Drop what is indexed of a recording (it was cut back or started over)."""
        with self._lock:
            self._recordings.pop(recording_id, None)

    def position_at(self, recording: str | int, timestamp: int, *,
                    wait: float | None = None) -> int:
        """The position of the first record received at or after ``timestamp`` (ns since
        the epoch); the start position when every record is, the stop position when none
        is. ValueError for a timestamp that is not a non-negative integer.

        ``wait`` (the service, whose control thread must not stall): the index is extended
        in a thread of its own, and if that takes longer than ``wait`` seconds this raises
        :class:`IndexBuilding` (ask again; the thread goes on). None: extend it here."""
        if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
            raise ValueError(f"a timestamp is a non-negative integer of ns since the epoch, "
                             f"not {timestamp!r}")
        info = self._source.recording(recording)
        if wait is not None:
            self._build(info, wait)
        with self._lock:
            samples = self._current(info)
            i = bisect.bisect_left(samples.maxima, timestamp)
            if i == len(samples.maxima):
                return samples.end  # every record is earlier (or there is none)
            run_end = samples.positions[i + 1] if i + 1 < len(samples.positions) \
                else samples.end
            files = self._source.files(info.id)
            try:
                for batch in files.batches(samples.positions[i], run_end):
                    for record in batch:
                        if record[3] >= timestamp:
                            return int(record[0])
            finally:
                files.close()
        # the run's maximum said a record is that late: the records changed under us
        raise RuntimeError(f"recording {info.name!r}: the time index does not match its "
                           "records")  # pragma: no cover - guarded by _current

    def _build(self, info: Any, wait: float) -> None:
        with self._lock:
            builder = self._builders.get(info.id)
            if builder is None or not builder.is_alive():
                builder = self._builders[info.id] = threading.Thread(
                    target=self._build_quietly, args=(info,), daemon=True,
                    name=f"exon-archive-time-index-{info.id}")
                builder.start()
        builder.join(wait)
        if builder.is_alive():
            start, stop = int(info.start_position), int(info.stop_position)
            done = self._reached.get(info.id, start) - start
            raise IndexBuilding(
                f"recording {info.name!r}: its time index is being built ({done} of "
                f"{stop - start} bytes read); ask again")

    def _build_quietly(self, info: Any) -> None:
        try:
            with self._lock:
                self._current(info)
        except Exception:  # the lookup that follows extends it again, and raises
            pass

    def _current(self, info: Any) -> _Samples:
        """The samples of ``info``'s recording, extended to its stop position now."""
        start, stop = int(info.start_position), int(info.stop_position)
        samples = self._recordings.get(info.id)
        if samples is None or samples.start != start or samples.end > stop:
            samples = self._recordings[info.id] = _Samples(start=start, end=start)
        if samples.end < stop:
            self._extend(info.id, samples, stop)
        return samples

    def _extend(self, recording_id: int, samples: _Samples, stop: int) -> None:
        running = samples.maxima[-1] if samples.maxima else -1
        files = self._source.files(recording_id)
        try:
            for batch in files.batches(samples.end, stop):
                if not batch:
                    continue
                running = max(running, max(map(_TIMESTAMP, batch)))
                self._reached[recording_id] = int(batch[-1][0])
                if samples.positions and samples.last_count + len(batch) <= CHUNK_RECORDS:
                    samples.maxima[-1] = running  # the last run takes these records too
                    samples.last_count += len(batch)
                else:
                    samples.positions.append(int(batch[0][0]))
                    samples.maxima.append(running)
                    samples.last_count = len(batch)
        except BaseException:
            self._recordings.pop(recording_id, None)  # half extended: start again next time
            raise
        finally:
            files.close()
        samples.end = stop
