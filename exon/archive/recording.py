"""The append side of one recording: framing, segment rolling, fsync policy, dedup.

:class:`RecordingWriter` is used by one thread (the service's recorder); readers in
other threads see ``stop_position`` (what is written and, under the fsync policy,
durable) and wait on ``changed`` for more.

fsync policies (Aeron Archive's file sync levels):

* ``none``: a batch is acknowledged once ``write()`` returned (it is in the page cache:
  it survives the death of the process, not of the machine);
* ``data``: ``fdatasync`` after each batch, before it is acknowledged;
* ``full``: ``fsync`` after each batch, and the directory when a segment file is created.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from exon.archive import codec
from exon.archive.catalog import CatalogEntry, fsync_dir
from exon.archive.errors import ArchiveFull
from exon.archive.format import decode_key, encode_pad, scan_records
from exon.archive.segments import recover_segments, segment_bases, segment_path

FsyncPolicy = Literal["none", "data", "full"]
FSYNC_POLICIES: tuple[str, ...] = ("none", "data", "full")
WRITE_BUFFER = 4 * 1024 * 1024
#: seconds close() waits for an append in progress (its write and sync) to end
CLOSE_WAIT = 30.0

log = logging.getLogger("exon.archive")

#: keyed ingest's dedup state: (query, partition) -> the last (batch, seq) recorded
DedupMarks = dict[tuple[str, int], tuple[int, int]]


def marks_from_rows(rows: Sequence[Sequence[Any]]) -> DedupMarks:
    """Dedup marks from the catalog's ``[query, partition, batch, seq]`` rows."""
    return {(str(q), int(p)): (int(b), int(n)) for q, p, b, n in rows}


def marks_to_rows(marks: DedupMarks) -> list[list[Any]]:
    """The catalog's ``[query, partition, batch, seq]`` rows of ``marks``."""
    return [[q, p, b, n] for (q, p), (b, n) in sorted(marks.items())]


def raise_mark(marks: DedupMarks, key: bytes) -> None:
    """Raise ``marks`` to a recorded record's dedup ``key`` (never lower them)."""
    query, partition, batch, seq = decode_key(key)
    last = marks.get((query, partition))
    if last is None or (batch, seq) > last:
        marks[(query, partition)] = (batch, seq)


