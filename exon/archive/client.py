"""The archive service's client: control requests over a REQ socket, replays into a PULL
socket of the client's own node (credit-bounded: the service never runs ahead of a slow
reader by more than ``REPLAY_CREDITS`` chunks), exactly-once ingest through a
:class:`KeyedWriter`.

An :class:`ArchiveClient` opens its exon Node when first used (so constructing one is
cheap and does no I/O), or uses the ``node=`` it is given. It is not picklable: build one
where it is used.
"""

from __future__ import annotations

import itertools
import socket as _socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import msgpack

import exon
from exon import errors
from exon.archive import codec, protocol
from exon.archive.archive import RecordingInfo
from exon.archive.errors import ArchiveError, ControlError, IndexBuilding, ReplayRangeError
from exon.archive.format import Record
from exon.archive.protocol import CONTROL_TAG, KEEPALIVE_INTERVAL, REPLAY_CHUNK, REPLAY_CREDITS
from exon.core.policy import LinkPolicy
from exon.sockets.messages import Peer, split_address

#: the least a follow replay waits for the service before raising Timeout: three of its
#: keepalive intervals (it sends one each KEEPALIVE_INTERVAL while idle, a little later
#: under load), whatever the client's ``timeout``
FOLLOW_MIN_WAIT = 3 * KEEPALIVE_INTERVAL
#: seconds position_at asks again while the service builds a recording's time index
INDEX_BUILD_WAIT = 300.0

#: with several members, the longest a client waits to link to one before it tries the
#: next (a live service answers a LINK in milliseconds; a dead one never does)
MEMBER_LINK_WAIT = 3.0

#: with several members, the longest a read request waits for one member's answer before
#: it asks the next (the links' liveness timeout: a member gone since is not coming back)
MEMBER_ANSWER_WAIT = 10.0


def local_endpoint_for(host: str) -> str:
    """The endpoint a client node should bind so that ``host`` can reach it back: loopback
    for a loopback archive, else the local address the route to ``host`` leaves from (a
    UDP ``connect`` picks it without sending anything)."""
    if host in ("localhost", "::1") or host.startswith("127."):
        return "[::1]:0" if host == "::1" else "127.0.0.1:0"
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    with _socket.socket(family, _socket.SOCK_DGRAM) as s:
        s.connect((host, 9))
        local = s.getsockname()[0]
    return f"[{local}]:0" if family == _socket.AF_INET6 else f"{local}:0"


def _unreachable(exc: ArchiveError) -> bool:
    """An error that says the member could not be reached or will not serve this (another
    member may): a link failure, or a replica asked to write."""
    text = str(exc)
    return (text.startswith("archive ") and " did not answer" not in text) or \
        " is a replica" in text or " is a fenced" in text or text.endswith(" is closing")


