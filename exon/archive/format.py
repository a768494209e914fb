"""The archive's on-disk record format: pure codecs over buffers (no files, no clock).

A recording is a byte stream cut into segment files of ``segment_length`` bytes. Every
record starts at a 32-byte aligned *position* (its byte offset in the recording) and never
crosses a segment; the tail of a segment too short for the next record holds one PAD
record. A record (all integers little-endian)::

    offset size field
         0    4 checksum        u32  crc32c (Castagnoli) of bytes [4, frame_length)
         4    4 frame_length    u32  header + key + producer + payload, unaligned; 0 = no
                                     record here yet (the end of the written data)
         8    8 position        i64  this record's position in the recording
        16    8 timestamp       i64  receive time, ns since the Unix epoch
        24    2 meta_length     u16  key_length + producer bytes that follow the header
        26    1 type            u8   1 DATA, 2 PAD
        27    1 version         u8   1
        28    2 key_length      u16  0, or the length of the dedup key (keyed ingest)
        30    2 reserved        u16  0
        32    . key (key_length): partition i32, batch i64, seq i64, query (UTF-8)
         .    . producer (meta_length - key_length): UTF-8 "HOST:PORT/TAG"
         .    . payload (frame_length - 32 - meta_length)

The next record starts at ``align(frame_length, 32)``. The checksum covers the length,
position and everything after it, so a torn or misplaced record fails it.

``decode_records`` turns a span of a segment into :class:`Record` tuples in one pass (the
native twin in ``exon/native/archive/exon_archive.c`` does the same, checked by a parity
test); ``scan_records`` finds where the valid records of a span end (recovery);
``find_record`` whether a valid record follows where they end (damage, not a torn tail).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

from crc32c import crc32c

from exon.archive.errors import ArchiveCorrupt

HEADER: Final = struct.Struct("<IIqqHBBHH")
HEADER_LENGTH: Final = HEADER.size  # 32
ALIGNMENT: Final = 32
CHECKSUM_OFFSET: Final = 0
FRAME_LENGTH_OFFSET: Final = 4
POSITION_OFFSET: Final = 8
TIMESTAMP_OFFSET: Final = 16
META_LENGTH_OFFSET: Final = 24
TYPE_OFFSET: Final = 26
VERSION_OFFSET: Final = 27
KEY_LENGTH_OFFSET: Final = 28
TYPE_DATA: Final = 1
TYPE_PAD: Final = 2
RECORD_VERSION: Final = 1
KEY: Final = struct.Struct("<iqq")  # partition, batch, seq; then the query id (UTF-8)
#: the largest record (header + key + producer + payload) any segment can hold
MAX_META_LENGTH: Final = 0xFFFF
_BODY = struct.Struct("<Iqq")  # frame_length, position, timestamp (the checksummed prefix)
_U32 = struct.Struct("<I")
_POSITION = struct.Struct("<q")


def align(n: int) -> int:
    return (n + ALIGNMENT - 1) & ~(ALIGNMENT - 1)


class Record(tuple):  # type: ignore[type-arg]
    """One recorded message: ``Record(position, payload, producer, timestamp)``.

    ``position`` is the record's position in the recording (replay resumes there),
    ``producer`` the sending socket (``"HOST:PORT/TAG"``), ``timestamp`` the archive's
    receive time in ns since the Unix epoch. A tuple underneath, built natively in batches."""

    __slots__ = ()
    __match_args__ = ("position", "payload", "producer", "timestamp")

    def __new__(cls, position: int, payload: bytes, producer: str, timestamp: int) -> Record:
        return tuple.__new__(cls, (position, payload, producer, timestamp))

    @property
    def position(self) -> int:
        """The record's position in its recording (a replay from here starts with this record)."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def payload(self) -> bytes:
        """The message as its producer sent it."""
        return self[1]  # type: ignore[no-any-return]

    @property
    def producer(self) -> str:
        """The sending socket, ``"HOST:PORT/TAG"``."""
        return self[2]  # type: ignore[no-any-return]

    @property
    def timestamp(self) -> int:
        """The archive's receive time, ns since the Unix epoch."""
        return self[3]  # type: ignore[no-any-return]

    def __getnewargs__(self) -> tuple[int, bytes, str, int]:
        return (self[0], self[1], self[2], self[3])

    def __repr__(self) -> str:
        return (f"Record(position={self[0]}, payload={self[1]!r}, producer={self[2]!r}, "
                f"timestamp={self[3]})")


def encode_key(query: str, partition: int, batch: int, seq: int) -> bytes:
    """The dedup key of a keyed-ingest record."""
    return KEY.pack(partition, batch, seq) + query.encode()


def decode_key(key: bytes | memoryview) -> tuple[str, int, int, int]:
    """-> (query, partition, batch, seq)."""
    partition, batch, seq = KEY.unpack_from(key, 0)
    return bytes(key[KEY.size:]).decode(), partition, batch, seq


