"""Segment files of a recording: naming, reading in batches (mmap), recovery.

A recording's bytes ``[base, base + segment_length)`` live in ``DIR/ID-BASE.rec``; files
grow as records are appended (a full segment ends with a PAD record, so its size is
exactly ``segment_length``). Reading maps a segment with ``mmap`` and decodes it in
batches (:func:`exon.archive.codec.decode`: one native call per batch when the native
decoder is built).
"""

from __future__ import annotations

import logging
import mmap
import os
import re
from collections.abc import Iterator
from typing import Any

from exon.archive import codec
from exon.archive.catalog import CatalogEntry
from exon.archive.errors import ArchiveCorrupt, ReplayRangeError
from exon.archive.format import (
    Record,
    after_bad_record,
    align,
    find_record,
    frame_length_at,
    record_problem,
    scan_records,
)

SEGMENT_SUFFIX = ".rec"
_SEGMENT_NAME = re.compile(r"^(\d+)-(\d+)\.rec$")
#: records decoded per batch
BATCH_RECORDS = 4096
log = logging.getLogger("exon.archive")


def segment_path(directory: str, recording_id: int, base: int) -> str:
    return os.path.join(directory, f"{recording_id}-{base}{SEGMENT_SUFFIX}")


def segment_bases(directory: str, recording_id: int) -> list[int]:
    """The base positions of the recording's segment files, ascending."""
    bases = []
    for name in os.listdir(directory):
        m = _SEGMENT_NAME.match(name)
        if m and int(m.group(1)) == recording_id:
            bases.append(int(m.group(2)))
    bases.sort()
    return bases


class MappedSegment:
    """A read-only map of one segment file (remapped when it has grown)."""

    def __init__(self, path: str, base: int) -> None:
        self.path = path
        self.base = base
        self._fd = os.open(path, os.O_RDONLY)
        self.map: Any = None
        self.size = 0
        self.refresh()

    def refresh(self) -> int:
        size = os.fstat(self._fd).st_size
        if size != self.size or self.map is None:
            if self.map is not None:
                self.map.close()
            self.map = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ) if size else b""
            self.size = size
        return size

    def close(self) -> None:
        if self.map is not None and not isinstance(self.map, bytes):
            try:
                self.map.close()
            except BufferError:
                pass  # a memoryview of it is still alive; the GC unmaps it
        self.map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class RecordingFiles:
    """Read access to one recording's segments: ``batches(start, end)``."""

    def __init__(self, directory: str, entry: CatalogEntry) -> None:
        self.directory = directory
        self.entry = entry
        self._open: dict[int, MappedSegment] = {}
        self.producers: dict[bytes, str] = {}

    def segment(self, base: int) -> MappedSegment:
        seg = self._open.get(base)
        if seg is None:
            path = segment_path(self.directory, self.entry.id, base)
            try:
                seg = MappedSegment(path, base)
            except FileNotFoundError:
                raise ReplayRangeError(
                    f"recording {self.entry.name!r}: position {base} is no longer on disk "
                    f"(truncated?)") from None
            if len(self._open) >= 4:  # keep a few maps open
                old = min(self._open)
                self._open.pop(old).close()
            self._open[base] = seg
        return seg

    def close(self) -> None:
        for seg in self._open.values():
            seg.close()
        self._open.clear()

    def batches(self, start: int, end: int, *, verify: bool = True,
                batch: int = BATCH_RECORDS) -> Iterator[list[Record]]:
        """Records in ``[start, end)`` (``end`` a record boundary at or below the stop
        position), ``batch`` at a time."""
        length = self.entry.segment_length
        position = start
        while position < end:
            base = position - position % length
            seg = self.segment(base)
            limit = min(end - base, length)
            if seg.size < limit:
                seg.refresh()
            span_end = min(limit, seg.size)
            offset = position - base
            if offset >= span_end:
                raise ArchiveCorrupt(f"segment ends before position {end}", path=seg.path,
                                     offset=offset)
            try:
                records, offset = codec.decode(seg.map, offset, span_end, base, batch,
                                               verify, seg.path, self.producers)
            except ArchiveCorrupt as exc:
                # the good records of the batch come first, then the bad one is named
                if offset < exc.offset <= span_end:
                    records, _ = codec.decode(seg.map, offset, exc.offset, base, batch,
                                              verify, seg.path, self.producers)
                    if records:
                        yield records
                raise
            if offset == position - base:  # no progress: zero length before `end`
                raise ArchiveCorrupt(f"no record at position {position} (stop {end})",
                                     path=seg.path, offset=offset)
            position = base + offset
            if records:
                yield records

    def raw(self, start: int, end: int, max_bytes: int) -> tuple[bytes, int, int]:
        """Up to ``max_bytes`` of whole records from ``start`` (one segment at most; a
        single record larger than the budget is sent whole): ``(bytes, their start, their
        end)`` for shipping to a remote replay. Every record sent passes its checks
        (checksum included): a bad one raises :class:`ArchiveCorrupt` naming this
        segment's file and the record's offset, once the good records before it are
        sent."""
        length = self.entry.segment_length
        base = start - start % length
        seg = self.segment(base)
        limit = min(end - base, length)
        if seg.size < limit:
            seg.refresh()
        offset = start - base
        stop = min(limit, seg.size)
        if offset >= stop:
            raise ArchiveCorrupt(f"segment ends before position {end}", path=seg.path,
                                 offset=offset)
        # the valid records that fit the budget (the scan stops at one that runs past it)
        cut, _ = codec.scan(seg.map, offset, min(stop, offset + max_bytes), base)
        if cut == offset:
            # the first record is larger than the budget (sent whole), or bad
            frame_length = frame_length_at(seg.map, offset, stop)
            cut = offset + align(frame_length)
            if frame_length == 0 or cut > stop or codec.scan(seg.map, offset, cut,
                                                             base)[0] != cut:
                raise ArchiveCorrupt(f"{record_problem(seg.map, offset, stop, base)} "
                                     f"(replay to {end})", path=seg.path, offset=offset)
        return bytes(seg.map[offset:cut]), start, base + cut

    def skip(self, start: int, end: int, max_records: int) -> tuple[int, int]:
        """The position after at most ``max_records`` records from ``start`` (never past
        ``end``), and how many were skipped."""
        length = self.entry.segment_length
        position, count = start, 0
        while position < end and count < max_records:
            base = position - position % length
            seg = self.segment(base)
            limit = min(end - base, length)
            if seg.size < limit:
                seg.refresh()
            offset, n = codec.walk(seg.map, position - base, min(limit, seg.size),
                                     max_records - count)
            count += n
            if base + offset == position:
                break  # the end of the written data
            position = base + offset
        return position, count


