"""The primary's side of one replication session: a thread that streams a replica every
recording from the positions it holds, raw records exactly as on disk, then follows them
live (docs/protocol.md 3.7). The replica's acknowledgements come back on the primary's ack
PULL, which the service reads (:class:`~exon.archive.replication.InSyncSet`).

A session sends, in order on one PUSH (credit flow bounds it: the primary never runs more
than the replica's credits ahead):

* CATALOG whenever the catalog changed (a recording added, a consumer's commit, a
  truncation, new dedup marks), and first of all;
* RECORDS chunks of at most ``REPLAY_CHUNK`` bytes (or one larger record) per recording,
  while the replica is behind;
* HEARTBEAT with the primary's stop positions every ``HEARTBEAT_INTERVAL`` (the replica
  acknowledges it: that is how a replica that is caught up stays in sync, and how it
  knows its lag).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import exon
from exon import errors
from exon.archive import replication_wire as wire
from exon.archive.archive import Archive
from exon.archive.segments import RecordingFiles

log = logging.getLogger("exon.archive")

#: seconds between heartbeats of an idle session
HEARTBEAT_INTERVAL = 0.5
#: record bytes per RECORDS message (one unfragmented transport message: see REPLAY_CHUNK)
CHUNK = 63 * 1024
#: seconds a session waits for news before it looks again
WAIT = 0.05


class ReplicationSession:
    """``ReplicationSession(archive, session, member, push, positions, changed, stop)``:
    :meth:`run` streams until ``stop`` is set, the service stops, or the replica goes."""

    def __init__(self, archive: Archive, *, session: int, member: str, push: Any,
                 positions: dict[int, int], changed: threading.Condition,
                 catalog_version: Callable[[], int], epoch: Callable[[], int]) -> None:
        self.archive = archive
        self.session = session
        self.member = member
        self.push = push
        self.positions = dict(positions)
        self.changed = changed
        self.catalog_version = catalog_version
        self.epoch = epoch
        self.stop = threading.Event()
        self._files: dict[int, RecordingFiles] = {}

    def run(self, service_stopping: threading.Event) -> None:
        sent_version = -1
        last_beat = 0.0
        try:
            while not self.stop.is_set() and not service_stopping.is_set():
                version = self.catalog_version()
                if version != sent_version:
                    sent_version = version
                    self._send(wire.encode_body(wire.CATALOG, self.session,
                                                self._catalog()), service_stopping)
                if time.monotonic() - last_beat >= HEARTBEAT_INTERVAL:
                    # also while records flow: the replica learns how far behind it is
                    self._send(wire.encode_body(wire.HEARTBEAT, self.session,
                                                {"stops": self._stops(),
                                                 "epoch": self.epoch()}), service_stopping)
                    last_beat = time.monotonic()
                if self._send_records(service_stopping):
                    continue
                with self.changed:
                    self.changed.wait(WAIT)
        except errors.BrokenLink:
            log.info("replication session %d to %s: the replica went", self.session,
                     self.member)
        except errors.ClosedError:
            pass  # stopped: a newer session of the member, or the service closing
        except (errors.ExonError, OSError) as exc:
            log.warning("replication session %d to %s ended: %s", self.session, self.member,
                        exc)
            self._tell(exc)
        finally:
            for f in self._files.values():
                f.close()
            self._files.clear()

    def _catalog(self) -> dict[str, Any]:
        ar = self.archive
        entries = []
        with ar._lock:
            for entry in sorted(ar.catalog.entries.values(), key=lambda e: e.id):
                doc = asdict(entry)
                writer = ar._writers.get(entry.id)
                if writer is not None and entry.keyed:
                    doc["dedup"] = writer.dedup_marks()
                entries.append(doc)
            epochs = [list(e) for e in ar.catalog.epochs]
        return {"epoch": self.epoch(), "epochs": epochs, "recordings": entries}

    def _stops(self) -> dict[int, int]:
        return {e.id: self.archive.stop_position(e.id)
                for e in list(self.archive.catalog.entries.values())}

    def _send_records(self, stopping: threading.Event) -> bool:
        """One chunk for each recording the replica is behind in; False when it is not."""
        sent = False
        for entry in list(self.archive.catalog.entries.values()):
            stop = self.archive.stop_position(entry.id)
            position = max(self.positions.get(entry.id, 0), entry.start_position)
            if position >= stop:
                continue
            files = self._files.get(entry.id)
            if files is None or files.entry is not entry:
                files = self._files[entry.id] = self.archive.files(entry.id)
            data, first, end = files.raw(position, stop, CHUNK)
            # read after the records: a recording is marked keyed before its first keyed
            # append, so keyed records read are never sent unflagged
            keyed = entry.keyed
            self._send(wire.encode_records(self.session, entry.id, first, data, keyed=keyed),
                       stopping)
            self.positions[entry.id] = end
            sent = True
        return sent

    def _send(self, data: bytes, stopping: threading.Event) -> None:
        """Send, waiting for the replica's credit in slices so that a stop is seen."""
        while True:
            try:
                self.push.send(data, timeout=0.2)
                return
            except errors.Timeout:
                if self.stop.is_set() or stopping.is_set():
                    raise errors.ClosedError("replication session stopped") from None

    def _tell(self, exc: BaseException) -> None:
        from exon.archive.protocol import error_fields

        try:
            self.push.send(wire.encode_body(wire.ERROR, self.session, error_fields(exc)),
                           timeout=0.5)
        except errors.ExonError:
            pass


def open_push(node: exon.Node, reply_to: str, timeout: float, policy: Any = None) -> Any:
    """The session's PUSH (under the service's link ``policy``), linked to the replica's
    stream PULL."""
    push = node.socket("push", max_message_size=CHUNK + 4 * (1 << 20), policy=policy)
    try:
        push.link(reply_to, timeout=timeout)
    except BaseException:
        push.close(timeout=0)
        raise
    return push