def record_length(payload_length: int, meta_length: int) -> int:
    """The aligned length a record of this payload and metadata takes."""
    return align(HEADER_LENGTH + meta_length + payload_length)


def encode_record(out: bytearray | memoryview, offset: int, position: int, payload: bytes,
                  producer: bytes, timestamp: int, key: bytes = b"") -> int:
    """Write one DATA record at ``out[offset:]``; returns its aligned length."""
    meta_length = len(key) + len(producer)
    frame_length = HEADER_LENGTH + meta_length + len(payload)
    HEADER.pack_into(out, offset, 0, frame_length, position, timestamp, meta_length,
                     TYPE_DATA, RECORD_VERSION, len(key), 0)
    start = offset + HEADER_LENGTH
    out[start:start + len(key)] = key
    start += len(key)
    out[start:start + len(producer)] = producer
    start += len(producer)
    out[start:start + len(payload)] = payload
    end = offset + frame_length
    aligned = align(frame_length)
    out[end:offset + aligned] = bytes(aligned - frame_length)
    _U32.pack_into(out, offset, crc32c(memoryview(out)[offset + 4:end]))
    return aligned


def encode_pad(out: bytearray | memoryview, offset: int, position: int, length: int) -> None:
    """Fill ``out[offset:offset+length]`` (aligned, >= 32) with one PAD record."""
    HEADER.pack_into(out, offset, 0, length, position, 0, 0, TYPE_PAD, RECORD_VERSION, 0, 0)
    out[offset + HEADER_LENGTH:offset + length] = bytes(length - HEADER_LENGTH)
    _U32.pack_into(out, offset, crc32c(memoryview(out)[offset + 4:offset + length]))


def encode_batch(position: int, payloads: Sequence[bytes], producers: Sequence[bytes],
                 timestamp: int, keys: Sequence[bytes] | None = None) -> bytearray:
    """Records for ``payloads`` (one producer per payload), the first at ``position``."""
    total = 0
    for i, payload in enumerate(payloads):
        total += record_length(len(payload), len(producers[i]) + (len(keys[i]) if keys else 0))
    out = bytearray(total)
    offset = 0
    for i, payload in enumerate(payloads):
        offset += encode_record(out, offset, position + offset, payload, producers[i],
                                timestamp, keys[i] if keys else b"")
    return out


def _problem(buf: Any, offset: int, end: int, base: int, verify: bool
             ) -> tuple[str | None, tuple[int, int, int, int, int, int] | None]:
    """The header checks of the record at ``offset`` (segment base position ``base``):
    ``(None, None)`` at the end of the written data (a zero length), ``(problem, None)``
    for a bad record, ``(None, fields)`` for a good one."""
    if end - offset < HEADER_LENGTH:
        if end - offset >= 8 and _U32.unpack_from(buf, offset + 4)[0] != 0:
            return "record header runs past the end of the data", None
        return None, None
    (checksum, frame_length, position, timestamp, meta_length, rtype, version, key_length,
     _) = HEADER.unpack_from(buf, offset)
    if frame_length == 0:
        return None, None
    aligned = align(frame_length)
    if frame_length < HEADER_LENGTH or offset + aligned > end:
        return f"bad frame length {frame_length}", None
    if position != base + offset:
        return f"position {position} where {base + offset} belongs", None
    if version != RECORD_VERSION or rtype not in (TYPE_DATA, TYPE_PAD):
        return f"unknown record type {rtype} / version {version}", None
    if key_length > meta_length or HEADER_LENGTH + meta_length > frame_length:
        return "metadata longer than the record", None
    if verify and crc32c(memoryview(buf)[offset + 4:offset + frame_length]) != checksum:
        return "checksum mismatch", None
    return None, (frame_length, aligned, timestamp, meta_length, rtype, key_length)


def _check(buf: Any, offset: int, end: int, base: int, path: str,
           verify: bool) -> tuple[int, int, int, int, int, int] | None:
    """Header checks of the record at ``offset`` (segment base position ``base``): None at
    the end of the written data; raises ArchiveCorrupt on a bad record."""
    problem, fields = _problem(buf, offset, end, base, verify)
    if problem is not None:
        raise ArchiveCorrupt(problem, path=path, offset=offset)
    return fields


def record_problem(buf: Any, offset: int, end: int, base: int) -> str:
    """Why no valid record starts at ``offset`` of ``buf[:end]`` (where a scan stopped),
    for an :class:`ArchiveCorrupt` message."""
    if offset >= end:
        return "the data ends here"
    problem, fields = _problem(buf, offset, end, base, True)
    if problem is not None:
        return problem
    if fields is None:
        return "zero record length where the data goes on"
    return "no record here"  # pragma: no cover - a scan does not stop at a good record


#: the type and version bytes of a record header (DATA or PAD, version 1): where
#: find_record looks for candidate headers
_TYPE_VERSION = re.compile(rb"(?=[\x01\x02]\x01)")