def recover_segments(directory: str, entry: CatalogEntry,
                     on_key: Any = None) -> tuple[int, int]:
    """Find where the recording's valid records end, cutting a torn tail and deleting
    segment files below the start position: ``(stop_position, records in the last
    segment)``. ``on_key(key, position)`` sees the dedup keys of every keyed record (all
    segments are read when the entry is keyed; otherwise a full segment followed by
    another is taken as it is).

    Where the valid records stop before the data does, the rest is a torn tail only when
    nothing valid follows it: no record passing every check at an aligned offset further
    on in that file, and no later segment file holding any byte. Then the file is cut there
    (and empty later files deleted). Otherwise the recording is damaged, not torn: nothing
    is cut or deleted and :class:`ArchiveCorrupt` names the file and the offset where the
    valid records stop (a missing segment file between others is named the same way,
    offset 0). See docs/protocol.md 3.2."""
    length = entry.segment_length
    bases = segment_bases(directory, entry.id)
    for base in bases:
        if base + length <= entry.start_position:
            os.unlink(segment_path(directory, entry.id, base))
    bases = [b for b in bases if b + length > entry.start_position]
    if not bases:
        return entry.start_position, 0
    sizes = [os.path.getsize(segment_path(directory, entry.id, b)) for b in bases]
    stop = bases[0] if bases[0] > entry.start_position else entry.start_position
    count = 0
    for i, base in enumerate(bases):
        path = segment_path(directory, entry.id, base)
        data_follows = any(sizes[i + 1:])  # a later file holds bytes
        if base != stop:
            if data_follows or sizes[i]:
                raise ArchiveCorrupt(f"segment file missing: the recording's data jumps from "
                                     f"position {stop} to the next file at {base}",
                                     path=segment_path(directory, entry.id,
                                                       stop - stop % length),
                                     offset=stop % length)
            for later in bases[i:]:  # empty files past the end of the data
                os.unlink(segment_path(directory, entry.id, later))
            break
        with open(path, "r+b") as f:
            size = os.fstat(f.fileno()).st_size
            if data_follows and size == length and not entry.keyed:
                stop = base + length  # a full segment followed by data: not torn
                continue
            data = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""
            try:
                if entry.keyed and on_key is not None:
                    end, count = scan_records(data, 0, size, base, on_key=on_key)
                else:
                    end, count = codec.scan(data, 0, size, base)
                after = after_bad_record(data, end, size, length) if end < size else -1
                if end < length and (data_follows or (
                        after >= 0 and find_record(data, after, size, base) >= 0)):
                    raise ArchiveCorrupt(
                        f"{record_problem(data, end, size, base)}, and valid data follows: "
                        f"not a torn tail, nothing cut", path=path, offset=end)
            finally:
                if not isinstance(data, bytes):
                    data.close()
            if end < size:  # a torn tail: nothing valid after it
                log.warning("%s: cut a torn tail of %d bytes at offset %d", path,
                            size - end, end)
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        stop = base + end
        if end < length:
            for later in bases[i + 1:]:  # empty files (data_follows is false)
                os.unlink(segment_path(directory, entry.id, later))
            break
    return stop, count