class RecordingWriter:
    """Appends batches of messages to a recording (recovering its tail first)."""

    def __init__(self, directory: str, entry: CatalogEntry, fsync: FsyncPolicy = "none") -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy {fsync!r}: want one of {', '.join(FSYNC_POLICIES)}")
        self.directory = directory
        self.entry = entry
        self.fsync = fsync
        #: (query, partition) -> the last (batch, seq) recorded: the catalog's marks of
        #: what truncation deleted, raised by the keys of the records on disk
        self.dedup: DedupMarks = marks_from_rows(entry.dedup)
        stop, _ = recover_segments(directory, entry,
                                   lambda key, position: raise_mark(self.dedup, key))
        self.stop_position = stop
        self.changed = threading.Condition()
        self.failed: str | None = None  # why recording stopped (disk full, I/O error)
        self.records_written = 0
        self.duplicates_dropped = 0
        #: keyed rows dropped for coming past a gap in their (query, partition)'s sequence
        self.gaps_dropped = 0
        #: one append at a time: a recording can have both an ingest PULL (the recorder
        #: thread) and keyed ingest (the keyed thread); the framing buffer, the file and
        #: the stop position are the appender's own
        self._appending = threading.Lock()
        self.closed = False
        self._fd = -1
        self._base = -1
        #: spans are framed here: a segment, at most WRITE_BUFFER (a record always fits)
        self._buffer = bytearray(min(entry.segment_length, WRITE_BUFFER))
        self._open_for(stop)

    # ---- files ---------------------------------------------------------------------------

    def _open_for(self, position: int) -> None:
        length = self.entry.segment_length
        base = position - position % length
        if base == self._base:
            return
        if self._fd >= 0:
            # the batch that rolls over is confirmed after one sync of the file it ends
            # in: the segment it leaves (its last records, its PAD) is synced here
            self._sync()
            os.close(self._fd)
            self._fd = -1
        path = segment_path(self.directory, self.entry.id, base)
        created = not os.path.exists(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._base = base
        if created and self.fsync == "full":
            fsync_dir(self.directory)

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        """Stop appending: wait (up to ``timeout`` s) for an append in progress to end, then
        close the file. Later appends raise :class:`ArchiveFull` ("closed"). If the append
        does not end in time (a disk that hangs) the file is left open: closing it under
        the write could let the number go to another file that the write then hits."""
        idle = self._appending.acquire(timeout=timeout)
        try:
            self.closed = True
            if idle and self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            elif not idle:
                log.warning("recording %r: an append still runs after %.0f s; its file is "
                            "left open", self.entry.name, timeout)
        finally:
            if idle:
                self._appending.release()
        with self.changed:
            self.changed.notify_all()

    # ---- appending -------------------------------------------------------------------------

    def append(self, payloads: Sequence[bytes], producers: Sequence[bytes], timestamp: int,
               keys: Sequence[bytes] | None = None) -> int:
        """Write the records and make them durable per the policy; returns the new stop
        position. Keyed records already recorded are dropped (counted). Raises
        :class:`ArchiveFull` when the disk refuses: the partial write is cut back, the
        stop position stays at the last whole batch, and the recording stops. Raises
        ValueError for a message too large for a segment (nothing is written)."""
        with self._appending:
            return self._append_payloads(payloads, producers, timestamp, keys)

    def _append_payloads(self, payloads: Sequence[bytes], producers: Sequence[bytes],
                         timestamp: int, keys: Sequence[bytes] | None) -> int:
        self.check_running()
        pending: list[tuple[tuple[str, int], tuple[int, int]]] = []
        if keys is not None:
            payloads, producers, keys = self._drop_duplicates(payloads, producers, keys)
            if not payloads:
                return self.stop_position
            for key in keys:
                query, partition, batch, seq = decode_key(key)
                pending.append(((query, partition), (batch, seq)))
        payloads, producers = list(payloads), list(producers)
        klist = None if keys is None else list(keys)

        def encode(out: bytearray, position: int, done: int, room: int) -> tuple[int, int]:
            return codec.encode_span(out, 0, position, payloads, producers, timestamp, klist,
                                     done, room)

        position = self._append(len(payloads), encode)
        for k, v in pending:
            self.dedup[k] = v
        return position

    def append_buffer(self, buffer: Any, offsets: Any, runs: list[tuple[Any, int]],
                      producer_of: Callable[[Any], bytes], timestamp: int) -> int:
        """:meth:`append` for a PULL's held batch as it hands it out: its payloads as one
        buffer (:attr:`exon.HeldBatch.buffer` and :attr:`~exon.HeldBatch.offsets`:
        ``len(batch) + 1`` u64, payload ``i`` is ``buffer[offsets[i]:offsets[i + 1]]``) and
        its senders run by run (:attr:`~exon.HeldBatch.runs`, ``[(peer, count), ...]``;
        ``producer_of(peer)`` gives the producer bytes recorded, asked once per run or
        less). The records are framed straight from the buffer, no Python object per
        message."""
        def encode(out: bytearray, position: int, done: int, room: int) -> tuple[int, int]:
            return codec.encode_buffer(out, 0, position, buffer, offsets, runs, producer_of,
                                       timestamp, done, room)

        with self._appending:
            self.check_running()
            return self._append(len(offsets) - 1, encode)

    def append_raw(self, position: int, data: bytes, *, sync: bool = True,
                   keyed: bool = False) -> int:
        """Write records copied byte for byte from another archive (a replica following
        its primary) at ``position``, which must be the stop position: whole, valid records
        (checksums included) within one segment, PAD records included. Their dedup keys
        raise the marks (``keyed``: the records may carry keys, read in Python; else they
        are checked natively). ``sync=False`` leaves the sync to :meth:`sync` (a replica syncs
        once per drained stream). Returns the new stop position. Raises ValueError (nothing
        written) for records that do not continue the recording or do not check."""
        with self._appending:
            self.check_running()
            if position != self.stop_position:
                raise ValueError(f"recording {self.entry.name!r}: records copied at position "
                                 f"{position}, but it ends at {self.stop_position}")
            length = self.entry.segment_length
            if not data or (position % length) + len(data) > length:
                raise ValueError(f"recording {self.entry.name!r}: {len(data)} bytes copied at "
                                 f"{position} do not fit its segment")
            marks: DedupMarks = {}
            if keyed or self.entry.keyed:
                end, _ = scan_records(data, 0, len(data), position,
                                      on_key=lambda key, _p: raise_mark(marks, key))
            else:
                end, _ = codec.scan(data, 0, len(data), position)
            if end != len(data):
                raise ValueError(f"recording {self.entry.name!r}: the records copied at "
                                 f"{position} fail their checks at {position + end}")
            try:
                self._write(position, memoryview(data))
                if sync:
                    self._sync()
            except OSError as exc:
                self._fail(position, exc)
            for k, v in marks.items():
                if v > self.dedup.get(k, (-1, -1)):
                    self.dedup[k] = v
            with self.changed:
                self.stop_position = position + len(data)
                self.changed.notify_all()
            return self.stop_position

    def sync(self) -> None:
        """Make what :meth:`append_raw` wrote with ``sync=False`` durable (the fsync policy)."""
        with self._appending:
            if self._fd >= 0:
                try:
                    self._sync()
                except OSError as exc:
                    self._fail(self.stop_position, exc)

    def cut(self, position: int) -> None:
        """Cut the recording back to ``position`` (a record boundary at or below the stop):
        a stale member's tail (docs/protocol.md 3.7). The dedup marks are not lowered
        here: the owner reopens the writer (recovery rebuilds them)."""
        with self._appending:
            if position >= self.stop_position:
                return
            self._cut_back(position)
            if self.fsync != "none":
                fsync_dir(self.directory)
            with self.changed:
                self.stop_position = position
                self.changed.notify_all()

    def dedup_marks(self) -> list[list[Any]]:
        """The keyed ingest's high-water marks, ``[query, partition, batch, seq]`` each (a
        snapshot between appends): what a truncation keeps in the catalog."""
        with self._appending:
            return marks_to_rows(self.dedup)

    def check_running(self) -> None:
        """Raise :class:`ArchiveFull` (with the reason) once the recording has stopped, or
        the writer was closed."""
        if self.closed:
            raise ArchiveFull(f"recording {self.entry.name!r}: its writer is closed")
        if self.failed is not None:
            raise ArchiveFull(f"recording {self.entry.name!r} stopped: {self.failed}")

    def _append(self, count: int,
                encode: Callable[[bytearray, int, int, int], tuple[int, int]]) -> int:
        """Frame ``count`` records span by span (a span: what fits the rest of a segment
        and the buffer), write each, sync once; the common part of the appends."""
        length = self.entry.segment_length
        position = start = self.stop_position
        out = self._buffer
        try:
            done = 0
            while done < count:
                room = length - position % length
                n, used = encode(out, position, done, min(room, len(out)))
                if n == 0:
                    if room == length:
                        raise ValueError(f"a message does not fit a {length}-byte segment")
                    if room <= len(out):  # the next record does not fit: PAD the segment
                        pad = bytearray(room)
                        encode_pad(pad, 0, position, room)
                        self._write(position, pad)
                        position += room
                        continue
                    raise ValueError("a message is larger than the write buffer")
                self._write(position, memoryview(out)[:used])
                position += used
                done += n
            self._sync()
        except OSError as exc:
            self._fail(start, exc)
        except ValueError:
            if position != start:  # cut back what this call wrote: none of it is confirmed
                self._cut_back(start)
            raise
        self.records_written += count
        with self.changed:
            self.stop_position = position
            self.changed.notify_all()
        return position

    def _drop_duplicates(self, payloads: Sequence[bytes], producers: Sequence[bytes],
                         keys: Sequence[bytes]) -> tuple[list[bytes], list[bytes], list[bytes]]:
        out_p, out_r, out_k = [], [], []
        seen = dict(self.dedup)
        for payload, producer, key in zip(payloads, producers, keys, strict=True):
            query, partition, batch, seq = decode_key(key)
            last = seen.get((query, partition))
            if last is not None and (batch, seq) <= last:
                self.duplicates_dropped += 1
                continue
            if seq != (last[1] + 1 if last is not None and batch == last[0] else 0):
                # a row past a gap: the rows before it were not recorded (their batch was
                # rejected and their writer told CookieLost; these came from the same link
                # before it closed). Recording it would raise the mark past them, and the
                # writer's retry would then be dropped as duplicates: it waits for that retry
                self.gaps_dropped += 1
                continue
            seen[(query, partition)] = (batch, seq)
            out_p.append(payload)
            out_r.append(producer)
            out_k.append(key)
        return out_p, out_r, out_k

    def _write(self, position: int, data: bytearray | memoryview) -> None:
        self._open_for(position)
        offset = position - self._base
        view = memoryview(data)
        while view:
            n = os.pwrite(self._fd, view, offset)
            if n <= 0:  # pragma: no cover - pwrite raises instead
                raise OSError(errno.EIO, "short write")
            view = view[n:]
            offset += n

    def _sync(self) -> None:
        if self.fsync == "data":
            os.fdatasync(self._fd)
        elif self.fsync == "full":
            os.fsync(self._fd)

    def _cut_back(self, start: int) -> None:
        """Truncate the files back to ``start`` (dropping later segments)."""
        length = self.entry.segment_length
        base = start - start % length
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._base = -1
        # later segments first, the newest first, then the cut: a crash in between leaves
        # a torn tail that recovery cuts, never a short segment that data follows (which
        # recovery refuses as damage)
        later = [b for b in segment_bases(self.directory, self.entry.id) if b > base]
        for b in sorted(later, reverse=True):
            os.unlink(segment_path(self.directory, self.entry.id, b))
        os.truncate(segment_path(self.directory, self.entry.id, base), start - base)

    def _fail(self, start: int, exc: OSError) -> None:
        """Cut the files back to ``start`` (the last acknowledged position) and stop."""
        self.failed = f"{exc.strerror or exc} (errno {exc.errno})"
        try:
            self._cut_back(start)
        except OSError:
            pass  # recovery cuts a torn tail at the next start
        with self.changed:
            self.changed.notify_all()
        raise ArchiveFull(f"recording {self.entry.name!r} stopped at position {start}: "
                          f"{self.failed}") from exc