def frame_length_at(buf: Any, offset: int, end: int) -> int:
    """The frame length field of the record at ``offset`` (0 when ``buf[:end]`` ends before
    it)."""
    if end - offset < FRAME_LENGTH_OFFSET + 4:
        return 0
    return int(_U32.unpack_from(buf, offset + FRAME_LENGTH_OFFSET)[0])


def after_bad_record(buf: Any, offset: int, end: int, segment_length: int) -> int:
    """Where valid data could follow the record at ``offset`` that failed its checks (in
    data ending at ``end``, a segment of ``segment_length``): -1 when that record's own
    length is plausible (at least a header, within the segment) and runs past ``end``: a
    write stopped part way (kill -9), and every byte after ``offset`` is its payload, which
    may hold anything, records included. Else past its length when that ends within the
    data, or the next aligned offset when the length is zero or implausible."""
    if end - offset < FRAME_LENGTH_OFFSET + 4:
        return -1  # not even a length: the torn start of a header
    frame_length = frame_length_at(buf, offset, end)
    if HEADER_LENGTH <= frame_length <= segment_length - offset % segment_length:
        if offset + align(frame_length) > end:
            return -1
        return offset + align(frame_length)
    return offset + ALIGNMENT


def find_record(buf: Any, offset: int, end: int, base: int) -> int:
    """The first aligned offset at or after ``offset`` (below ``end``) where a record starts
    that passes every check, checksum included; -1 if none. Recovery and the read-only stop
    use it to tell damage followed by valid records from a torn tail (nothing valid after
    it). Candidates are found by their type and version bytes (a regular expression scans
    at C speed: zeroed or random stretches cost little)."""
    offset = align(max(offset, 0))
    if end - offset < HEADER_LENGTH:
        return -1
    for m in _TYPE_VERSION.finditer(buf, offset + TYPE_OFFSET, end):
        at = m.start() - TYPE_OFFSET
        if at % ALIGNMENT or end - at < HEADER_LENGTH:
            continue
        if _POSITION.unpack_from(buf, at + POSITION_OFFSET)[0] != base + at:
            continue
        problem, fields = _problem(buf, at, end, base, True)
        if problem is None and fields is not None:
            return at
    return -1


def decode_records(buf: Any, offset: int, end: int, base: int, *, limit: int = 1 << 62,
                   verify: bool = True, path: str = "<buffer>",
                   producers: dict[bytes, str] | None = None) -> tuple[list[Record], int]:
    """Decode the records of ``buf[offset:end]`` (a segment whose base position is
    ``base``), at most ``limit`` DATA records: ``(records, next_offset)``. PAD records are
    skipped. Stops at the end of the written data (a zero length). Raises ArchiveCorrupt
    (naming ``path`` and the offset) on a bad header or checksum. This is the reference
    twin of the native decoder."""
    out: list[Record] = []
    cache: dict[bytes, str] = {} if producers is None else producers
    view = memoryview(buf)
    while offset < end and len(out) < limit:
        checked = _check(buf, offset, end, base, path, verify)
        if checked is None:
            break
        frame_length, aligned, timestamp, meta_length, rtype, key_length = checked
        if rtype == TYPE_DATA:
            start = offset + HEADER_LENGTH
            producer_bytes = bytes(view[start + key_length:start + meta_length])
            producer = cache.get(producer_bytes)
            if producer is None:
                producer = cache[producer_bytes] = producer_bytes.decode("utf-8", "replace")
            out.append(Record(base + offset, bytes(view[start + meta_length:offset + frame_length]),
                              producer, timestamp))
        offset += aligned
    return out, offset


def scan_records(buf: Any, offset: int, end: int, base: int, *,
                 on_key: Callable[[bytes, int], None] | None = None,
                 limit: int = 1 << 62) -> tuple[int, int]:
    """Walk valid records from ``offset``: ``(offset where they end, DATA records seen)``.
    Stops (without raising) at the end of the data, at ``limit`` DATA records, or at the
    first record that fails a check (a torn tail). ``on_key(key, position)`` sees every
    keyed record's dedup key."""
    count = 0
    while offset < end and count < limit:
        try:
            checked = _check(buf, offset, end, base, "", True)
        except ArchiveCorrupt:
            break
        if checked is None:
            break
        _, aligned, _, _, rtype, key_length = checked
        if rtype == TYPE_DATA:
            count += 1
            if key_length and on_key is not None:
                start = offset + HEADER_LENGTH
                on_key(bytes(buf[start:start + key_length]), base + offset)
        offset += aligned
    return offset, count


def walk_headers(buf: Any, offset: int, end: int, limit: int) -> tuple[int, int]:
    """Skip at most ``limit`` DATA records (and any PAD) without checksums:
    ``(next offset, DATA records skipped)`` (boundaries for partitioned replay)."""
    count = 0
    unpack = _BODY.unpack_from
    while offset + HEADER_LENGTH <= end:
        frame_length = unpack(buf, offset + 4)[0]
        if frame_length == 0:
            break
        if buf[offset + TYPE_OFFSET] == TYPE_DATA:
            if count == limit:
                break
            count += 1
        offset += align(frame_length)
    return offset, count
