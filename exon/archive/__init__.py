"""The exon Archive: record exon streams durably and replay them by position.

* :class:`Archive` -- an archive directory read (or, for the service, owned) in-process;
* :class:`ArchiveClient` -- the archive service over exon sockets;
* :class:`Record` -- ``(position, payload, producer, timestamp)``;
* errors under :class:`ArchiveError` (an :class:`exon.ExonError`).

The on-disk format and the control protocol are specified in ``docs/protocol.md``
(section 3). Importing this package does not start anything.
"""

from __future__ import annotations

from typing import Any

from exon.archive.archive import Archive, RecordingInfo
from exon.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveFull,
    ArchiveLocked,
    ControlError,
    RecordingNotFound,
    ReplayRangeError,
)
from exon.archive.format import Record

__all__ = [
    "Archive",
    "ArchiveClient",
    "ArchiveCorrupt",
    "ArchiveError",
    "ArchiveFull",
    "ArchiveLocked",
    "ArchiveService",
    "ControlError",
    "KeyedWriter",
    "Record",
    "RecordingInfo",
    "RecordingNotFound",
    "ReplayRangeError",
]

_LAZY = {
    "ArchiveClient": "exon.archive.client",
    "KeyedWriter": "exon.archive.client",
    "ArchiveService": "exon.archive.service",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'exon.archive' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