class ArchiveClient:
    """``ArchiveClient("HOST:PORT", timeout=10.0)``: every call waits at most ``timeout``
    seconds for the service and raises :class:`exon.Timeout` (naming the address).

    ``ArchiveClient("H1:P1,H2:P2")``: the members of a replicated archive (docs/protocol.md
    3.7). Reads go to the member in use and move to the next when it does not answer (a
    replay resumes from the position it reached); writes (commit, truncate, keyed ingest)
    go to the member that says it is the primary."""

    def __init__(self, address: str, *, timeout: float = 10.0, node: exon.Node | None = None,
                 endpoint: str | None = None, policy: LinkPolicy | None = None) -> None:
        self.addresses = [a.strip() for a in address.split(",")]
        for member in self.addresses:
            split_address(member, what="archive address")
        address = self.addresses[0]
        host, port = split_address(address, what="archive address")
        self.address = address
        #: the link policy of the client's sockets (control, replay, keyed queries): e.g.
        #: ``exon.EncryptedPolicy(keys, peer_key=service_key)`` for encrypted links
        self.policy = policy
        self.host = host
        self.port = port
        self.timeout = timeout
        self._node = node
        self._own_node = node is None
        self._endpoint = endpoint
        self._req: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._info: dict[str, Any] | None = None
        #: replays running: their id -> their PULL (close() stops them)
        self._replays: dict[int, Any] = {}

    # ---- plumbing -----------------------------------------------------------------------------

    @property
    def node(self) -> exon.Node:
        """The node the client talks through (created on first use unless one was given);
        :class:`exon.ClosedError` once closed."""
        if self._closed:
            raise errors.ClosedError("the archive client is closed")
        if self._node is None:
            self._node = exon.Node(endpoint=self._endpoint or local_endpoint_for(self.host))
        return self._node

    def _move_on(self) -> bool:
        """Use the next member (False: there is only one)."""
        if len(self.addresses) < 2:
            return False
        with self._lock:
            if self._req is not None:
                self._req.close(timeout=0)
                self._req = None
            i = self.addresses.index(self.address) if self.address in self.addresses else -1
            self.address = self.addresses[(i + 1) % len(self.addresses)]
            self.host, self.port = split_address(self.address, what="archive address")
            self._info = None
        return True

    def _request(self, op: str, *, wait: float | None = None, **args: Any) -> dict[str, Any]:
        """Send one control request and return its decoded reply, within ``wait`` seconds
        for each step (default: the client's timeout); with several members, the next
        that answers."""
        if len(self.addresses) < 2:
            return self._request_one(op, wait=wait, **args)
        # members in turn until the time is up: a dead member costs MEMBER_LINK_WAIT to
        # link or MEMBER_ANSWER_WAIT to answer, not the whole wait (60 s for a Spark sink's
        # client); these requests are reads, which every member answers at once
        budget = self.timeout if wait is None else wait
        deadline = time.monotonic() + budget
        tried = 0  # each member is asked once at least, whatever the time left
        while True:
            try:
                return self._request_one(op, wait=min(budget, MEMBER_ANSWER_WAIT),
                                         link_wait=min(budget, MEMBER_LINK_WAIT), **args)
            except (errors.Timeout, errors.BrokenLink, ArchiveError) as exc:
                if isinstance(exc, ArchiveError) and not _unreachable(exc):
                    raise
                tried += 1
                if tried >= len(self.addresses) and time.monotonic() >= deadline:
                    raise
                self._move_on()
                if tried % len(self.addresses) == 0:
                    time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def primary(self) -> str:
        """The member that says it is the primary (the client then uses it), asking the
        members in turn for up to the client's timeout (a failover in progress: a replica
        about to be promoted); ArchiveError when none does."""
        deadline = time.monotonic() + self.timeout
        while True:
            for _ in range(len(self.addresses)):
                try:
                    if self._request_one("info", wait=min(self.timeout, MEMBER_LINK_WAIT)).get(
                            "role", "primary") == "primary":
                        return self.address
                except (errors.Timeout, errors.BrokenLink, ArchiveError):
                    pass
                if not self._move_on():
                    break
            if time.monotonic() >= deadline:
                raise ArchiveError(f"no primary among {','.join(self.addresses)} "
                                   f"(asked for {self.timeout} s)")
            time.sleep(0.2)

    def _write_request(self, op: str, **args: Any) -> dict[str, Any]:
        if len(self.addresses) > 1:
            self.primary()
        return self._request_one(op, **args)

    def _request_one(self, op: str, *, wait: float | None = None,
                     link_wait: float | None = None, **args: Any) -> dict[str, Any]:
        timeout = self.timeout if wait is None else wait
        with self._lock:
            if self._req is None:
                req = self.node.socket("req", max_message_size=protocol.MAX_CONTROL_LENGTH,
                                       policy=self.policy)
                linking = timeout if link_wait is None else link_wait
                try:
                    req.link(f"{self.address}/{CONTROL_TAG}", timeout=linking)
                except errors.Timeout:
                    req.close(timeout=0)
                    raise errors.Timeout(f"archive {self.address} did not answer in "
                                         f"{linking}s (is it running?)") from None
                except errors.ExonError as exc:
                    req.close(timeout=0)
                    raise ArchiveError(f"archive {self.address}: {exc}") from exc
                self._req = req
            req = self._req
            try:
                if link_wait is not None and not req.peers:
                    # its link broke (the member went away): relinking may take as long
                    # as a LINK, then the next member is tried; a request sent now would
                    # wait for the relink and its answer for the whole ``timeout``
                    req.wait_for_links(1, timeout=link_wait)
                req.send(protocol.encode_request(op, **args), timeout=timeout)
                reply = req.receive(timeout=timeout)
            except (errors.Timeout, errors.BrokenLink) as exc:
                # the service died or restarted: link afresh on the next call
                self._req = None
                req.close(timeout=0)
                if isinstance(exc, errors.Timeout):
                    raise errors.Timeout(f"archive {self.address}: no answer to {op!r} in "
                                         f"{timeout}s") from None
                raise
        while not isinstance(reply, exon.Message):  # a REQ has no cookies; be safe
            reply = req.receive(timeout=timeout)
        return protocol.decode_response(reply.payload)

    def close(self) -> None:
        """Unlink from the service and close the node if this client created it. Idempotent."""
        if self._closed:
            return
        # replays still open: their PULLs drop their links at once (the service's replay
        # ends at its next send) and the service is told, briefly
        for replay_id, pull in list(self._replays.items()):
            pull.close(timeout=0)
            try:
                self._request("stop_replay", wait=1.0, replay_id=replay_id)
            except errors.ExonError:
                pass
        self._replays.clear()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._req is not None:
                try:
                    self._req.close(timeout=1.0)  # unlink cleanly: the service forgets us
                except errors.ExonError:
                    pass
                self._req = None
            if self._own_node and self._node is not None:
                self._node.close()
            self._node = None

    def __enter__(self) -> ArchiveClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> Any:
        raise TypeError("an ArchiveClient holds sockets and does not pickle: create one where "
                        "it is used")

    # ---- control ----------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The service's version, fsync policy, ingest tags, keyed tag and error events."""
        return self._request("info")

    def recordings(self) -> list[RecordingInfo]:
        """Every recording of the service, as :class:`RecordingInfo`."""
        return [RecordingInfo(**r) for r in self._request("recordings")["recordings"]]

    def recording(self, recording: str | int) -> RecordingInfo:
        """One recording by name or id; :class:`RecordingNotFound` if there is none."""
        return RecordingInfo(**self._request("recording", recording=recording)["recording"])

    def stop_position(self, recording: str | int) -> int:
        """The durable end of the recording."""
        return int(self._request("stop_position", recording=recording)["position"])

    def boundaries(self, recording: str | int, start: int, end: int | None,
                   max_records: int) -> list[int]:
        """Record boundaries ``[start, p1, ..., end]`` cutting ``[start, end)`` into slices of at
        most ``max_records`` records (``end=None``: the stop position)."""
        return list(self._request("boundaries", recording=recording, start=start, end=end,
                                  max_records=max_records)["positions"])

    def advance(self, recording: str | int, start: int, max_records: int) -> int:
        """The position after at most ``max_records`` records from ``start`` (at most the stop
        position)."""
        return int(self._request("advance", recording=recording, start=start,
                                 max_records=max_records)["position"])

    def count(self, recording: str | int, start: int, end: int | None = None, *,
              max_records: int = 2**63 - 1) -> int:
        """How many records ``[start, end)`` holds (``end=None``: the stop position),
        counting at most ``max_records``."""
        return int(self._request("count", recording=recording, start=start, end=end,
                                 max_records=max_records)["records"])

    def position_at(self, recording: str | int, timestamp: int, *,
                    wait: float = INDEX_BUILD_WAIT) -> int:
        """The position of the first record the archive received at or after ``timestamp``
        (ns since the Unix epoch); the start position when every record is, the stop
        position when none is (exon.archive.time_index). The first lookup of a long
        recording builds its index (about 1.5 s per million records): the service answers
        IndexBuilding meanwhile, and this asks again for up to ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while True:
            try:
                return int(self._request("position_at", recording=recording,
                                         timestamp=timestamp)["position"])
            except IndexBuilding:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def commit(self, recording: str | int, consumer: str, position: int, *,
               truncate: bool = False) -> int:
        """Record that ``consumer`` consumed up to ``position``; returns the start position."""
        return int(self._write_request("commit", recording=recording, consumer=consumer,
                                       position=position, truncate=truncate)["start_position"])

    def truncate(self, recording: str | int, before: int) -> int:
        """Drop whole segments below ``before``; returns the new start position."""
        return int(self._write_request("truncate", recording=recording, before=before)
                   ["start_position"])

    def promote(self) -> int:
        """Make the service (a replica) the primary of a new epoch; returns the epoch."""
        return int(self._request_one("promote")["epoch"])

    def ingest_peer(self, recording: str) -> str:
        """``"HOST:PORT/TAG"`` of the recording's ingest PULL socket."""
        tag = self.recording(recording).ingest_tag
        if tag is None:
            raise ArchiveError(f"recording {recording!r} has no ingest socket")
        return f"{self.address}/{tag}"

    # ---- replay -----------------------------------------------------------------------------

    def replay_batches(self, recording: str | int, start: int = 0, end: int | None = None, *,
                       follow: bool = False, verify: bool = True) -> Iterator[list[Record]]:
        """Records of ``[start, end)`` in batches, streamed from the service (``end=None``:
        its stop position now; ``follow``: then keep tailing). With several members, a
        replay whose member stops answering goes on from the next member that holds the
        range, from the position it reached. See :meth:`_replay_from` for the rest."""
        position = start
        tries = 0
        while True:
            progress = [position]
            try:
                for records in self._replay_from(recording, position, end, follow, verify,
                                                 progress):
                    tries = 0
                    yield records
                return
            except (errors.Timeout, errors.BrokenLink, ArchiveError) as exc:
                # gone, or does not hold the range (a replica behind): the next member
                if isinstance(exc, ArchiveError) and not (
                        isinstance(exc, ReplayRangeError) or _unreachable(exc)):
                    raise
                tries += 1
                if tries >= len(self.addresses) or not self._move_on():
                    raise
                position = progress[0]

    def _replay_from(self, recording: str | int, start: int, end: int | None, follow: bool,
                     verify: bool, progress: list[int]) -> Iterator[list[Record]]:
        """Records of ``[start, end)`` in batches, streamed from the service (``end=None``:
        its stop position now; ``follow``: then keep tailing). Raises exon.Timeout when the
        service sends nothing for ``timeout`` seconds (in follow mode it sends a keepalive
        every second while idle, and the client waits at least FOLLOW_MIN_WAIT). Closing
        the client stops the replays still open."""
        pull = self.node.socket("pull", credits=REPLAY_CREDITS,
                                max_message_size=REPLAY_CHUNK + 4 * (1 << 20), policy=self.policy)
        replay_id = 0  # while not 0: the service's replay may still run (stop it at the end)
        registered = 0  # the id this replay is listed under in _replays
        try:
            reply = self._request("replay", recording=recording, start=start, end=end,
                                  follow=follow, reply_to=f"{self.node.address}/{pull.tag}")
            replay_id = registered = int(reply["replay_id"])
            self._replays[registered] = pull
            producers: dict[bytes, str] = {}
            header = protocol.REPLAY_HEADER
            source = f"archive {self.address} replay {replay_id}"
            wait = max(self.timeout, FOLLOW_MIN_WAIT) if follow else self.timeout
            while True:
                try:
                    msg = pull.receive(timeout=wait)
                except (errors.Timeout, errors.BrokenLink):
                    # the service is gone or stuck: no stop_replay to wait on as well
                    replay_id = 0
                    raise
                data = msg[0]
                if len(data) < header.size:
                    raise ControlError(f"{source}: a {len(data)}-byte replay message")
                kind, rid, position = header.unpack_from(data, 0)
                if rid != replay_id:
                    continue  # a late message of an earlier replay
                if kind == protocol.REPLAY_RECORDS:
                    base = position - header.size
                    records, offset = codec.decode(data, header.size, len(data), base,
                                                   1 << 62, verify, source, producers)
                    if offset != len(data):
                        raise ControlError(f"{source}: records end at {offset} of {len(data)}")
                    progress[0] = base + offset
                    if records:
                        yield records
                elif kind == protocol.REPLAY_END:
                    replay_id = 0
                    return
                elif kind == protocol.REPLAY_ERROR:
                    replay_id = 0
                    body = msgpack.unpackb(data[header.size:], raw=False)
                    if not isinstance(body, dict):
                        raise ControlError(f"{source}: a replay ERROR that is not a map")
                    raise protocol.error_from(body)
                elif kind != protocol.REPLAY_KEEPALIVE:
                    raise ControlError(f"{source}: unknown replay message kind {kind}")
        finally:
            pull.close(timeout=0)  # done, or abandoned: nothing more is wanted
            self._replays.pop(registered, None)
            if replay_id and not self._closed:
                try:
                    self._request("stop_replay", replay_id=replay_id)
                except errors.ExonError:
                    pass

    def replay(self, recording: str | int, start: int = 0, end: int | None = None, *,
               follow: bool = False, verify: bool = True) -> Iterator[Record]:
        """Records of ``[start, end)``, one at a time; see :meth:`replay_batches`. Lazy as a
        generator: the replay starts when the first record is asked for, and dropping the
        iterator stops it."""
        # chain walks each batch list in C: no Python frame resumed per record
        return itertools.chain.from_iterable(self.replay_batches(
            recording, start, end, follow=follow, verify=verify))

    # ---- exactly-once ingest ----------------------------------------------------------------

    def keyed_writer(self, recording: str | int, query: str) -> KeyedWriter:
        """A writer whose rows the archive records once: a row whose ``(query, partition)``
        already has a recorded ``(batch, seq)`` at or past its own is dropped."""
        if len(self.addresses) > 1:
            self.primary()
        rec = self.recording(recording)
        if self._info is None:
            self._info = self.info()
        return KeyedWriter(self, rec.id, query, int(self._info["keyed_tag"]))


