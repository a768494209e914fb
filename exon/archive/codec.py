"""Batch decoding of records: the native decoder when it is built, else the reference.

``decode(buf, offset, end, base, limit, verify, path, producers) -> (records, offset)``
has the contract of :func:`exon.archive.format.decode_records`.
"""

from __future__ import annotations

from typing import Any

from exon.archive.format import Record, decode_records

try:  # the native twin (exon/native/fast/exon_archive.c)
    from exon.native import _archive as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a build without the C extension
    _native = None

NATIVE = _native is not None


def _decode_py(buf: Any, offset: int, end: int, base: int, limit: int, verify: bool,
               path: str, producers: dict[bytes, str]) -> tuple[list[Record], int]:
    return decode_records(buf, offset, end, base, limit=limit, verify=verify, path=path,
                          producers=producers)


decode = _decode_py
