"""Batch record codec: the native one (``exon.native._archive``) when it is built, else
the pure-Python reference of :mod:`exon.archive.format` (a parity test runs both).

``decode(buf, offset, end, base, limit, verify, path, producers) -> (records, offset)``
has the contract of :func:`exon.archive.format.decode_records`, ``scan`` that of
:func:`exon.archive.format.scan_records` (without keys); ``encode_span`` and
``encode_buffer`` (a PULL's held batch: its payloads as one buffer cut by u64 offsets,
their senders run by run; ``encode_runs_py``, its reference, takes the payloads as a list)
frame as many records of a batch as fit in ``room`` bytes (the rest of a
segment); ``walk`` that
of :func:`exon.archive.format.walk_headers` (record boundaries for partitioned replay:
``advance``, ``boundaries`` and each replay chunk walk every record of their range).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from crc32c import crc32c

from exon.archive.errors import ArchiveCorrupt
from exon.archive.format import (
    Record,
    decode_records,
    encode_record,
    record_length,
    scan_records,
    walk_headers,
)

try:
    import exon.native._archive as _native
except ImportError:  # pragma: no cover - a build without the C extension
    _native = None

NATIVE = _native is not None


def _bind_crc_routine() -> bool:
    """Let the native codec call the crc32c package's own hardware routine directly (no
    Python call per record). The routine is looked up by name in the package's extension
    and used only after it agrees with ``crc32c.crc32c`` on test vectors; otherwise (another
    package version, no hardware support) every checksum goes through ``crc32c.crc32c``."""
    if _native is None:
        return False
    try:
        import ctypes
        import random

        import crc32c as package

        if not getattr(package, "hardware_based", False):
            return False
        library = ctypes.CDLL(package._crc32c.__file__)
        routine = library._crc32c_hw_adler
        address = ctypes.cast(routine, ctypes.c_void_p).value or 0
        _native.bind_checksum(crc32c, address)
        rng = random.Random(7)
        for n in (0, 1, 3, 8, 31, 64, 100, 1000, 4097):
            data = rng.randbytes(n)
            if _native.checksum(crc32c, data) != crc32c(data):
                raise ValueError("the routine disagrees with crc32c.crc32c")
        return True
    except (AttributeError, OSError, ValueError, TypeError):
        _native.bind_checksum(crc32c, 0)
        return False


#: whether checksums are computed by a direct native call (else one Python call each)
DIRECT_CRC = _bind_crc_routine()


def decode_py(buf: Any, offset: int, end: int, base: int, limit: int, verify: bool,
              path: str, producers: dict[bytes, str]) -> tuple[list[Record], int]:
    if offset < 0:
        raise ValueError("decode: offset is negative")
    return decode_records(buf, offset, end, base, limit=limit, verify=verify, path=path,
                          producers=producers)


def decode_native(buf: Any, offset: int, end: int, base: int, limit: int, verify: bool,
                  path: str, producers: dict[bytes, str]) -> tuple[list[Record], int]:
    records, offset, problem = _native.decode(buf, offset, end, base, limit,
                                              crc32c if verify else None, producers, Record)
    if problem is not None:
        raise ArchiveCorrupt(problem, path=path, offset=offset)
    return records, offset


def encode_span_py(out: bytearray, offset: int, position: int, payloads: Sequence[bytes],
                   producers: Sequence[bytes], timestamp: int, keys: Sequence[bytes] | None,
                   first: int, room: int) -> tuple[int, int]:
    if offset < 0 or first < 0:
        raise ValueError("encode: offset or first is negative")
    used = 0
    i = first
    for i in range(first, len(payloads)):
        key = keys[i] if keys is not None else b""
        size = record_length(len(payloads[i]), len(key) + len(producers[i]))
        if used + size > room:
            return i - first, offset
        encode_record(out, offset, position + used, payloads[i], producers[i], timestamp, key)
        offset += size
        used += size
    return len(payloads) - first, offset


def encode_span_native(out: bytearray, offset: int, position: int, payloads: Sequence[bytes],
                       producers: Sequence[bytes], timestamp: int,
                       keys: Sequence[bytes] | None, first: int, room: int) -> tuple[int, int]:
    return _native.encode(out, offset, position, list(payloads), list(producers), timestamp,  # type: ignore[no-any-return]
                          None if keys is None else list(keys), first, room, crc32c)


def encode_runs_py(out: bytearray, offset: int, position: int, payloads: list[bytes],
                   runs: list[tuple[Any, int]], producer_of: Any, timestamp: int, first: int,
                   room: int) -> tuple[int, int]:
    if not 0 <= first <= len(payloads):
        raise ValueError("encode_buffer: first is outside the payloads")
    if offset < 0:
        raise ValueError("encode_buffer: offset is negative")
    producers: list[bytes] = []
    for peer, count in runs:
        if count < 0 or len(producers) + count > len(payloads):
            raise ValueError("encode_buffer: the run counts exceed the payloads")
        producers += [producer_of(peer)] * count
    if len(producers) != len(payloads):
        raise ValueError("encode_buffer: the run counts fall short of the payloads")
    return encode_span_py(out, offset, position, payloads, producers, timestamp, None, first,
                          room)


def encode_buffer_py(out: bytearray, offset: int, position: int, buffer: Any, offsets: Any,
                     runs: list[tuple[Any, int]], producer_of: Any, timestamp: int, first: int,
                     room: int) -> tuple[int, int]:
    ends = list(offsets)
    if not ends:
        raise ValueError("encode_buffer: offsets hold len(batch) + 1 u64")
    data = bytes(buffer)
    for a, b in itertools.pairwise(ends):
        if a > b or b > len(data):
            raise ValueError("encode_buffer: offsets out of order or past the buffer")
    payloads = [data[a:b] for a, b in itertools.pairwise(ends)]
    return encode_runs_py(out, offset, position, payloads, runs, producer_of, timestamp, first,
                          room)


def encode_buffer_native(out: bytearray, offset: int, position: int, buffer: Any, offsets: Any,
                         runs: list[tuple[Any, int]], producer_of: Any, timestamp: int,
                         first: int, room: int) -> tuple[int, int]:
    return _native.encode_buffer(out, offset, position, buffer, offsets, runs,  # type: ignore[no-any-return]
                                 producer_of, timestamp, first, room, crc32c)


def scan_py(buf: Any, offset: int, end: int, base: int, *,
            checksum: bool = True) -> tuple[int, int]:
    if offset < 0:
        raise ValueError("scan: offset is negative")
    if not checksum:
        return walk_headers(buf, offset, end, 1 << 62)
    return scan_records(buf, offset, end, base)


def scan_native(buf: Any, offset: int, end: int, base: int, *,
                checksum: bool = True) -> tuple[int, int]:
    return _native.scan(buf, offset, end, base, crc32c if checksum else None)  # type: ignore[no-any-return]


def walk_native(buf: Any, offset: int, end: int, limit: int) -> tuple[int, int]:
    return _native.walk(buf, offset, end, limit)  # type: ignore[no-any-return]


decode = decode_native if NATIVE else decode_py
scan = scan_native if NATIVE else scan_py
# a build of the extension from before walk() (an in-place build not yet redone) walks in
# Python rather than failing at the first replay
walk = walk_native if NATIVE and hasattr(_native, "walk") else walk_headers
encode_span = encode_span_native if NATIVE else encode_span_py
# a build of the extension from before encode_buffer() frames held batches in Python
encode_buffer = (encode_buffer_native if NATIVE and hasattr(_native, "encode_buffer")
                 else encode_buffer_py)