class KeyedWriter:
    """Rows for exactly-once ingest: ``send(batch, partition, seq, payload)``, then
    ``flush()`` returns once every row sent is durable (or raises)."""

    def __init__(self, client: ArchiveClient, recording_id: int, query: str,
                 keyed_tag: int) -> None:
        q = query.encode()
        if not q or len(q) > 128:
            raise exon.ConfigurationError("a query id is 1..128 bytes of UTF-8")
        self._client = client
        self._recording_id = recording_id
        self._query = q
        self._push = client.node.socket("push", policy=client.policy)
        self._push.link(str(Peer.parse(f"{client.address}/{keyed_tag}")),
                        timeout=client.timeout)
        #: rows not yet confirmed, by the cookie they went under (a send's or a batch's)
        self._pending: dict[int, int] = {}
        self._next_cookie = 0
        self._lost = 0

    def send(self, batch: int, partition: int, seq: int, payload: bytes) -> None:
        """Send one keyed row; blocks up to the client's timeout for credit. The archive
        records a ``(query, partition, batch, seq)`` once."""
        cookie = self._cookie(1)
        try:
            self._push.send(protocol.encode_keyed(self._recording_id, partition, batch, seq,
                                                 self._query, payload),
                            cookie=cookie, timeout=self._client.timeout)
        except exon.ExonError:
            del self._pending[cookie]  # not sent: it is the caller's to send again
            raise
        self._collect()

    def send_many(self, batch: int, partition: int, first_seq: int,
                  payloads: Sequence[bytes]) -> None:
        """Send keyed rows ``first_seq``, ``first_seq + 1``, ... in order, as one
        ``send_many`` of the writer's PUSH (one native call per run of credit, one cookie
        for them all); blocks up to the client's timeout. ``flush()`` confirms them as it
        does single rows. An error is the socket's (``.sent`` rows went out)."""
        if not payloads:
            return
        pack = protocol.KEYED_HEADER.pack
        rid, query, qlen = self._recording_id, self._query, len(self._query)
        messages = [pack(rid, partition, batch, first_seq + i, qlen) + query + payload
                    for i, payload in enumerate(payloads)]
        cookie = self._cookie(len(messages))
        try:
            self._push.send_many(messages, cookie=cookie, timeout=self._client.timeout)
        except exon.ExonError as exc:
            sent = getattr(exc, "sent", 0)
            if sent:
                self._pending[cookie] = sent  # the batch's cookie covers what went out
            else:
                del self._pending[cookie]  # nothing went: no cookie comes back
            raise
        self._collect()

    def _cookie(self, rows: int) -> int:
        cookie = self._next_cookie
        self._next_cookie += 1
        self._pending[cookie] = rows
        return cookie

    def _collect(self) -> None:
        # collect the cookies that are back already (keeps the cookie queue short)
        while len(self._pending) > 4096:
            self._take_cookie(self._client.timeout)

    def _take_cookie(self, timeout: float) -> None:
        item = self._push.receive(timeout=timeout)
        rows = self._pending.pop(item.value, 0)
        if isinstance(item, exon.CookieLost):
            self._lost += rows

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every row sent is durable in the archive; raises ArchiveError if any
        was not confirmed (the link broke: send the batch again), exon.Timeout."""
        t = self._client.timeout if timeout is None else timeout
        while self._pending:
            self._take_cookie(t)
        if self._lost:
            lost, self._lost = self._lost, 0
            raise ArchiveError(f"{lost} row(s) were not confirmed durable by archive "
                               f"{self._client.address}; send the batch again")

    def close(self) -> None:
        """Close the writer's PUSH (within a second: what was sent is delivered or its cookies are
        lost)."""
        self._push.close(timeout=1.0)

    def __enter__(self) -> KeyedWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
