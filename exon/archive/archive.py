"""An archive directory: its catalog, its recordings, reading and (for the owner) writing.

``Archive(dir)`` reads a directory with no service (and without locking it): list
recordings, stop positions, replay by position, verify. The service opens it with
``Archive(dir, owner=True, fsync=...)``: that takes ``DIR/archive.lock`` (an exclusive
``flock``; a second owner gets :class:`ArchiveLocked`), recovers every recording's tail and
keeps one :class:`RecordingWriter` per recording.
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from exon.archive import codec
from exon.archive.catalog import Catalog, CatalogEntry, check_name
from exon.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveLocked,
    RecordingNotFound,
    ReplayRangeError,
)
from exon.archive.format import (
    ALIGNMENT,
    HEADER_LENGTH,
    Record,
    after_bad_record,
    find_record,
    scan_records,
)
from exon.archive.recording import (
    FSYNC_POLICIES,
    WRITE_BUFFER,
    FsyncPolicy,
    RecordingWriter,
    marks_from_rows,
    marks_to_rows,
    raise_mark,
)
from exon.archive.segments import (
    BATCH_RECORDS,
    MappedSegment,
    RecordingFiles,
    segment_bases,
    segment_path,
)
from exon.archive.time_index import TimeIndex

LOCK_FILE = "archive.lock"
#: default segment length: 128 MiB (Aeron Archive's default segment file length)
DEFAULT_SEGMENT_LENGTH = 128 * 1024 * 1024
MIN_SEGMENT_LENGTH = 64 * 1024
FOLLOW_POLL = 0.005  # seconds between looks at a recording written by another process
log = logging.getLogger("exon.archive")


@dataclass(frozen=True)
class RecordingInfo:
    """A recording as the catalog and its segment files describe it."""

    name: str
    id: int
    start_position: int
    stop_position: int
    segment_length: int
    created_ns: int
    ingest_tag: int | None = None
    consumers: dict[str, int] = field(default_factory=dict)
    state: str = "ok"  # or "failed: WHY" (the recording stopped writing)


def check_segment_length(n: int) -> int:
    if n < MIN_SEGMENT_LENGTH or n & (n - 1) or n > 1 << 30:
        raise ValueError(f"segment length {n}: want a power of two in "
                         f"{MIN_SEGMENT_LENGTH}..{1 << 30}")
    return n


class Archive:
    """The recordings of ``directory``; see the module docstring."""

    def __init__(self, directory: str, *, owner: bool = False, fsync: FsyncPolicy = "none",
                 create: bool | None = None, owner_note: str = "") -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy {fsync!r}: want one of {', '.join(FSYNC_POLICIES)}")
        self.directory = os.path.abspath(directory)
        self.owner = owner
        self.fsync = fsync
        self._lock = threading.RLock()
        self._lock_fd = -1
        self._writers: dict[int, RecordingWriter] = {}
        self._tails: dict[int, tuple[int, int]] = {}  # non-owner: id -> (base, end offset)
        #: non-owner: id -> (file, offset) of the first damage a scan went past (an owner's
        #: recovery refuses such a recording; see _info)
        self._damage: dict[int, tuple[str, int]] = {}
        #: owner: recordings whose recovery found damage (not a torn tail): id -> the error
        #: (they are read, not written, until the damage is moved aside and the directory
        #: is opened again)
        self._refused: dict[int, ArchiveCorrupt] = {}
        if create if create is not None else owner:
            os.makedirs(self.directory, exist_ok=True)
        elif not os.path.isdir(self.directory):
            raise ArchiveError(f"{self.directory}: no such archive directory")
        if owner:
            self._take_lock(owner_note)
        try:
            self.catalog = Catalog.load(self.directory)
            if owner:
                for entry in self.catalog.entries.values():
                    self._open_writer(entry)
        except BaseException:
            self.close()
            raise

    # ---- owning ----------------------------------------------------------------------------

    def _open_writer(self, entry: CatalogEntry) -> None:
        """Recover a recording and keep its writer; a recording whose recovery finds
        damage is refused for writing (see :meth:`writer`) instead of failing the rest."""
        try:
            self._writers[entry.id] = RecordingWriter(self.directory, entry, self.fsync)
        except ArchiveCorrupt as exc:
            log.error("recording %r is not recovered and takes no writes: %s", entry.name, exc)
            self._refused[entry.id] = exc

    def _take_lock(self, note: str) -> None:
        path = os.path.join(self.directory, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 256, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise ArchiveLocked(f"{self.directory} is held by another archive service "
                                f"({holder or 'unknown holder'})") from None
        self._lock_fd = fd
        self.note_owner(note)

    def note_owner(self, note: str) -> None:
        """Say who holds the directory in its lock file (``pid PID NOTE``): what a second
        owner's :class:`ArchiveLocked` names. The service notes its bound address."""
        if self._lock_fd < 0:
            raise ArchiveError("only the owner of an archive directory notes itself")
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"pid {os.getpid()} {note}".strip().encode() + b"\n", 0)

    def close(self) -> None:
        """Close the writers and release the directory's lock (an owner's). Idempotent."""
        with self._lock:
            for w in self._writers.values():
                w.close()
            self._writers.clear()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = -1

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require_owner(self) -> None:
        if not self.owner:
            raise ArchiveError("this Archive reads only; the archive service changes it")

    def create_recording(self, name: str, *, segment_length: int = DEFAULT_SEGMENT_LENGTH,
                         ingest_tag: int | None = None) -> CatalogEntry:
        """A new, empty recording (owner only); an existing one of that name is returned
        as is (its ingest tag updated)."""
        self._require_owner()
        check_name(name)
        check_segment_length(segment_length)
        with self._lock:
            try:
                entry = self.catalog.find(name)
            except RecordingNotFound:
                entry = self.catalog.add(name, segment_length, ingest_tag)
                self._open_writer(entry)
                return entry
            if entry.ingest_tag != ingest_tag and ingest_tag is not None:
                entry.ingest_tag = ingest_tag
                self.catalog.save()
            return entry

    def writer(self, recording: str | int) -> RecordingWriter:
        """The appender of a recording (owner only: the service uses it). Raises
        :class:`ArchiveCorrupt` (the damaged file and offset) for a recording whose
        recovery found a bad record followed by valid data when the directory was opened:
        it takes no writes until the damage is moved aside and the directory reopened (its
        records before the damage still replay)."""
        self._require_owner()
        entry = self.entry(recording)
        refused = self._refused.get(entry.id)
        if refused is not None:
            problem = str(refused).removeprefix(f"{refused.path} at offset {refused.offset}: ")
            raise ArchiveCorrupt(f"recording {entry.name!r} takes no writes (recovery "
                                 f"refused): {problem}", path=refused.path,
                                 offset=refused.offset)
        return self._writers[entry.id]

    def mark_keyed(self, recording: str | int) -> None:
        """Mark a recording as taking keyed (exactly-once) ingest; recovery then scans all of its
        segments."""
        with self._lock:
            entry = self.entry(recording)
            if not entry.keyed:
                entry.keyed = True
                self.catalog.save()

    def truncate(self, recording: str | int, before: int) -> int:
        """Drop the whole segments below ``before`` (owner only); returns the new start
        position (the base of the segment holding ``before``)."""
        self._require_owner()
        with self._lock:
            entry = self.entry(recording)
            stop = self.stop_position(recording)
            if not entry.start_position <= before <= stop:
                raise ReplayRangeError(f"recording {entry.name!r}: truncate position {before} "
                                       f"is outside [{entry.start_position}, {stop}]")
            length = entry.segment_length
            new_start = max(entry.start_position, before - before % length)
            if new_start == entry.start_position:
                return new_start
            if entry.keyed:  # the dedup keys of the deleted records live on in the catalog
                entry.dedup = self._dedup_marks(entry, new_start)
            entry.start_position = new_start
            self.catalog.save()  # first the catalog, then the files (recovery agrees)
            for base in segment_bases(self.directory, entry.id):
                if base + length <= new_start:
                    os.unlink(segment_path(self.directory, entry.id, base))
            return new_start

    def _dedup_marks(self, entry: CatalogEntry, below: int) -> list[list[Any]]:
        """A keyed recording's dedup marks once its segments below ``below`` are gone: its
        writer's, or (a recording that recovery refused has none) the catalog's marks
        raised by the keys of the records in those segments, up to any damage."""
        writer = self._writers.get(entry.id)
        if writer is not None:
            return writer.dedup_marks()
        marks = marks_from_rows(entry.dedup)
        length = entry.segment_length
        for base in segment_bases(self.directory, entry.id):
            if base + length > below:
                continue
            seg = MappedSegment(segment_path(self.directory, entry.id, base), base)
            try:
                scan_records(seg.map, max(0, entry.start_position - base), seg.size, base,
                             on_key=lambda key, position: raise_mark(marks, key))
            finally:
                seg.close()
        return marks_to_rows(marks)

    def commit(self, recording: str | int, consumer: str, position: int, *,
               truncate: bool = False) -> int:
        """Record how far ``consumer`` has consumed (owner only; never moves back). With
        ``truncate``, drop the segments every registered consumer has passed. Returns the
        recording's start position."""
        self._require_owner()
        if not consumer or not isinstance(consumer, str):
            raise ValueError("a consumer name is a non-empty string")
        with self._lock:
            entry = self.entry(recording)
            stop = self.stop_position(recording)
            if not entry.start_position <= position <= stop:
                raise ReplayRangeError(f"recording {entry.name!r}: commit position {position} "
                                       f"is outside [{entry.start_position}, {stop}]")
            if position > entry.consumers.get(consumer, -1):
                entry.consumers[consumer] = position
                self.catalog.save()
            if truncate:
                return self.truncate(recording, min(entry.consumers.values()))
            return entry.start_position

    # ---- replicating (docs/protocol.md 3.7) ------------------------------------------------

    def adopt(self, doc: dict[str, Any]) -> CatalogEntry:
        """Take a primary's catalog entry (a replica): a recording new here is created under
        the primary's id, at its start position; a known one must be the same recording
        (id, name, segment length, creation time: else :class:`ArchiveError`, "wrong
        primary"), and takes the primary's consumers, dedup marks, keyed flag, ingest tag
        and start position (truncating, or starting over empty when the primary truncated
        past everything held here)."""
        self._require_owner()
        try:
            theirs = CatalogEntry(**doc)
        except TypeError as exc:
            raise ArchiveError(f"a primary's catalog entry does not decode ({exc})") from None
        with self._lock:
            mine = self.catalog.entries.get(theirs.id)
            if mine is None:
                check_name(theirs.name)
                check_segment_length(theirs.segment_length)
                for e in self.catalog.entries.values():
                    if e.name == theirs.name:
                        raise ArchiveError(
                            f"wrong primary: recording {theirs.name!r} is id {e.id} here, "
                            f"{theirs.id} on the primary")
                self.catalog.put(theirs)
                self._open_writer(theirs)
                return theirs
            if (mine.name, mine.segment_length, mine.created_ns) != (
                    theirs.name, theirs.segment_length, theirs.created_ns):
                raise ArchiveError(
                    f"wrong primary: recording id {theirs.id} is {mine.name!r} created at "
                    f"{mine.created_ns} here, {theirs.name!r} created at {theirs.created_ns} "
                    f"on the primary (the two archives hold different recordings)")
            changed = False
            for name, position in theirs.consumers.items():
                if position > mine.consumers.get(name, -1):
                    mine.consumers[name] = position
                    changed = True
            if theirs.dedup:
                marks = marks_from_rows(mine.dedup)
                for key, value in marks_from_rows(theirs.dedup).items():
                    if value > marks.get(key, (-1, -1)):
                        marks[key] = value
                if marks_to_rows(marks) != mine.dedup:
                    mine.dedup = marks_to_rows(marks)
                    changed = True
                writer = self._writers.get(mine.id)
                if writer is not None:
                    for key, value in marks.items():
                        if value > writer.dedup.get(key, (-1, -1)):
                            writer.dedup[key] = value
            writer = self._writers.get(mine.id)
            keyed = theirs.keyed or mine.keyed or (writer is not None and writer.entry.keyed)
            if (mine.keyed, mine.ingest_tag) != (keyed, theirs.ingest_tag):
                mine.keyed, mine.ingest_tag = keyed, theirs.ingest_tag
                changed = True
            if changed:
                self.catalog.save()
            if theirs.start_position > mine.start_position:
                if theirs.start_position <= self.stop_position(mine.id):
                    self.truncate(mine.id, theirs.start_position)
                else:
                    self.start_over(mine.id, theirs.start_position)
            return mine

    def start_over(self, recording: str | int, start: int) -> None:
        """Empty a recording and let it begin at ``start`` (a replica whose primary
        truncated past everything it held): its segment files are deleted."""
        self._require_owner()
        with self._lock:
            entry = self.entry(recording)
            writer = self._writers.pop(entry.id, None)
            if writer is not None:
                if entry.keyed:
                    entry.dedup = writer.dedup_marks()
                writer.close()
            entry.start_position = start
            self.catalog.save()
            for base in segment_bases(self.directory, entry.id):
                os.unlink(segment_path(self.directory, entry.id, base))
            self._refused.pop(entry.id, None)
            self._open_writer(entry)
            self.time_index.forget(entry.id)

    def cut(self, recording: str | int, position: int) -> None:
        """Cut a recording back to ``position`` (a stale former primary's tail, which the
        new primary does not hold; docs/protocol.md 3.7). The writer is opened again, so
        the dedup marks are those of the records kept (and the catalog's)."""
        self._require_owner()
        with self._lock:
            entry = self.entry(recording)
            if position < entry.start_position:
                self.start_over(entry.id, position)
                return
            writer = self.writer(entry.id)
            if position >= writer.stop_position:
                return
            if not self._is_boundary(entry, position, writer.stop_position):
                raise ReplayRangeError(f"recording {entry.name!r}: cut position {position} "
                                       f"is not a record boundary")
            writer.cut(position)
            writer.close()
            self._open_writer(entry)
            self.time_index.forget(entry.id)

    # ---- reading ---------------------------------------------------------------------------

    def entry(self, recording: str | int) -> CatalogEntry:
        """The catalog entry of a recording by name or id (re-read from disk when not the owner);
        :class:`RecordingNotFound` if none."""
        with self._lock:
            if not self.owner:
                self.catalog = Catalog.load(self.directory)  # the service may have changed it
            return self.catalog.find(recording)

    def stop_position(self, recording: str | int) -> int:
        """The end of the recording's valid (durable, for the owner) records."""
        entry = self.entry(recording)
        writer = self._writers.get(entry.id)
        if writer is not None:
            return writer.stop_position
        return self._scan_stop(entry)

    def _scan_stop(self, entry: CatalogEntry) -> int:
        """Where the valid records end, read-only (a live recording of another process: an
        incomplete tail record is simply not there yet). Damage followed by valid data (a
        later segment file holding bytes, or a valid record further on in the file) does
        not end them: the stop lies past it, so that a replay meets the damage and names
        it (ArchiveCorrupt) instead of ending early."""
        length = entry.segment_length
        bases = [b for b in segment_bases(self.directory, entry.id)
                 if b + length > entry.start_position]
        if not bases:
            return entry.start_position
        base, offset = self._tails.get(entry.id, (bases[0], 0))
        if base < bases[0]:
            base, offset = bases[0], 0
            self._damage.pop(entry.id, None)  # truncated: what it noted may be gone
        while True:
            path = segment_path(self.directory, entry.id, base)
            try:
                seg = MappedSegment(path, base)
            except FileNotFoundError:
                break
            try:
                end, damage = self._scan_segment(seg.map, offset, seg.size, base, length)
            finally:
                seg.close()
            if damage >= 0:
                self._damage.setdefault(entry.id, (path, damage))
            offset = end
            later = [b for b in bases if b > base]
            if not later or (end < length and not self._holds_data(entry, later[0])):
                break
            if end < length:  # a short segment that data follows
                self._damage.setdefault(entry.id, (path, end))
            base, offset = later[0], 0
        self._tails[entry.id] = (base, offset)
        return base + offset

    def _holds_data(self, entry: CatalogEntry, base: int) -> bool:
        try:
            return os.path.getsize(segment_path(self.directory, entry.id, base)) > 0
        except FileNotFoundError:
            return False

    @staticmethod
    def _scan_segment(data: Any, offset: int, size: int, base: int,
                      length: int) -> tuple[int, int]:
        """Where the valid records of a segment end, from ``offset``, and the offset of the
        first damage passed on the way (-1: none). Only the tail can be in the middle of a
        write (a write is at most ``WRITE_BUFFER`` bytes), so the headers are walked first
        and the checksums verified over the last stretch."""
        if size - offset > 2 * WRITE_BUFFER:
            walked, _ = codec.scan(data, offset, size - WRITE_BUFFER, base, checksum=False)
            if walked <= size:  # a damaged length can throw the walk past the file
                offset = walked
        end, _ = codec.scan(data, offset, size, base)
        damage = -1
        while end < size:
            # a bad record or a zero length before the end of the file: the tail being
            # written (nothing valid after it yet), or damage that valid records follow,
            # which a replay must meet and name
            after = after_bad_record(data, end, size, length)
            following = find_record(data, after, size, base) if after >= 0 else -1
            if following < 0:
                break
            if damage < 0:
                damage = end
            end, _ = codec.scan(data, following, size, base)
        return end, damage

    def _info(self, entry: CatalogEntry) -> RecordingInfo:
        stop = self.stop_position(entry.id)  # read-only: notes damage it goes past
        writer = self._writers.get(entry.id)
        state = "ok" if writer is None or writer.failed is None else f"failed: {writer.failed}"
        refused = self._refused.get(entry.id)
        if refused is not None:
            state = f"failed: recovery refused: {refused}"
        elif not self.owner and entry.id in self._damage:
            path, offset = self._damage[entry.id]
            state = (f"damaged: {path} at offset {offset} (an owner's recovery refuses it; "
                     f"run exon archive verify)")
        return RecordingInfo(name=entry.name, id=entry.id, start_position=entry.start_position,
                             stop_position=stop,
                             segment_length=entry.segment_length, created_ns=entry.created_ns,
                             ingest_tag=entry.ingest_tag, consumers=dict(entry.consumers),
                             state=state)

    def recordings(self) -> list[RecordingInfo]:
        """Every recording, ascending by id, as :class:`RecordingInfo`."""
        with self._lock:
            if not self.owner:
                self.catalog = Catalog.load(self.directory)
            entries = sorted(self.catalog.entries.values(), key=lambda e: e.id)
        return [self._info(e) for e in entries]

    def recording(self, recording: str | int) -> RecordingInfo:
        """One recording by name or id, as :class:`RecordingInfo`."""
        return self._info(self.entry(recording))

    def check_range(self, recording: str | int, start: int,
                    end: int | None) -> tuple[CatalogEntry, int, int]:
        """Validate a replay range: ``(entry, start, end)`` with ``end`` resolved (None: the
        stop position now). Raises ReplayRangeError naming the range."""
        entry = self.entry(recording)
        stop = self.stop_position(entry.id)
        if end is None:
            end = stop
        if not isinstance(start, int) or not isinstance(end, int):
            raise ReplayRangeError("replay positions are integers")
        if not entry.start_position <= start <= end <= stop:
            raise ReplayRangeError(
                f"recording {entry.name!r}: range [{start}, {end}) is outside "
                f"[{entry.start_position}, {stop}]")
        for p in (start, end):
            if p % ALIGNMENT or not self._is_boundary(entry, p, stop):
                raise ReplayRangeError(f"recording {entry.name!r}: position {p} is not a "
                                       f"record boundary")
        return entry, start, end

    def _is_boundary(self, entry: CatalogEntry, position: int, stop: int) -> bool:
        """Whether a record starts at ``position``: the record headers walked from the
        segment's first record land on it (a payload can hold bytes that look like a
        header; only the chain of lengths tells)."""
        if position in (entry.start_position, stop):
            return True
        length = entry.segment_length
        base = position - position % length
        if position == base:
            return True
        path = segment_path(self.directory, entry.id, base)
        try:
            seg = MappedSegment(path, base)
        except FileNotFoundError:
            return False
        try:
            first = max(base, entry.start_position) - base
            walked, _ = codec.walk(seg.map, first, position - base, 1 << 62)
            if walked < position - base and walked + HEADER_LENGTH <= seg.size:
                raise ArchiveCorrupt(f"zero record length before position {position}",
                                     path=path, offset=walked)
        finally:
            seg.close()
        return bool(walked == position - base)

    def replay_batches(self, recording: str | int, start: int = 0, end: int | None = None, *,
                       follow: bool = False, verify: bool = True,
                       batch: int = BATCH_RECORDS,
                       idle_timeout: float | None = None) -> Iterator[list[Record]]:
        """The records in ``[start, end)`` in lists of up to ``batch``; ``end=None``: up to
        the stop position when called. ``follow=True``: then keep tailing the recording as
        it grows (``end`` must be None) until the caller stops iterating, or until nothing
        new came for ``idle_timeout`` seconds."""
        if follow and end is not None:
            raise ReplayRangeError("follow=True replays to the live end: give no end")
        entry, start, end = self.check_range(recording, start, end)
        files = RecordingFiles(self.directory, entry)
        try:
            position = start
            while True:
                if position < end:
                    yield from files.batches(position, end, verify=verify, batch=batch)
                    position = end
                if not follow:
                    return
                end = self._wait_for_more(entry, position, idle_timeout)
                if end <= position:
                    return
        finally:
            files.close()

    def _wait_for_more(self, entry: CatalogEntry, position: int,
                       timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        writer = self._writers.get(entry.id)
        while True:
            if writer is not None:
                with writer.changed:
                    if writer.stop_position <= position and writer.failed is None:
                        writer.changed.wait(0.1 if deadline is None
                                            else max(0.0, min(0.1, deadline - time.monotonic())))
                stop = writer.stop_position
            else:
                stop = self._scan_stop(entry)
                if stop <= position:
                    time.sleep(FOLLOW_POLL)
            if stop > position:
                return stop
            if writer is not None and (writer.failed is not None or self._lock_fd < 0):
                return position
            if deadline is not None and time.monotonic() >= deadline:
                return position

    def replay(self, recording: str | int, start: int = 0, end: int | None = None, *,
               follow: bool = False, verify: bool = True,
               idle_timeout: float | None = None) -> Iterator[Record]:
        """The records in ``[start, end)``, one at a time (decoded in batches underneath);
        see :meth:`replay_batches`. Lazy as a generator: nothing is checked or read before
        the first record is asked for; dropping the iterator closes the files."""
        # chain walks each batch list in C: no Python frame resumed per record
        return itertools.chain.from_iterable(self.replay_batches(
            recording, start, end, follow=follow, verify=verify, idle_timeout=idle_timeout))

    def boundaries(self, recording: str | int, start: int, end: int | None,
                   max_records: int) -> list[int]:
        """Record boundaries ``[start, p1, ..., end]`` cutting ``[start, end)`` into slices
        of at most ``max_records`` records."""
        if max_records < 1:
            raise ValueError("max_records must be >= 1")
        entry, start, end = self.check_range(recording, start, end)
        files = RecordingFiles(self.directory, entry)
        try:
            out = [start]
            position = start
            while position < end:
                position, _ = files.skip(position, end, max_records)
                if position <= out[-1]:
                    base = position - position % entry.segment_length
                    raise ArchiveCorrupt(f"no record at position {position}",
                                         path=segment_path(self.directory, entry.id, base),
                                         offset=position - base)
                out.append(position)
            return out
        finally:
            files.close()

    def advance(self, recording: str | int, start: int, max_records: int) -> int:
        """The position after at most ``max_records`` records from ``start`` (at most the
        stop position)."""
        if max_records < 0:
            raise ValueError("max_records must be >= 0")
        entry, start, end = self.check_range(recording, start, None)
        files = RecordingFiles(self.directory, entry)
        try:
            return files.skip(start, end, max_records)[0]
        finally:
            files.close()

    def count(self, recording: str | int, start: int, end: int | None,
              max_records: int) -> int:
        """How many records ``[start, end)`` holds, counting at most ``max_records``
        (``end=None``: the stop position)."""
        entry, start, end = self.check_range(recording, start, end)
        files = RecordingFiles(self.directory, entry)
        try:
            return files.skip(start, end, max_records)[1]
        finally:
            files.close()

    @functools.cached_property
    def time_index(self) -> TimeIndex:
        """The recordings' time index (exon.archive.time_index), built as it is asked."""
        return TimeIndex(self)

    def position_at(self, recording: str | int, timestamp: int, *,
                    wait: float | None = None) -> int:
        """The position of the first record received at or after ``timestamp`` (ns since
        the epoch): the start position when every record is, the stop position when none
        is (exon.archive.time_index; ``wait``: IndexBuilding after that many seconds of a
        first build)."""
        return self.time_index.position_at(recording, timestamp, wait=wait)

    def files(self, recording: str | int) -> RecordingFiles:
        """Read access to the segment files of a recording."""
        return RecordingFiles(self.directory, self.entry(recording))

    # ---- checking ------------------------------------------------------------------------------

    def verify(self, recording: str | int | None = None) -> list[dict[str, Any]]:
        """Check every record's header and checksum: one report per recording, with the
        first bad record (``bad``: path, offset, problem) or None."""
        with self._lock:
            if not self.owner:
                self.catalog = Catalog.load(self.directory)
            entries = ([self.catalog.find(recording)] if recording is not None
                       else sorted(self.catalog.entries.values(), key=lambda e: e.id))
        reports = []
        for entry in entries:
            reports.append(self._verify_one(entry))
        return reports

    def _verify_one(self, entry: CatalogEntry) -> dict[str, Any]:
        from exon.archive.format import decode_records

        length = entry.segment_length
        records = 0
        position = entry.start_position
        bases = [b for b in segment_bases(self.directory, entry.id) if b + length > position]
        bad: dict[str, Any] | None = None
        for base in bases:
            path = segment_path(self.directory, entry.id, base)
            if base != position - position % length:
                bad = {"path": path, "offset": 0,
                       "problem": f"segment starts at {base}, want {position}"}
                break
            with open(path, "rb") as f:
                data = f.read()
            offset = position - base
            try:
                while offset < len(data):
                    recs, nxt = decode_records(data, offset, len(data), base, limit=65536,
                                               verify=True, path=path)
                    records += len(recs)
                    if nxt == offset:
                        raise ArchiveCorrupt("zero length before the end of the file",
                                             path=path, offset=offset)
                    offset = nxt
            except ArchiveCorrupt as exc:
                # the good records of the batch that failed count too
                records += scan_records(data, offset, exc.offset, base)[1]
                bad = {"path": exc.path, "offset": exc.offset, "problem": str(exc)}
                break
            position = base + offset
            if offset < length:
                break
        return {"recording": entry.name, "id": entry.id, "records": records,
                "start_position": entry.start_position, "stop_position": position,
                "ok": bad is None, "bad": bad}
