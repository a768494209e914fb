"""The catalog: one entry per recording, in ``DIR/catalog.json``.

The file is a JSON object ``{"version": 1, "next_id": N, "recordings": [ENTRY, ...]}``;
an ENTRY holds ``id``, ``name``, ``segment_length``, ``start_position`` (the first position
still on disk, moved by truncation), ``created_ns``, ``ingest_tag`` (or null),
``consumers`` (name -> committed position) and ``keyed`` (whether keyed ingest ever wrote
to it). The stop position is not stored: it is where the segment files' valid records end
(recovery finds it). Every change rewrites the file whole: write a temporary file, fsync
it, rename it over the old one, fsync the directory, so a crash leaves the old or the new
catalog, never a mix.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from exon.archive.errors import ArchiveCorrupt, RecordingNotFound

CATALOG_FILE = "catalog.json"
CATALOG_VERSION = 1
#: recording names: what a URL path segment and a file system allow without quoting
NAME_MAX = 128


@dataclass
class CatalogEntry:
    id: int
    name: str
    segment_length: int
    start_position: int = 0
    created_ns: int = field(default_factory=time.time_ns)
    ingest_tag: int | None = None
    consumers: dict[str, int] = field(default_factory=dict)
    keyed: bool = False
    #: keyed ingest's high-water marks as of the last truncation, ``[query, partition,
    #: batch, seq]`` each: the dedup state of the records truncation deleted
    dedup: list[list[Any]] = field(default_factory=list)


def check_name(name: str) -> str:
    if (not isinstance(name, str) or not name or len(name) > NAME_MAX
            or not all(c.isalnum() or c in "-_." for c in name)):
        raise ValueError(f"recording name {name!r}: want 1..{NAME_MAX} letters, digits, '-_.'")
    return name


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Catalog:
    """The recordings of one archive directory (not thread-safe: the owner locks)."""

    def __init__(self, directory: str, *, entries: list[CatalogEntry] | None = None,
                 next_id: int = 1, epoch: int = 1,
                 epochs: list[list[Any]] | None = None) -> None:
        self.directory = directory
        self.path = os.path.join(directory, CATALOG_FILE)
        self.entries: dict[int, CatalogEntry] = {e.id: e for e in entries or []}
        self.next_id = next_id
        #: the replication epoch this archive last served or followed (docs/protocol.md
        #: 3.7): every promotion begins a new one
        self.epoch = epoch
        #: ``[[epoch, {recording id: its stop when the epoch began}], ...]``, ascending:
        #: where a stale member cuts its tail
        self.epochs: list[list[Any]] = list(epochs or [])

    @classmethod
    def load(cls, directory: str) -> Catalog:
        """The catalog of ``directory`` (an empty one if it has none yet)."""
        path = os.path.join(directory, CATALOG_FILE)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return cls(directory)
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise ArchiveCorrupt(f"catalog is a JSON {type(doc).__name__}, not an object",
                                     path=path, offset=0)
            if doc.get("version") != CATALOG_VERSION:
                raise ArchiveCorrupt(f"catalog version {doc.get('version')!r}, want "
                                     f"{CATALOG_VERSION}", path=path, offset=0)
            if not isinstance(doc["recordings"], list) or not all(
                    isinstance(e, dict) for e in doc["recordings"]):
                raise ArchiveCorrupt("catalog recordings are not a list of objects",
                                     path=path, offset=0)
            entries = [CatalogEntry(**e) for e in doc["recordings"]]
            epochs = doc.get("epochs", [])
            if not isinstance(epochs, list) or not all(
                    isinstance(e, list) and len(e) == 2 and isinstance(e[1], dict)
                    for e in epochs):
                raise ArchiveCorrupt("catalog epochs are not a list of [epoch, {id: position}]",
                                     path=path, offset=0)
            return cls(directory, entries=entries, next_id=int(doc["next_id"]),
                       epoch=int(doc.get("epoch", 1)),
                       epochs=[[int(e), {str(k): int(v) for k, v in s.items()}]
                               for e, s in epochs])
        except ArchiveCorrupt:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise ArchiveCorrupt(f"catalog does not decode ({exc})", path=path,
                                 offset=0) from None

    def save(self) -> None:
        doc: dict[str, Any] = {
            "version": CATALOG_VERSION,
            "next_id": self.next_id,
            "epoch": self.epoch,
            "epochs": self.epochs,
            "recordings": [asdict(e) for e in sorted(self.entries.values(), key=lambda e: e.id)],
        }
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.directory)

    def find(self, recording: str | int) -> CatalogEntry:
        """By name, or by id (an int, or a string of digits that names no recording)."""
        if isinstance(recording, str):
            for e in self.entries.values():
                if e.name == recording:
                    return e
            if recording.isdigit() and int(recording) in self.entries:
                return self.entries[int(recording)]
        elif isinstance(recording, int) and recording in self.entries:
            return self.entries[recording]
        raise RecordingNotFound(recording)

    def put(self, entry: CatalogEntry) -> None:
        """Keep ``entry`` under its own id (a replica copying its primary's), and save."""
        self.entries[entry.id] = entry
        self.next_id = max(self.next_id, entry.id + 1)
        self.save()

    def add(self, name: str, segment_length: int, ingest_tag: int | None = None) -> CatalogEntry:
        check_name(name)
        for e in self.entries.values():
            if e.name == name:
                raise ValueError(f"recording {name!r} exists")
        entry = CatalogEntry(id=self.next_id, name=name, segment_length=segment_length,
                             ingest_tag=ingest_tag)
        self.entries[entry.id] = entry
        self.next_id += 1
        self.save()
        return entry
