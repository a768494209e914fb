"""The replica's side of replication: a thread that follows a primary archive service
(docs/protocol.md 3.7).

It asks the primary's control socket for a replication stream from the positions it holds
(``replicate``), cuts the tail the primary names when it is a stale former primary, then
appends what comes byte for byte at the same positions, makes it durable under its own
fsync policy, and acknowledges the durable positions back on the primary's ack PULL. When
the stream stops (the primary died, a gap, a refusal) it says why (an event) and asks
again, from where it is, every ``RETRY`` seconds; a refusal that asking again cannot mend
(the primary is itself, or holds other recordings) stops it in a state that says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import exon
from exon import errors
from exon.archive import replication_wire as wire
from exon.archive.archive import Archive
from exon.archive.errors import ArchiveError, ControlError
from exon.archive.recording import RecordingWriter

log = logging.getLogger("exon.archive")

#: seconds between attempts to (re)start replication
RETRY = 0.5
#: seconds without any message from the primary (it heartbeats every 0.5 s) before the
#: replica gives the stream up and asks again
STREAM_TIMEOUT = 3.0
#: credits of the stream PULL: the primary is never more than this many chunks ahead
STREAM_CREDITS = 64
#: messages drained per sync and acknowledgement
DRAIN = 64


class ReplicaFollower:
    """Follows ``primary`` into ``archive``; :meth:`run` until ``stop`` is set.

    ``state`` says where it is: "connecting", "catching up", "following", or
    "refused: WHY" (it stopped asking). ``primary_stops`` holds the primary's stop positions
    from its last heartbeat (for the lag), ``event(text)`` reports what went wrong."""

    def __init__(self, archive: Archive, node: exon.Node, *, primary: str, member: str,
                 instance: str, event: Callable[[str], None],
                 on_epoch: Callable[[int], None] | None = None, policy: Any = None) -> None:
        self.archive = archive
        #: the link policy of the replica's sockets (its service's)
        self.policy = policy
        self.node = node
        self.primary = primary
        self.member = member
        self.instance = instance
        self.event = event
        self.on_epoch = on_epoch
        self.state = "connecting"
        self.primary_stops: dict[int, int] = {}
        self.stop = threading.Event()
        self.sessions = 0

    def lag(self) -> int:
        """Bytes behind the primary's last heartbeat (the largest over the recordings)."""
        lag = 0
        for rid, stop in dict(self.primary_stops).items():
            try:
                lag = max(lag, stop - self.archive.stop_position(rid))
            except ArchiveError:
                lag = max(lag, stop)
        return lag

    def run(self, service_stopping: threading.Event) -> None:
        last_problem = ""
        while not self.stop.is_set() and not service_stopping.is_set():
            try:
                self._follow(service_stopping)
                problem = ""
            except _Refused as exc:
                self.state = f"refused: {exc}"
                self.event(f"replica of {self.primary} stopped: {exc}")
                return
            except (errors.ExonError, OSError, ValueError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                if problem != last_problem:
                    self.event(f"replication from {self.primary}: {problem} (asking again "
                               f"every {RETRY} s)")
                self.state = "connecting"
            last_problem = problem
            if self.stop.wait(RETRY):
                return

    def _follow(self, stopping: threading.Event) -> None:
        from exon.archive.client import ArchiveClient

        ar = self.archive
        pull = self.node.socket("pull", credits=STREAM_CREDITS,
                                max_message_size=wire.STREAM_HEADER.size + 5 * (1 << 20),
                                policy=self.policy)
        client = ArchiveClient(self.primary, node=self.node, timeout=5.0, policy=self.policy)
        ack = None
        try:
            positions = {str(e.id): ar.stop_position(e.id) for e in ar.recordings()}
            try:
                reply = client._request(
                    "replicate", member=self.member, instance=self.instance,
                    epoch=ar.catalog.epoch, reply_to=f"{self.node.address}/{pull.tag}",
                    positions=positions)
            except ControlError as exc:
                raise _Refused(str(exc)) from None
            except ArchiveError as exc:
                if "split brain" in str(exc) or "wrong primary" in str(exc):
                    raise _Refused(str(exc)) from None
                raise
            session = wire.doc_session(reply)
            for rid, position in wire.positions_map(reply.get("cut", {}), "cut").items():
                before = ar.stop_position(rid)
                ar.cut(rid, position)
                self.event(f"recording {rid}: cut the tail [{position}, {before}) that the "
                           f"primary {self.primary} of epoch {reply.get('epoch')} does not "
                           f"hold (written in an older epoch, never confirmed)")
            self._take_epoch(reply)
            ack = self.node.socket("push", max_message_size=wire.MAX_ACK_LENGTH,
                                   policy=self.policy)
            ack.link(str(reply["ack_to"]), timeout=5.0)
            self.sessions += 1
            self.state = "catching up"
            self._stream(pull, ack, session, stopping)
        finally:
            pull.close(timeout=0)
            if ack is not None:
                ack.close(timeout=0)
            try:
                client._req and client._req.close(timeout=0)
            except errors.ExonError:
                pass

    def _take_epoch(self, doc: dict[str, Any]) -> None:
        epoch = doc.get("epoch")
        epochs = doc.get("epochs")
        cat = self.archive.catalog
        if not isinstance(epoch, int) or not isinstance(epochs, list):
            raise ControlError("a primary's answer without its epoch")
        if (epoch, epochs) != (cat.epoch, cat.epochs):
            with self.archive._lock:
                cat.epoch = epoch
                cat.epochs = [[int(e), {str(k): int(v) for k, v in s.items()}]
                              for e, s in epochs]
                cat.save()
            if self.on_epoch is not None:
                self.on_epoch(epoch)

    def _stream(self, pull: Any, ack: Any, session: int, stopping: threading.Event) -> None:
        ar = self.archive
        quiet_since = time.monotonic()
        while not self.stop.is_set() and not stopping.is_set():
            try:
                batch = pull.receive_many(DRAIN, timeout=0.2)
            except errors.Timeout:
                if time.monotonic() - quiet_since > STREAM_TIMEOUT:
                    raise errors.Timeout(f"nothing from the primary {self.primary} for "
                                         f"{STREAM_TIMEOUT} s") from None
                continue
            quiet_since = time.monotonic()
            touched: dict[int, RecordingWriter] = {}
            heartbeat = False
            for msg in batch:
                m = wire.decode_stream(msg.payload)
                if m.session != session:
                    continue  # a late message of an earlier session
                if m.kind == wire.RECORDS:
                    writer = touched.get(m.recording_id) or ar.writer(m.recording_id)
                    writer.append_raw(m.position, m.body, sync=False,
                                      keyed=bool(m.flags & wire.FLAG_KEYED))
                    touched[m.recording_id] = writer
                elif m.kind == wire.CATALOG:
                    self._catalog(m.body, touched)
                elif m.kind == wire.HEARTBEAT:
                    heartbeat = True
                    stops = wire.positions_map(m.body.get("stops", {}), "stops")
                    self.primary_stops = stops
                    if all(
                            ar.stop_position(rid) >= stop for rid, stop in stops.items()):
                        self.state = "following"
                    else:
                        self.state = "catching up"
                else:
                    from exon.archive.protocol import error_from

                    raise error_from(m.body)
            for rid, writer in touched.items():
                writer.sync()
                if writer.dedup and not writer.entry.keyed:
                    ar.mark_keyed(rid)  # recovery then rebuilds its marks from every segment
            if touched or heartbeat:
                positions = {e.id: ar.stop_position(e.id) for e in ar.recordings()}
                ack.send(wire.encode_ack(session, positions), timeout=STREAM_TIMEOUT)

    def _catalog(self, body: dict[str, Any], touched: dict[int, RecordingWriter]) -> None:
        ar = self.archive
        recordings = body.get("recordings")
        if not isinstance(recordings, list) or not all(isinstance(r, dict)
                                                       for r in recordings):
            raise ControlError("a replication CATALOG without its recordings")
        for writer in touched.values():
            writer.sync()  # what came before a truncation is durable first
        touched.clear()
        for doc in recordings:
            try:
                ar.adopt(doc)
            except ArchiveError as exc:
                if "wrong primary" in str(exc):
                    raise _Refused(str(exc)) from None
                raise
        self._take_epoch(body)


class _Refused(ArchiveError):
    """A refusal that asking again does not mend."""
