"""The archive service: one exon Node hosting the control REP, the ingest PULLs and the
replay PUSHes over an :class:`~exon.archive.Archive` it owns.

Threads: one control thread (answers requests one at a time), one recorder per ingest
socket (takes held batches, appends them, makes them durable, then confirms them: the
producers' cookies come back only then), one per running replay (reads segments and
pushes whole records, as long as the client's credit allows). A recorder whose disk
refuses stops: the recording is marked failed, its ingest socket closes (producers get
``CookieLost`` for every unconfirmed message), and the service goes on serving the rest.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import msgpack

import exon
from exon import errors
from exon.archive import protocol
from exon.archive import replication_wire as wire
from exon.archive.archive import DEFAULT_SEGMENT_LENGTH, Archive
from exon.archive.errors import ArchiveError, ControlError, RecordingNotFound
from exon.archive.format import HEADER_LENGTH, KEY
from exon.archive.metrics import REFRESH, RecordingMetrics
from exon.archive.protocol import (
    CONTROL_TAG,
    KEEPALIVE_INTERVAL,
    KEYED_TAG,
    REPLAY_CHUNK,
)
from exon.archive.recording import FsyncPolicy
from exon.archive.replica import ReplicaFollower
from exon.archive.replication import (
    DEFAULT_MAX_LAG,
    DEFAULT_REPLICA_TIMEOUT,
    InSyncSet,
    MemberJoined,
    cut_positions,
    epoch_starts,
)
from exon.archive.replication_sender import ReplicationSession, open_push
from exon.core.policy import LinkPolicy
from exon.sockets.pull import PullSocket

log = logging.getLogger("exon.archive")

#: longest producer identity recorded ("[v6 host]:port/tag")
MAX_PRODUCER = 96
MAX_QUERY = protocol.MAX_QUERY  # the longest query id of a keyed message
MAX_REPLAYS = 64
BATCH = 1024  # messages a recorder takes at most per write (a quarter of the credits)
#: payload bytes a recorder aims to take per write: its batch and the records framed from it
#: stay in the CPU's caches. Measured at 1 KiB (exon bench archive, 21 rounds each): 512 KiB
#: recorded about 10% faster than 256 KiB (median 2.14 against 1.95 M msgs/s; fewer
#: batches, so less Python per message), 1 MiB no faster than 256 KiB
BATCH_BYTES = 512 * 1024
INGEST_CREDITS = 4096  # per producer link: the recorder holds a batch while the producers go on
#: a new producer link's first window while the budget is crowded (the recorders take at
#: once, so a busy link grows to its share at its first FLOW): idle producers' first windows
#: stay reserved (credit is never taken back), and with the node's rule four idle ones left
#: a fifth 1 credit (exon.core.budget)
INGEST_START_CREDITS = 64
#: the largest message an ingest socket takes by default: under the default memory budget
#: (1 GiB) a producer's link then gets all of INGEST_CREDITS (a window is budget / max size)
DEFAULT_INGEST_MESSAGE = 256 * 1024
POLL = 0.2  # seconds a service thread waits before looking at its stop flag
#: seconds the control thread waits for its requester's credit before giving the request up
CONTROL_SEND_TIMEOUT = 5.0
#: seconds a position_at request waits for a time index being built before answering
#: IndexBuilding (the control thread serves every client: it must not stall on one)
INDEX_WAIT = 1.0
#: seconds a replay waits for its reader's credit to send why it stopped (REPLAY_ERROR)
STOP_NOTICE_TIMEOUT = 0.5
#: events kept (the newest), characters kept of each, and the UTF-8 bytes of them that an
#: ``info`` answer carries at most (the newest that fit): the events never make an answer
#: too large for a control reply (protocol.MAX_REPLY_LENGTH)
MAX_EVENTS = 256
MAX_EVENT_TEXT = 1024
INFO_EVENTS_BYTES = 16 * 1024
#: seconds between a recorder's looks at its links' windows (ArchiveService.batch_limit):
#: a new link's window doubles at its first FLOW, and a 64 B recording of 500,000 messages
#: is over in about 70 ms (looking every 50 ms, it ran on the half window's batches)
LIMIT_REFRESH = 0.005


def take_size(limit: int, messages: int, payload_bytes: int) -> int:
    """Messages a recorder takes next, after a batch of ``messages`` holding
    ``payload_bytes``: its batch ``limit``, or fewer when they are large (BATCH_BYTES over
    their mean payload), at least a sixteenth of the limit."""
    return max(1, limit // 16, min(limit, BATCH_BYTES * messages // max(1, payload_bytes)))


def _held_batch_limit(sock: PullSocket, upper: int) -> int:
    """A quarter of the largest receive window of ``sock``'s links, at most ``upper``
    (``upper`` when nothing is linked), at least 1. The largest: a link with a smaller one
    is new or idle (its first window, INGEST_START_CREDITS) and grows to its share at its
    first FLOW; by the smallest, idle producers cut a busy one's batches to 16 messages."""
    windows = sock.windows()
    if not windows:
        return upper
    return max(1, min(upper, max(windows.values()) // 4))


class _RefreshedLimit:
    """A held-batch limit read again from ``read`` at most every LIMIT_REFRESH seconds
    (a recorder's and the keyed ingest's: see ArchiveService.batch_limit)."""

    __slots__ = ("_at", "_read", "_value")

    def __init__(self, read: Callable[[], int]) -> None:
        self._read = read
        self._value = read()
        self._at = time.monotonic()

    def __call__(self) -> int:
        now = time.monotonic()
        if now - self._at >= LIMIT_REFRESH:
            self._value, self._at = self._read(), now
        return self._value


def _fits(segment_length: int, key_length: int) -> int:
    """The largest message a segment of ``segment_length`` holds (and at most 1 MiB)."""
    return min(1 << 20, segment_length - HEADER_LENGTH - MAX_PRODUCER - key_length)


class ArchiveService:
    """``ArchiveService(dir, endpoint=..., ingest={"orders": 10}, fsync="none")``;
    :meth:`start` brings it up, :meth:`close` stops it (``with`` does both)."""

    def __init__(self, directory: str, *, endpoint: str = "127.0.0.1:0",
                 ingest: dict[str, int] | None = None, fsync: FsyncPolicy = "none",
                 segment_length: int = DEFAULT_SEGMENT_LENGTH, keyed_tag: int = KEYED_TAG,
                 max_message_size: int | None = None, node: exon.Node | None = None,
                 replica_of: str | None = None, min_insync: int = 1,
                 max_lag: int = DEFAULT_MAX_LAG,
                 replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
                 policy: LinkPolicy | None = None) -> None:
        ingest = dict(ingest or {})
        #: the link policy of every socket of the service (control, ingest, keyed, replay,
        #: replication): e.g. ``exon.EncryptedPolicy(keys, trusted=[...])`` for encrypted
        #: links
        self.policy = policy
        if replica_of is not None and ingest:
            raise exon.ConfigurationError(
                "--ingest with --replica-of: a replica takes its recordings (and their "
                "ingest tags) from its primary")
        #: "primary" (takes writes), "replica" (follows replica_of; refuses writes)
        self.role = "primary" if replica_of is None else "replica"
        self.primary = replica_of
        #: who this process is (a replica pointed at its own service is told so)
        self.instance = secrets.token_hex(8)
        self.insync = InSyncSet(min_insync=min_insync, max_lag=max_lag,
                                timeout=replica_timeout)
        #: guards the replication state below; notified on every append and ack
        self._repl = threading.Condition()
        #: socket -> its held batches appended but not yet confirmed: (batch, {recording id:
        #: the position that must be confirmed}), oldest first
        self._pending: dict[Any, deque[tuple[Any, dict[int, int]]]] = {}
        self._sessions: dict[str, ReplicationSession] = {}
        self._session_members: dict[int, str] = {}
        self._session_ids = itertools.count(1)
        self._catalog_version = 0
        self.follower: ReplicaFollower | None = None
        self._segment_length = segment_length
        self._max_message_size = max_message_size
        tags = list(ingest.values())
        reserved = {CONTROL_TAG: "control", keyed_tag: "keyed ingest"}
        for name, tag in ingest.items():
            if tag in reserved:
                raise exon.ConfigurationError(
                    f"--ingest {name}={tag}: tag {tag} is the archive's {reserved[tag]} socket")
        if len(set(tags)) != len(tags):
            raise exon.ConfigurationError("two --ingest recordings share a tag")
        self.archive = Archive(directory, owner=True, fsync=fsync, owner_note=endpoint)
        self._own_node = node is None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._replays: dict[int, threading.Event] = {}
        self._replay_recordings: dict[int, int] = {}  # replay id -> recording id
        self._replay_ids = itertools.count(1)
        self._lock = threading.Lock()
        #: what went wrong (also logged), oldest first: the last MAX_EVENTS
        self.events: deque[str] = deque(maxlen=MAX_EVENTS)
        try:
            sizes = {name: self._ingest_message_size(name, segment_length, max_message_size)
                     for name in ingest}  # checked before anything is created
            for name, tag in ingest.items():
                self.archive.create_recording(name, segment_length=segment_length,
                                              ingest_tag=tag)
            self.node = node if node is not None else exon.Node(endpoint=endpoint)
            self.address = self.node.address
            self.archive.note_owner(self.address)  # the bound port, not the ":0" asked for
            if replica_of is not None and replica_of in (self.address, endpoint):
                raise exon.ConfigurationError(
                    f"--replica-of {replica_of}: that is this service's own address (a "
                    f"replica follows another archive service)")
            self.control = self.node.socket("rep", tag=CONTROL_TAG,
                                            max_message_size=protocol.MAX_CONTROL_LENGTH,
                                            policy=policy)
            #: where replicas acknowledge what they hold durable (a tag of its own)
            self.acks = self.node.socket("pull", max_message_size=wire.MAX_ACK_LENGTH,
                                         policy=policy)
            self.ingest: dict[str, Any] = {}
            #: messages a recorder takes per batch with one producer linked (see batch_limit)
            self._batch_upper: dict[str, int] = {}
            self.keyed_tag = keyed_tag
            self.keyed: Any = None
            if self.role == "primary":
                self._open_writes(ingest, sizes)
        except BaseException:
            self.close()
            raise

    def _open_writes(self, ingest: dict[str, int], sizes: dict[str, int]) -> None:
        """The ingest PULLs and the keyed PULL: what takes writes (a primary's)."""
        for name, tag in ingest.items():
            self.ingest[name] = self.node.socket(
                "pull", tag=tag, credits=INGEST_CREDITS, max_message_size=sizes[name],
                start_credits=INGEST_START_CREDITS, policy=self.policy)
            self._batch_upper[name] = self._batch_limit(INGEST_CREDITS, sizes[name])
        keyed_size = (min(self._max_payload_all(), 1 << 20) + protocol.KEYED_HEADER.size
                      + MAX_QUERY)
        self.keyed = self.node.socket("pull", tag=self.keyed_tag, max_message_size=keyed_size,
                                      start_credits=INGEST_START_CREDITS, policy=self.policy)
        self._keyed_upper = self._batch_limit(
            self.node.link_settings.initial_credits, keyed_size)

    def _start_writes(self) -> None:
        for name, sock in self.ingest.items():
            self._spawn(self._record_loop, f"exon-archive-record-{name}", name, sock)
        self._spawn(self._keyed_loop, "exon-archive-keyed", self.keyed)

    def _max_payload(self, recording: str, key_length: int) -> int:
        """The largest message a recording takes (a record must fit one segment)."""
        return _fits(self.archive.entry(recording).segment_length, key_length)

    def _ingest_message_size(self, recording: str, segment_length: int,
                             wanted: int | None) -> int:
        """An ingest socket's max_message_size: ``wanted``, or DEFAULT_INGEST_MESSAGE
        (either way no more than a segment of the recording holds: its own if it exists,
        else ``segment_length``)."""
        try:
            segment_length = self.archive.entry(recording).segment_length
        except RecordingNotFound:
            pass
        fits = _fits(segment_length, 0)
        if wanted is None:
            return min(DEFAULT_INGEST_MESSAGE, fits)
        if not 1 <= wanted <= fits:
            raise exon.ConfigurationError(
                f"max_message_size {wanted}: recording {recording!r} takes 1 to {fits} bytes "
                f"(a record must fit one segment, and messages stop at 1 MiB)")
        return wanted

    def _batch_limit(self, credits: int, max_message_size: int) -> int:
        """Messages a recorder takes per batch at most: BATCH, or a quarter of the window
        one producer's link gets under the node's memory budget when that is smaller. The
        recorder holds its batch (their credit too) until it is on disk: a batch of the
        whole window would stop the producer at every batch (it waits for the confirm, then
        the recorder waits for it)."""
        window = self.node.link_settings.window_share(credits, max_message_size)
        return max(1, min(BATCH, window // 4))

    def batch_limit(self, recording: str) -> int:
        """Messages the recorder of ``recording`` takes per batch now, at most: a quarter of
        the largest window its producers' links have (the memory budget shrinks every
        window as links come: to every node link, control clients' included), and no more
        than with one producer linked. Recorders look again every LIMIT_REFRESH seconds."""
        return _held_batch_limit(self.ingest[recording], self._batch_upper[recording])

    def keyed_batch_limit(self) -> int:
        """:meth:`batch_limit` of the keyed ingest."""
        if self.keyed is None:
            raise ArchiveError(f"{self.address} is a {self.role}: no keyed ingest")
        return _held_batch_limit(self.keyed, self._keyed_upper)

    def _max_payload_all(self) -> int:
        return min((self._max_payload(r.name, KEY.size + MAX_QUERY)
                    for r in self.archive.recordings()), default=1 << 20)

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> ArchiveService:
        """Start the control, recording and keyed-ingest threads; returns ``self``."""
        self._spawn(self._control_loop, "exon-archive-control")
        self._spawn(self._ack_loop, "exon-archive-acks")
        self._spawn(self._confirm_loop, "exon-archive-confirm")
        if self.role == "primary":
            self._start_writes()
        else:
            self._follow()
        self._spawn(self._metrics_loop, "exon-archive-metrics")
        return self

    def _spawn(self, target: Any, name: str, *args: Any) -> threading.Thread:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()
        return t

    def close(self, timeout: float = 5.0) -> None:
        """Stop every thread (each joined within ``timeout``), close the node if this service
        created it, then the archive (its files and lock). Idempotent."""
        self._stop.set()
        with self._lock:
            for ev in self._replays.values():
                ev.set()
            threads = list(self._threads)
        with self._repl:
            for session in self._sessions.values():
                session.stop.set()
        if self.follower is not None:
            self.follower.stop.set()
        for t in threads:
            if t is not threading.current_thread():
                t.join(timeout)
        node = getattr(self, "node", None)
        if node is not None and self._own_node:
            node.close(timeout=min(timeout, 1.0))  # peers that vanished do not answer UNLINK
        self.archive.close()

    def __enter__(self) -> ArchiveService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait(self) -> None:
        """Block until :meth:`close` (from a signal handler or another thread)."""
        while not self._stop.wait(0.5):
            pass

    def replays_running(self) -> dict[int, int]:
        """{recording id: replays of it running now}."""
        counts: dict[int, int] = {}
        with self._lock:
            for recording_id in self._replay_recordings.values():
                counts[recording_id] = counts.get(recording_id, 0) + 1
        return counts

    def _metrics_loop(self) -> None:
        """Refresh the recordings' metrics (exon.archive.metrics) every REFRESH seconds."""
        metrics = RecordingMetrics(self.node, self.archive, self.replays_running)
        try:
            while True:
                try:
                    metrics.refresh()
                except exon.ClosedError:
                    return  # the node closed under us: the service is stopping
                except (exon.ExonError, OSError) as exc:
                    log.warning("archive metrics: %s", exc)
                if self._stop.wait(REFRESH):
                    return
        finally:
            metrics.close()

    def replication_status(self) -> dict[str, Any]:
        """``role``, ``epoch``, ``primary`` (a replica's), ``min_insync``, ``members`` (a
        primary's replicas: member, in_sync, lag, silent), the times a replica left and
        joined the in-sync set (``insync_left``, ``insync_joined``), ``state`` and ``lag``
        (a replica's)."""
        out: dict[str, Any] = {"role": self.role, "epoch": self.archive.catalog.epoch,
                               "primary": self.primary, "min_insync": self.insync.min_insync}
        with self._repl:
            out["members"] = [asdict(m) for m in self.insync.statuses(now=time.monotonic())]
            out["insync_left"] = self.insync.left_count
            out["insync_joined"] = self.insync.joined_count
        follower = self.follower
        if follower is not None:
            out["state"] = follower.state
            out["lag"] = follower.lag()
        return out

    def _event(self, text: str, *, error: bool = True) -> None:
        (log.error if error else log.info)(text)
        if len(text) > MAX_EVENT_TEXT:
            text = text[:MAX_EVENT_TEXT - 3] + "..."
        with self._lock:
            self.events.append(text)
        print(f"exon archive: {text}", file=sys.stderr, flush=True)

    def _recent_events(self) -> list[str]:
        """The newest events whose UTF-8 holds at most INFO_EVENTS_BYTES, oldest first."""
        with self._lock:
            events = list(self.events)
        kept: list[str] = []
        size = 0
        for text in reversed(events):
            size += len(text.encode()) + 5  # and msgpack's string header
            if size > INFO_EVENTS_BYTES:
                break
            kept.append(text)
        kept.reverse()
        return kept

    # ---- recording -----------------------------------------------------------------------

    def _taking(self, sock: Any, take: Any) -> Iterator[Any]:
        """What ``take()`` returns, again and again, until the service stops or ``sock``
        closes; a timeout (nothing came) or a broken producer link waits again. Any other
        error is logged (once while it lasts) and ``take`` tried again after POLL."""
        failing = ""
        while not self._stop.is_set():
            try:
                item = take()
            except (errors.Timeout, errors.BrokenLink):
                continue
            except errors.ExonError as exc:
                if self._stop.is_set() or sock.closed:
                    return
                if str(exc) != failing:
                    failing = str(exc)
                    log.error("%s: %s: %s (trying again every %s s)",
                              threading.current_thread().name, type(exc).__name__, exc, POLL)
                self._stop.wait(POLL)
                continue
            failing = ""
            yield item

    def _record_loop(self, name: str, sock: Any) -> None:
        try:
            writer = self.archive.writer(name)
        except ArchiveError as exc:  # recovery refused it (damage): producers get CookieLost
            self._event(f"recording {name!r} not recording: {exc}")
            sock.close(timeout=0)
            return
        producers: dict[int, tuple[Any, bytes]] = {}

        def producer_of(peer: Any) -> bytes:
            # keyed by identity (a link's Peer object is reused), holding the peer so that
            # its id is not reused while cached
            hit = producers.get(id(peer))
            if hit is None:
                if len(producers) > 4096:
                    producers.clear()
                hit = producers[id(peer)] = (peer, str(peer).encode()[:MAX_PRODUCER])
            return hit[1]
        upper = self._batch_upper[name]
        limit = _RefreshedLimit(lambda: _held_batch_limit(sock, upper))
        size = [limit()]

        def take() -> Any:
            return sock.receive_held(size[0], timeout=POLL)

        for batch in self._taking(sock, take):
            size[0] = take_size(limit(), len(batch), len(batch.buffer))
            try:
                stop = writer.append_buffer(batch.buffer, batch.offsets, batch.runs,
                                            producer_of, time.time_ns())
            except (OSError, ValueError) as exc:  # ArchiveFull among them
                self._event(f"recording {name!r} stopped: {exc}")
                sock.close(timeout=0)  # unconfirmed: the producers get CookieLost
                return
            self._appended(sock, batch, {writer.entry.id: stop})

    def _keyed_loop(self, sock: Any) -> None:
        limit = _RefreshedLimit(lambda: _held_batch_limit(sock, self._keyed_upper))
        for batch in self._taking(sock, lambda: sock.receive_held(limit(), timeout=POLL)):
            try:
                on_disk = self._record_keyed(batch)
            except Exception as exc:  # a bug must not stop keyed ingest for every recording
                log.exception("keyed ingest failed")
                self._event(f"keyed ingest failed: {exc!r}")
                on_disk = False
            if on_disk:
                # every recording's end now: at or past where this batch's rows lie
                self._appended(sock, batch, self._stops())
            else:
                # what is not on disk is never confirmed: the batch's links are dropped,
                # its writers see CookieLost and their batch fails (Spark retries it; what
                # did get recorded is dropped then as a duplicate)
                sock.reject(batch)

    def _stops(self) -> dict[int, int]:
        """Every recording's stop position."""
        ar = self.archive
        with ar._lock:
            ids = list(ar.catalog.entries)
        return {rid: ar.stop_position(rid) for rid in ids}

    def _record_keyed(self, batch: Any) -> bool:
        """Append a keyed batch to its recordings; False when some of it is not on disk."""
        groups: dict[int, tuple[list[bytes], list[bytes], list[bytes]]] = {}
        for msg in batch.messages:
            try:
                rid, key, payload = protocol.decode_keyed(msg[0])
            except ControlError as exc:
                self._event(f"keyed ingest from {msg[1]}: {exc} (dropped)")
                continue
            g = groups.setdefault(rid, ([], [], []))
            g[0].append(payload)
            g[1].append(str(msg[1]).encode()[:MAX_PRODUCER])
            g[2].append(key)
        on_disk = True
        for rid, (payloads, origins, keys) in groups.items():
            try:
                self.archive.mark_keyed(rid)
                writer = self.archive.writer(rid)
                gaps = writer.gaps_dropped
                writer.append(payloads, origins, time.time_ns(), keys)
                if writer.gaps_dropped != gaps:
                    # rows past a gap were not recorded: no cookie may say they were
                    self._event(f"keyed ingest into recording {rid}: "
                                f"{writer.gaps_dropped - gaps} row(s) past a gap in their "
                                f"sequence dropped; their writers retry")
                    on_disk = False
            except RecordingNotFound:
                self._event(f"keyed ingest for unknown recording id {rid} (dropped)")
            except (ArchiveError, OSError, ValueError) as exc:  # ArchiveFull, ArchiveCorrupt
                self._event(f"keyed ingest into recording {rid} failed: {exc}")
                on_disk = False
        return on_disk

    # ---- replication (docs/protocol.md 3.7) ---------------------------------------------

    def _appended(self, sock: Any, batch: Any, positions: dict[int, int]) -> None:
        """A held batch is durable here up to ``positions``: confirm it once the in-sync set
        holds it on ``min_insync`` members (at once with min-insync 1)."""
        with self._repl:
            for rid, position in positions.items():
                self.insync.local(rid, position)
            direct = self.insync.min_insync == 1 and not self._pending.get(sock)
            if not direct:
                self._pending.setdefault(sock, deque()).append((batch, positions))
            # the confirm loop and the replication sessions wait for new positions; with
            # neither anything to confirm nor a session, waking the confirm loop at every
            # batch only costs (its timer runs on its own wait timeout)
            if not direct or self._sessions or any(self._pending.values()):
                self._repl.notify_all()
        if direct:
            sock.confirm(batch)

    def _confirm_loop(self) -> None:
        """Confirm held batches as the in-sync set comes to hold them, in the order each
        socket took them; move silent replicas out of the set (events)."""
        while not self._stop.is_set():
            ready: list[tuple[Any, Any]] = []
            events = []
            with self._repl:
                self._repl.wait(0.05)
                self.insync.handle_timer(now=time.monotonic())
                while (ev := self.insync.next_event()) is not None:
                    events.append(ev)
                for sock, queue in self._pending.items():
                    while queue and all(self.insync.confirmed(rid) >= position
                                        for rid, position in queue[0][1].items()):
                        ready.append((sock, queue.popleft()[0]))
            for ev in events:
                if isinstance(ev, MemberJoined):
                    self._event(f"replica {ev.member} joined the in-sync set", error=False)
                else:
                    self._event(f"replica {ev.member} left the in-sync set ({ev.reason}, "
                                f"{ev.lag} bytes behind)")
            for sock, batch in ready:
                try:
                    sock.confirm(batch)
                except errors.ExonError as exc:  # pragma: no cover - closed under us
                    log.warning("confirm: %s", exc)

    def _ack_loop(self) -> None:
        sock = self.acks
        for batch in self._taking(sock, lambda: sock.receive_many(256, timeout=POLL)):
            now = time.monotonic()
            with self._repl:
                for msg in batch:
                    try:
                        session, positions = wire.decode_ack(msg.payload)
                    except ControlError as exc:
                        log.warning("replication ack from %s: %s (dropped)", msg.peer, exc)
                        continue
                    member = self._session_members.get(session)
                    if member is not None:
                        self.insync.ack(member, positions, now=now)
                self._repl.notify_all()

    def _follow(self) -> None:
        assert self.primary is not None
        self.follower = ReplicaFollower(
            self.archive, self.node, primary=self.primary, member=self.address,
            instance=self.instance, event=self._event, policy=self.policy)
        self._follower_thread = self._spawn(self.follower.run, "exon-archive-replica",
                                            self._stop)

    def _bump_catalog(self) -> None:
        with self._repl:
            self._catalog_version += 1
            self._repl.notify_all()

    def _replicate(self, a: dict[str, Any]) -> bytes:
        """Start a replication session for the replica asking (3.7)."""
        if a["instance"] == self.instance:
            raise ControlError("replicate: this is the replica's own service (a replica of "
                               "itself)")
        if self.role != "primary":
            raise ArchiveError(f"replicate: {self.address} is a {self.role}, not a primary"
                               + (f" (its primary is {self.primary})" if self.primary else ""))
        cat = self.archive.catalog
        epoch = a["epoch"]
        if epoch > cat.epoch:
            self._event(f"split brain: replica {a['member']} is of epoch {epoch}, this "
                        f"primary of epoch {cat.epoch}: this member refuses writes")
            self._demote(None)
            raise ArchiveError(f"split brain: {self.address} is a primary of epoch "
                               f"{cat.epoch}, older than the replica's {epoch}; it now "
                               f"refuses writes")
        positions = wire.positions_map(a["positions"], "positions")
        cuts: dict[int, int] = {}
        if epoch < cat.epoch:
            starts = epoch_starts(cat.epochs, epoch)
            if starts is not None:
                cuts = cut_positions(positions, starts)
                positions.update(cuts)
        for rid, position in positions.items():
            try:
                entry = self.archive.entry(rid)
            except RecordingNotFound:
                raise ArchiveError(f"wrong primary: the replica holds recording id {rid}, "
                                   f"which {self.address} does not") from None
            stop = self.archive.stop_position(rid)
            if position > stop:
                raise ArchiveError(f"wrong primary: the replica holds recording "
                                   f"{entry.name!r} up to {position}, past this primary's "
                                   f"end {stop} in the same epoch {cat.epoch}")
        member = a["member"]
        push = open_push(self.node, a["reply_to"], CONTROL_SEND_TIMEOUT, self.policy)
        with self._repl:
            session_id = next(self._session_ids)
            old = self._sessions.pop(member, None)
            if old is not None:
                old.stop.set()
            session = ReplicationSession(
                self.archive, session=session_id, member=member, push=push,
                positions=positions, changed=self._repl,
                catalog_version=lambda: self._catalog_version,
                epoch=lambda: self.archive.catalog.epoch)
            self._sessions[member] = session
            self._session_members[session_id] = member
            self.insync.start(member, positions, now=time.monotonic())
        self._spawn(self._run_session, f"exon-archive-replicate-{session_id}", session)
        return protocol.encode_ok(epoch=cat.epoch, epochs=cat.epochs, session=session_id,
                                 ack_to=f"{self.address}/{self.acks.tag}",
                                 cut={str(k): v for k, v in cuts.items()})

    def _run_session(self, session: ReplicationSession) -> None:
        try:
            session.run(self._stop)
        finally:
            session.push.close(timeout=0)
            with self._repl:
                self._session_members.pop(session.session, None)
                if self._sessions.get(session.member) is session:
                    del self._sessions[session.member]
                    self.insync.drop(session.member)
                self._repl.notify_all()
            with self._lock:
                self._threads.remove(threading.current_thread())

    def promote(self) -> int:
        """Make this replica the primary of a new epoch (3.7); returns the epoch."""
        with self._lock:
            if self.role == "primary":
                raise ArchiveError(f"{self.address} is the primary already (epoch "
                                   f"{self.archive.catalog.epoch})")
            follower, old_primary = self.follower, self.primary
            if follower is not None:
                follower.stop.set()
        thread = getattr(self, "_follower_thread", None)
        if thread is not None:
            thread.join(10.0)  # its last append done: the epoch begins where it stopped
            if thread.is_alive():
                raise ArchiveError("promote: the replica's follower did not stop in 10 s")
        ar = self.archive
        with ar._lock:
            cat = ar.catalog
            epoch = max([cat.epoch, *(int(e[0]) for e in cat.epochs)]) + 1
            cat.epochs.append([epoch, {str(e.id): ar.stop_position(e.id)
                                       for e in cat.entries.values()}])
            cat.epoch = epoch
            cat.save()
        self.role, self.primary, self.follower = "primary", None, None
        ingest = {e.name: e.ingest_tag for e in cat.entries.values() if e.ingest_tag is not None}
        sizes = {name: self._ingest_message_size(name, self._segment_length,
                                                 self._max_message_size) for name in ingest}
        self._open_writes(ingest, sizes)
        self._start_writes()
        self._bump_catalog()
        self._event(f"promoted to primary of epoch {epoch}", error=False)
        if old_primary is not None:  # best effort: the old primary stops taking writes
            self._spawn(self._fence_old, "exon-archive-fence", old_primary, epoch)
        return epoch

    def _fence_old(self, old: str, epoch: int) -> None:
        from exon.archive.client import ArchiveClient

        try:
            with ArchiveClient(old, node=self.node, timeout=2.0, policy=self.policy) as client:
                client._request("fence", epoch=epoch, primary=self.address)
        except errors.ExonError as exc:
            log.info("fence of the old primary %s: %s", old, exc)
        finally:
            with self._lock:
                self._threads.remove(threading.current_thread())

    def _demote(self, primary: str | None) -> None:
        """Stop taking writes (a newer epoch exists): close the ingest sockets (producers
        get CookieLost for what was not confirmed) and follow ``primary`` when known."""
        with self._lock:
            if self.role != "primary":
                return
            self.role = "replica" if primary is not None else "fenced"
            self.primary = primary
            socks = [*self.ingest.values(), *([self.keyed] if self.keyed is not None else [])]
            self.ingest, self.keyed = {}, None
        for sock in socks:
            sock.close(timeout=0)
        with self._repl:
            for sock in socks:
                self._pending.pop(sock, None)
            for session in self._sessions.values():
                session.stop.set()
        if primary is not None:
            self._follow()

    # ---- control -------------------------------------------------------------------------

    def _control_loop(self) -> None:
        """Answer every request: with an error when the answer does not fit, and when even
        that cannot go (no credit for CONTROL_SEND_TIMEOUT), give the request up (its REQ
        times out) rather than leave the REP owing it (no later receive() would work)."""
        sock = self.control
        for msg in self._taking(sock, lambda: sock.receive(timeout=POLL)):
            reply = self.answer(msg.payload)
            try:
                try:
                    sock.send(reply, timeout=CONTROL_SEND_TIMEOUT)
                except errors.MessageTooLarge as exc:  # the requester takes less than 64 KiB
                    sock.send(protocol.encode_error(ControlError(str(exc))),
                              timeout=CONTROL_SEND_TIMEOUT)
            except errors.ExonError as exc:
                if not sock.closed:
                    log.warning("control: no answer sent to %s: %s", msg.peer, exc)
                sock.reset()

    def answer(self, request: bytes) -> bytes:
        """The encoded answer to one encoded control request: never more than
        protocol.MAX_REPLY_LENGTH bytes (a ControlError saying so instead)."""
        op = "control"
        try:
            req = protocol.decode_request(request)
            op = req.op
            reply = self.handle(req)
        except (ArchiveError, ValueError) as exc:
            reply = protocol.encode_error(exc)
        except Exception as exc:  # a bug must not stop the service
            log.exception("control request failed")
            reply = protocol.encode_error(ArchiveError(f"internal error: {exc!r}"))
        if len(reply) > protocol.MAX_REPLY_LENGTH:
            hint = (" (ask for fewer positions: a larger max_records or a shorter range)"
                    if op == "boundaries" else "")
            reply = protocol.encode_error(ControlError(
                f"{op}: the answer is {len(reply)} bytes, over the "
                f"{protocol.MAX_REPLY_LENGTH} a control reply holds{hint}"))
        return reply

    def handle(self, req: protocol.Request) -> bytes:
        """Answer one decoded control request (the service's control logic)."""
        a = req.args
        ar = self.archive
        op = req.op
        if op == "info":
            return protocol.encode_ok(
                version=exon.__version__, fsync=ar.fsync, keyed_tag=self.keyed_tag,
                control_tag=CONTROL_TAG,
                ingest={n: s.tag for n, s in self.ingest.items()}, events=self._recent_events(),
                **self.replication_status())
        if op == "recordings":
            return protocol.encode_ok(recordings=[asdict(r) for r in ar.recordings()])
        if op == "recording":
            return protocol.encode_ok(recording=asdict(ar.recording(a["recording"])))
        if op == "stop_position":
            return protocol.encode_ok(position=ar.stop_position(a["recording"]))
        if op == "boundaries":
            return protocol.encode_ok(positions=ar.boundaries(
                a["recording"], a["start"], a["end"], a["max_records"]))
        if op == "advance":
            return protocol.encode_ok(position=ar.advance(a["recording"], a["start"],
                                                         a["max_records"]))
        if op == "count":
            return protocol.encode_ok(records=ar.count(a["recording"], a["start"], a["end"],
                                                      a["max_records"]))
        if op == "position_at":
            return protocol.encode_ok(position=ar.position_at(
                a["recording"], a["timestamp"], wait=INDEX_WAIT))
        if op in ("commit", "truncate"):
            if self.role != "primary":
                raise ArchiveError(f"{op}: {self.address} is a {self.role}; commit and "
                                   f"truncate at the primary"
                                   + (f" ({self.primary})" if self.primary else ""))
            if op == "commit":
                start = ar.commit(a["recording"], a["consumer"], a["position"],
                                  truncate=a["truncate"])
            else:
                start = ar.truncate(a["recording"], a["before"])
            self._bump_catalog()
            return protocol.encode_ok(start_position=start)
        if op == "replay":
            return self._start_replay(a)
        if op == "replicate":
            return self._replicate(a)
        if op == "promote":
            return protocol.encode_ok(epoch=self.promote())
        if op == "fence":
            if a["epoch"] <= ar.catalog.epoch:
                return protocol.encode_ok(role=self.role, epoch=ar.catalog.epoch)
            self._event(f"fenced by {a['primary']}, primary of epoch {a['epoch']}: this "
                        f"member refuses writes and follows it")
            self._demote(a["primary"])
            return protocol.encode_ok(role=self.role, epoch=ar.catalog.epoch)
        if op == "stop_replay":
            with self._lock:
                ev = self._replays.get(a["replay_id"])
            if ev is not None:
                ev.set()
            return protocol.encode_ok(stopped=ev is not None)
        raise ControlError(f"unknown control operation {op!r}")  # pragma: no cover

    # ---- replay --------------------------------------------------------------------------

    def _start_replay(self, a: dict[str, Any]) -> bytes:
        if a["follow"] and a["end"] is not None:
            raise ArchiveError("follow=true replays to the live end: give no end")
        peer = exon.Peer.parse(a["reply_to"])
        entry, start, end = self.archive.check_range(a["recording"], a["start"],
                                                     None if a["follow"] else a["end"])
        with self._lock:
            if len(self._replays) >= MAX_REPLAYS:
                raise ArchiveError(f"too many replays running ({MAX_REPLAYS}); try later")
            replay_id = next(self._replay_ids)
            stop = self._replays[replay_id] = threading.Event()
            self._replay_recordings[replay_id] = entry.id
        self._spawn(self._replay_loop, f"exon-archive-replay-{replay_id}", replay_id,
                    entry.id, peer, start, end, bool(a["follow"]), stop)
        return protocol.encode_ok(replay_id=replay_id, start=start,
                                 end=None if a["follow"] else end)

    def _replay_loop(self, replay_id: int, recording_id: int, peer: exon.Peer, start: int,
                     end: int, follow: bool, stop: threading.Event) -> None:
        push = None
        files = None
        try:
            files = self.archive.files(recording_id)
            push = self.node.socket("push", max_message_size=REPLAY_CHUNK + 4 * (1 << 20),
                                    policy=self.policy)
            push.link(str(peer), timeout=10.0)
            # a follower waits on the writer; one of a recording that recovery refused gets
            # the ArchiveCorrupt (a bounded replay reads up to the damage, then gets it)
            writer = self.archive.writer(recording_id) if follow else None
            position = start
            last_sent = time.monotonic()
            while not stop.is_set() and not self._stop.is_set():
                if position < end:
                    data, first, position = files.raw(position, end, REPLAY_CHUNK)
                    self._push(push, protocol.encode_replay(protocol.REPLAY_RECORDS, replay_id,
                                                           first, data), stop)
                    last_sent = time.monotonic()
                    continue
                if not follow:
                    self._push(push, protocol.encode_replay(protocol.REPLAY_END, replay_id,
                                                           end), stop)
                    push.close(timeout=10.0)
                    return
                assert writer is not None  # follow
                with writer.changed:
                    if writer.stop_position <= position and writer.failed is None:
                        writer.changed.wait(POLL)
                end = writer.stop_position
                if end <= position and writer.failed is not None:
                    # the recording stopped (disk full, I/O error): nothing more comes;
                    # the follower gets the reason (REPLAY_ERROR) instead of waiting on
                    writer.check_running()
                if end <= position and time.monotonic() - last_sent > KEEPALIVE_INTERVAL:
                    self._push(push, protocol.encode_replay(protocol.REPLAY_KEEPALIVE,
                                                           replay_id, position), stop)
                    last_sent = time.monotonic()
            raise self._stopped()  # the reader hears why nothing more comes
        except (errors.ExonError, OSError) as exc:
            if push is not None and not isinstance(exc, errors.BrokenLink | errors.Timeout):
                try:
                    body = msgpack.packb(protocol.error_fields(exc))
                    push.send(protocol.encode_replay(protocol.REPLAY_ERROR, replay_id, 0, body),
                              timeout=STOP_NOTICE_TIMEOUT)
                except errors.ExonError:
                    pass  # best effort: the reader is gone or has no credit for us
        finally:
            if files is not None:
                files.close()
            if push is not None and not push.closed:
                push.close(timeout=1.0)
            with self._lock:
                self._replays.pop(replay_id, None)
                self._replay_recordings.pop(replay_id, None)
                self._threads.remove(threading.current_thread())  # close() joins live ones

    def _stopped(self) -> ArchiveError:
        """Why a replay the service stopped ends."""
        if self._stop.is_set():
            return ArchiveError(f"the archive service at {self.address} is closing")
        return ArchiveError("the replay was stopped (stop_replay)")

    def _push(self, push: Any, data: bytes, stop: threading.Event) -> None:
        """Send, waiting for credit in slices so that a stop request is seen."""
        while True:
            try:
                push.send(data, timeout=POLL)
                return
            except errors.Timeout:
                if stop.is_set() or self._stop.is_set():
                    raise self._stopped() from None
