"""``exon bench archive``: the archive's record and replay speed beside plain Python file I/O
and plain exon push/pull, in the same run (issue 9, "Speed").

Processes: the archive service (:class:`~exon.archive.ArchiveService`, ``fsync="none"``)
runs in its own worker process; every producer and remote reader is another worker
(``python -m exon.bench.archive ROLE ...``); the file peers and the local replay run in
the bench process. ``transport="ipc"`` (the default): all exon nodes share one media driver
launched here (IPC between them, as ``exon bench sockets``); ``"udp"``: each worker's node
runs its own embedded driver (UDP over loopback). One JSON line per case
(:func:`exon.bench.report.emit`; ratio > 1 means exon is better). The record cases run
``runs`` rounds (default 3), each round the archive then its two peers, one after the other:
``exon`` and ``peer`` are the medians, ``exon_runs``/``peer_runs``/``ratio_runs`` every
round (a ratio run compares figures of one round: on a busy machine, read those). Every
timed phase starts after a ``sync()``: the pages the earlier phases left dirty are on disk
by then, so no phase pays for another's writeback (a round of the 1 KiB case writes about
1.6 GB, beyond the kernel's background writeback threshold on most machines):

* ``record_{size}``: a producer PUSHes N messages of ``size`` bytes to the archive's ingest
  socket, the last one with a cookie; the clock runs from the first send until that cookie
  is back (the archive confirms in order, so every message is then in the recording).
  Peer: the same payloads written by the bench process with a buffered ``f.write()`` loop
  to one file, then flush and close. Goal: ratio >= 0.5.
  ``fs_ceiling``: the file system's own limit for the bytes the archive wrote (the
  recording's bytes, headers included, written by 1 MiB ``os.write`` calls);
  ``free_page_reporting`` (:func:`exon.bench.host.free_page_reporting`): whether the
  machine is a VM that hands freed pages back to its host, where fresh page-cache pages
  cost several times more than ones freed just before (None: no memory balloon).
* ``record_vs_pushpull_{size}``: the same producer against a plain exon PULL whose process
  runs a ``receive()`` loop (no archive), with the archive's ingest credits and largest
  message (the same window: with a smaller one, a PULL descheduled on a busy machine stalls
  its producer sooner). Goal: ratio >= 0.8. ``fs_ceiling_ratio``: the ratio of a recorder
  that cost nothing but ``fs_ceiling`` (below the goal, the file system bounds the case);
  ``writer_ceiling``: the recorder's disk side alone (framing, checksums and writes of
  ready batches, no sockets), and ``writer_ceiling_ratio_runs`` the ratio it would score.
* ``record_idle_producers_{size}`` (the first size asked for): the record case's producer
  with 4 more PUSH sockets of its node linked to the same ingest first, never sending.
  Credit granted is never taken back, so their first windows stay reserved in the
  service's memory budget: before the ingest's ``start_credits`` they left the busy
  producer 1 credit (0.01 M msgs/s). Peer: the record case's figures of the same rounds.
* ``replay_local_64``: ``for rec in Archive(dir).replay(name): n += 1`` over the 64-byte
  recording of the record case. Peer: the same bytes (the recording's segment files) read
  by a plain Python loop, a record at a time (header read and unpacked, payload sliced; no
  checksum). Also reported: ``peer_payload_only``, the bare payloads as 4-byte
  length-prefixed records read by ``f.read(4)`` + ``f.read(n)``, and ``peer_lines``
  (binary payloads may hold newlines, so a line loop is no record format). Goals: >= 1.5
  M records/s and ratio >= 2.
* ``replay_remote_64``: ``ArchiveClient(addr).replay(name)`` counted in another process;
  peer: the local replay figure (ratio = remote / local).

Worker roles (``python -m exon.bench.archive ROLE DRIVER_DIR ...``, DRIVER_DIR ``-`` for
an embedded driver)::

    serve DRIVER_DIR ARCHIVE_DIR [--fsync=POLICY] NAME=TAG...
                                               print the service address; serve until
                                               stdin closes (fsync "none" by default)
    pull DRIVER_DIR N                          print HOST:PORT/TAG; receive() N messages
    push DRIVER_DIR N SIZE PEER                link, send N (the last with a cookie), wait
                                               for the cookie; print seconds
    replay DRIVER_DIR ADDRESS NAME             replay NAME remotely; print "records seconds"
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from exon.bench.host import free_page_reporting
from exon.bench.report import emit

if TYPE_CHECKING:
    from exon.middleware.node import Node

__all__ = ["run_archive_bench"]

_DRIVER: dict[str, Any] = {
    "threading_mode": "SHARED",
    "publication_linger_timeout_ns": 0,
}
_FIRST_TAG = 10
_REPLAY_SIZE = 64
_LOCAL_REPEATS = 3  # the local replay and its peer: best of this many passes
#: producers linked and idle beside the sending one in the record_idle_producers case
_IDLE_PRODUCERS = 4


# ---- the bench process ---------------------------------------------------------------------

def _worker(*args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "exon.bench.archive", *args],
                            stdout=subprocess.PIPE, stdin=stdin, text=True)


def _finish(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _first_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.wait(10)
        raise RuntimeError(f"bench worker {proc.args!r} exited ({proc.returncode}) "
                           f"before printing its address")
    return line


@contextmanager
def _service(driver: str, directory: str, names: dict[str, int]) -> Iterator[str]:
    """The archive service in its own process: yields its address."""
    with _service_process(driver, directory, names) as (address, _pid):
        yield address


@contextmanager
def _service_process(driver: str, directory: str, names: dict[str, int],
                     fsync: str = "none") -> Iterator[tuple[str, int]]:
    """The archive service in its own process (``fsync``: its policy): yields its address
    and process id."""
    proc = _worker("serve", driver, directory, f"--fsync={fsync}",
                   *(f"{n}={t}" for n, t in names.items()), stdin=subprocess.PIPE)
    try:
        yield _first_line(proc), proc.pid
        assert proc.stdin is not None
        proc.stdin.close()  # the service closes cleanly on EOF
        proc.wait(30)
    finally:
        _finish(proc)


def _push(driver: str, messages: int, size: int, peer: str, idle: int = 0) -> float:
    """Seconds for a producer worker to send ``messages`` to ``peer`` and get the last
    message's cookie back (``idle``: that many other producers of the worker's node linked
    to ``peer`` first, sending nothing)."""
    proc = _worker("push", driver, str(messages), str(size), peer, str(idle))
    try:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode:
            raise RuntimeError(f"push worker exited with {proc.returncode}")
        return float(out.strip().splitlines()[-1])
    finally:
        _finish(proc)


def _push_pull(driver: str, messages: int, size: int) -> float:
    pull = _worker("pull", driver, str(messages))
    try:
        seconds = _push(driver, messages, size, _first_line(pull))
        pull.communicate(timeout=60)
        return seconds
    finally:
        _finish(pull)


def _remote_replay(driver: str, address: str, name: str) -> tuple[int, float]:
    proc = _worker("replay", driver, address, name)
    try:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode:
            raise RuntimeError(f"replay worker exited with {proc.returncode}")
        records, seconds = out.split()
        return int(records), float(seconds)
    finally:
        _finish(proc)


def _file_write(path: str, messages: int, size: int) -> float:
    """The record peer: a plain buffered write loop to one file, then flush and close."""
    payload = b"x" * size
    start = time.perf_counter()
    f = open(path, "wb")  # noqa: SIM115 - close() is part of what is measured
    write = f.write
    for _ in range(messages):
        write(payload)
    f.flush()
    f.close()
    seconds = time.perf_counter() - start
    os.unlink(path)
    return seconds


def _bulk_write(path: str, nbytes: int) -> float:
    """The file system's ceiling for ``nbytes``: written by 1 MiB ``os.write`` calls from
    one ready buffer (no framing, no Python per record), then closed. Not 4 MiB calls: on
    Linux 6.x ext4 those ran 6-9x slower than 256 KiB to 1 MiB ones."""
    chunk = b"x" * (1 << 20)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        left = nbytes
        while left > 0:
            left -= os.write(fd, chunk[:left] if left < len(chunk) else chunk)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - start
    os.unlink(path)
    return seconds


def _writer_only(directory: str, messages: int, size: int) -> float:
    """Seconds for the recorder's disk side alone to record ``messages`` of ``size`` bytes:
    :meth:`~exon.archive.recording.RecordingWriter.append_buffer` over ready batches, as
    large as the service takes them at this size (framing, checksums, writes; no sockets,
    no polling, no confirms)."""
    import array

    from exon.archive import Archive
    from exon.archive.service import BATCH, take_size

    per = take_size(BATCH, 1, size)
    producer = b"127.0.0.1:40000/10"

    def batch(n: int) -> tuple[bytes, memoryview]:
        return b"x" * (size * n), memoryview(array.array("Q", range(0, size * n + 1, size)
                                                         if size else [0] * (n + 1)))

    full = batch(per)
    with Archive(directory, owner=True) as ar:
        ar.create_recording("writer")
        writer = ar.writer("writer")
        start = time.perf_counter()
        for first in range(0, messages, per):
            n = min(per, messages - first)
            buffer, offsets = full if n == per else batch(n)
            writer.append_buffer(buffer, offsets, [(None, n)], lambda _peer: producer,
                                 time.time_ns())
        seconds = time.perf_counter() - start
    shutil.rmtree(directory)
    return seconds


def _recorded_bytes(archive_dir: str, name: str) -> int:
    from exon.archive import Archive

    with Archive(archive_dir) as ar:
        info = ar.recording(name)
    return info.stop_position - info.start_position


def _write_length_prefixed(path: str, messages: int, size: int) -> None:
    record = len(b"x" * size).to_bytes(4, "little") + b"x" * size
    with open(path, "wb") as f:
        f.write(record * messages)


def _read_length_prefixed(path: str) -> tuple[int, float]:
    """The replay peer: a plain Python loop over a file of length-prefixed records."""
    n = 0
    start = time.perf_counter()
    with open(path, "rb") as f:
        read = f.read
        while True:
            head = read(4)
            if not head:
                break
            read(int.from_bytes(head, "little"))
            n += 1
    return n, time.perf_counter() - start


def _read_segment_bytes(archive_dir: str, name: str) -> tuple[int, float]:
    """The replay peer: the recording's own bytes (its segment files) read by a plain
    Python loop, one record at a time: read the 32-byte header, unpack it, read the rest,
    slice the payload out. No checksum, no Record objects."""
    from exon.archive import Archive
    from exon.archive.format import HEADER, TYPE_DATA, align
    from exon.archive.segments import segment_bases, segment_path

    with Archive(archive_dir) as ar:
        entry = ar.entry(name)
    paths = [segment_path(archive_dir, entry.id, b) for b in segment_bases(archive_dir, entry.id)]
    unpack = HEADER.unpack
    n = 0
    start = time.perf_counter()
    for path in paths:
        with open(path, "rb") as f:
            read = f.read
            while True:
                head = read(32)
                if len(head) < 32:
                    break
                _, length, _, _, meta, rtype, _, _, _ = unpack(head)
                if length == 0:
                    break
                rest = read(align(length) - 32)
                if rtype == TYPE_DATA:
                    rest[meta:length - 32]
                    n += 1
    return n, time.perf_counter() - start


def _read_lines(path: str, messages: int, size: int) -> tuple[int, float]:
    """A looser peer, for information: iterate the lines of a file of the same payloads."""
    with open(path, "wb") as f:
        f.write((b"x" * (size - 1) + b"\n") * messages)
    n = 0
    start = time.perf_counter()
    with open(path, "rb") as f:
        for _line in f:
            n += 1
    seconds = time.perf_counter() - start
    os.unlink(path)
    return n, seconds


def _local_replay(directory: str, name: str, passes: int = 1) -> list[tuple[int, float]]:
    """``passes`` replays of ``name`` through one read-only ``Archive(directory)``, opened
    on the clock (the first pass also finds the stop position; later ones reuse it)."""
    from exon.archive import Archive

    runs = []
    start = time.perf_counter()
    with Archive(directory) as archive:
        for _ in range(passes):
            n = 0
            for _rec in archive.replay(name):
                n += 1
            runs.append((n, time.perf_counter() - start))
            start = time.perf_counter()
    return runs


def _best(runs: list[tuple[int, float]], expect: int, what: str) -> float:
    for n, _ in runs:
        if n != expect:
            raise RuntimeError(f"{what}: {n} records, want {expect}")
    return min(s for _, s in runs)


_ROUNDS_NOTE = ("exon, peer: the medians over the rounds (ratio: of those medians); "
                "exon_runs, peer_runs, ratio_runs: each round's figures (a ratio run "
                "compares one round's exon and peer)")


def _recording(size: int, round_: int) -> str:
    return f"bench{size}" if round_ == 0 else f"bench{size}_{round_}"


def _spread(count: int, rounds: list[tuple[float, float]]) -> dict[str, object]:
    """Each round's rates (``count`` per its seconds) and same-round ratios, for a line."""
    return {"runs": len(rounds),
            "exon_runs": [round(count / e, 3) for e, _ in rounds],
            "peer_runs": [round(count / p, 3) for _, p in rounds],
            "ratio_runs": [round(p / e, 3) for e, p in rounds]}


def run_archive_bench(*, sizes: tuple[int, ...] = (64, 1024), messages: int = 500_000,
                      replay: bool = True, transport: str = "ipc",
                      directory: str | None = None, runs: int = 3) -> list[dict[str, object]]:
    """Run the cases (see the module docstring) and return their JSON lines. ``directory``:
    where the archive and the peers' files go (default: a new temporary directory, removed
    afterwards). ``runs``: rounds of the record cases, each round running the archive and
    both peers one after the other (each round records into a recording of its own)."""
    from exon.archive import codec
    from exon.transport.aeron import MediaDriver
    from exon.transport.aeron.settings import fresh_driver_dir

    if transport not in ("ipc", "udp"):
        raise ValueError(f"transport must be 'ipc' or 'udp', not {transport!r}")
    if messages < 1:
        raise ValueError("messages must be >= 1")
    if runs < 1:
        raise ValueError("runs must be >= 1")
    udp = transport == "udp"
    record_sizes = list(dict.fromkeys(sizes))
    if replay and _REPLAY_SIZE not in record_sizes:
        record_sizes.append(_REPLAY_SIZE)  # recorded for the replay cases, not reported
    # round k records into bench{size} (k = 0: the recording the replay cases read) or
    # bench{size}_{k}
    names = {_recording(size, k): _FIRST_TAG + len(record_sizes) * k + i
             for k in range(runs) for i, size in enumerate(record_sizes)}
    # the idle-producers case (the first size asked for): round k records into idle{size}_{k}
    idle_size = sizes[0]
    names.update({f"idle{idle_size}_{k}": _FIRST_TAG + len(record_sizes) * runs + k
                  for k in range(runs)})
    work = tempfile.mkdtemp(prefix="exon-bench-archive-", dir=directory)
    archive_dir = os.path.join(work, "archive")
    driver_dir = fresh_driver_dir("exon-bench-archive")
    where = ("service in its own process, producer in another"
             + ("; every node on one media driver (IPC)" if not udp
                else "; each node with its own embedded driver (UDP over loopback)"))
    common = {"transport": transport, "messages": messages}
    page_reporting = free_page_reporting()
    lines = []
    try:
        with contextlib.ExitStack() as stack:
            if udp:
                driver = "-"
            else:
                stack.enter_context(MediaDriver.launch(dir=driver_dir, **_DRIVER))
                driver = driver_dir
            address = stack.enter_context(_service(driver, archive_dir, names))
            # rounds interleave the archive and its peers, so that a machine busy at one
            # moment slows them alike; each ratio run compares figures of one round
            reported = [size for size in record_sizes if size in sizes]
            # per round: archive, file peer, push/pull, bulk write seconds; bytes recorded;
            # the writer alone's seconds
            timings: dict[int, list[tuple[float, float, float, float, int, float]]] = {
                size: [] for size in reported}
            idle_rounds: list[tuple[float, float]] = []  # (with idle producers, alone)
            for k in range(runs):
                for size in record_sizes:
                    name = _recording(size, k)
                    os.sync()
                    seconds = _push(driver, messages, size, f"{address}/{names[name]}")
                    if size not in sizes:
                        continue
                    os.sync()
                    file_seconds = _file_write(os.path.join(work, f"peer-{size}.bin"),
                                               messages, size)
                    os.sync()
                    pp_seconds = _push_pull(driver, messages, size)
                    recorded = _recorded_bytes(archive_dir, name)
                    os.sync()
                    bulk_seconds = _bulk_write(os.path.join(work, f"bulk-{size}.bin"),
                                               recorded)
                    os.sync()
                    writer_seconds = _writer_only(os.path.join(work, f"writer-{size}"),
                                                  messages, size)
                    timings[size].append((seconds, file_seconds, pp_seconds, bulk_seconds,
                                          recorded, writer_seconds))
                    if size == idle_size:
                        os.sync()
                        idle_rounds.append((_push(driver, messages, size,
                                                  f"{address}/{names[f'idle{size}_{k}']}",
                                                  idle=_IDLE_PRODUCERS), seconds))
            for size in reported:
                rounds = timings[size]
                seconds = statistics.median(r[0] for r in rounds)
                file_seconds = statistics.median(r[1] for r in rounds)
                pp_seconds = statistics.median(r[2] for r in rounds)
                rate = messages / seconds
                mb = messages * size / 1e6
                lines.append(emit(
                    f"record_{size}", exon=rate, peer=messages / file_seconds,
                    peer_name="python buffered f.write loop", unit="msgs/s",
                    higher_is_better=True, goal=0.5, size=size, fsync="none",
                    mb_s=round(mb / seconds, 3), peer_mb_s=round(mb / file_seconds, 3),
                    recorded_bytes=rounds[0][4], free_page_reporting=page_reporting,
                    fs_ceiling=round(messages / statistics.median(r[3] for r in rounds), 3),
                    fs_ceiling_runs=[round(messages / r[3], 3) for r in rounds],
                    **_spread(messages, [(r[0], r[1]) for r in rounds]),
                    note=f"{where}; clock: first send to the cookie of the last message "
                         f"(cookies confirm in order: all durable); peer: one process "
                         f"writes the same payloads to one file, then flush+close; "
                         f"fs_ceiling: msgs/s if the recording's own bytes (recorded_bytes: "
                         f"headers, producer, padding) went to a file as fast as 1 MiB "
                         f"os.write calls from one ready buffer take them (for scale: how fast "
                         f"this file system took these bytes then; fresh page-cache "
                         f"pages cost more on some machines, a VM's above all); "
                         f"free_page_reporting: whether this machine is a VM that hands "
                         f"freed pages back to its host (null: no memory balloon), where "
                         f"a fresh page waits for the host at its first touch; "
                         f"{_ROUNDS_NOTE}",
                    **common))
                lines.append(emit(
                    f"record_vs_pushpull_{size}", exon=rate, peer=messages / pp_seconds,
                    peer_name="exon push/pull", unit="msgs/s", higher_is_better=True,
                    goal=0.8, size=size, mb_s=round(mb / seconds, 3),
                    peer_mb_s=round(mb / pp_seconds, 3),
                    fs_ceiling_ratio=round(pp_seconds / statistics.median(
                        r[3] for r in rounds), 3),
                    fs_ceiling_ratio_runs=[round(r[2] / r[3], 3) for r in rounds],
                    writer_ceiling=round(messages / statistics.median(r[5] for r in rounds),
                                         3),
                    writer_ceiling_ratio_runs=[round(r[2] / r[5], 3) for r in rounds],
                    free_page_reporting=page_reporting,
                    **_spread(messages, [(r[0], r[2]) for r in rounds]),
                    note=f"{where}; peer: the same producer (last message with a cookie) "
                         f"against a PULL process running a receive() loop, no archive, "
                         f"with the credits and largest message of the archive's ingest "
                         f"sockets; fs_ceiling_ratio: the ratio a recorder would score if "
                         f"it cost no more than the file system's fs_ceiling for its bytes "
                         f"(see record_{size}); writer_ceiling: msgs/s of the recorder's "
                         f"disk side alone (RecordingWriter.append_buffer over ready "
                         f"batches: framing, checksums, writes; no sockets), "
                         f"writer_ceiling_ratio_runs: the ratio it would score per round; "
                         f"{_ROUNDS_NOTE}",
                    **common))
            lines.append(emit(
                f"record_idle_producers_{idle_size}",
                exon=messages / statistics.median(r[0] for r in idle_rounds),
                peer=messages / statistics.median(r[1] for r in idle_rounds),
                peer_name="the same producer alone (record case)", unit="msgs/s",
                higher_is_better=True, size=idle_size, idle_producers=_IDLE_PRODUCERS,
                **_spread(messages, idle_rounds),
                note=f"{where}; exon: the record case's producer with {_IDLE_PRODUCERS} more "
                     f"PUSH sockets of its node linked to the same ingest first, sending "
                     f"nothing (credit granted is never taken back: their first windows stay "
                     f"reserved in the service's memory budget); peer: the record case's "
                     f"figures of the same rounds; {_ROUNDS_NOTE}",
                **common))
            if replay:
                name = f"bench{_REPLAY_SIZE}"
                # passes interleaved: a new Archive, then the segment file loop
                passes = [(_local_replay(archive_dir, name)[0],
                           _read_segment_bytes(archive_dir, name))
                          for _ in range(_LOCAL_REPEATS)]
                local = _best([p[0] for p in passes], messages, "local replay")
                peer = _best([p[1] for p in passes], messages, "segment file loop")
                reused = _best(_local_replay(archive_dir, name, _LOCAL_REPEATS + 1)[1:],
                               messages, "local replay")
                path = os.path.join(work, "peer-replay.bin")
                _write_length_prefixed(path, messages, _REPLAY_SIZE)
                payload_only = _best([_read_length_prefixed(path)
                                      for _ in range(_LOCAL_REPEATS)],
                                     messages, "length-prefixed file loop")
                os.unlink(path)
                lines_seconds = _best([_read_lines(os.path.join(work, "peer-lines.txt"),
                                                   messages, _REPLAY_SIZE)
                                       for _ in range(_LOCAL_REPEATS)], messages, "line loop")
                local_rate = messages / local
                lines.append(emit(
                    f"replay_local_{_REPLAY_SIZE}", exon=local_rate, peer=messages / peer,
                    peer_name="python loop over the same segment bytes: read header, "
                              "unpack, read rest, slice payload",
                    peer_payload_only=round(messages / payload_only, 3),
                    unit="records/s", higher_is_better=True, goal=2.0, goal_rate=1.5e6,
                    size=_REPLAY_SIZE, records=messages,
                    peer_lines=round(messages / lines_seconds, 3),
                    exon_reused_archive=round(messages / reused, 3),
                    native_decoder=codec.NATIVE,
                    **_spread(messages, [(p[0][1], p[1][1]) for p in passes]),
                    note=f"in the bench process, best of {_LOCAL_REPEATS} passes (each a "
                         f"pass of exon then one of the peer; *_runs: each pass): for rec in "
                         f"Archive(dir).replay(name): n += 1 over the record_{_REPLAY_SIZE} "
                         f"recording (page cache warm), a new read-only Archive each pass "
                         f"(it finds the stop position first); exon_reused_archive: later "
                         f"passes through one Archive (the stop position known); peer: the "
                         f"recording's segment files read record by record in a plain "
                         f"Python loop (f.read header, struct unpack, f.read rest, slice the "
                         f"payload; no checksum, no objects); peer_payload_only: the bare "
                         f"payloads as 4-byte length-prefixed records, f.read(4)+f.read(n); "
                         f"peer_lines: 'for line in f: n += 1' over {_REPLAY_SIZE}-byte "
                         f"lines (for information: lines are no binary record format)",
                    **common))
                n, remote = _remote_replay(driver, address, name)
                if n != messages:
                    raise RuntimeError(f"remote replay: {n} records, want {messages}")
                lines.append(emit(
                    f"replay_remote_{_REPLAY_SIZE}", exon=messages / remote, peer=local_rate,
                    peer_name="exon Archive.replay (local)", unit="records/s",
                    higher_is_better=True, size=_REPLAY_SIZE, records=messages,
                    note=f"{where.replace('producer', 'reader')}; for rec in "
                         f"ArchiveClient(addr).replay(name): n += 1, clock from the call to "
                         f"the last record; peer: the local replay figure (ratio = remote / "
                         f"local)", **common))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(driver_dir, ignore_errors=True)
    return lines


# ---- the workers ----------------------------------------------------------------------------

def _node(driver_dir: str) -> Node:
    from exon.middleware.node import Node

    return Node("127.0.0.1:0", driver_dir=None if driver_dir == "-" else driver_dir)


def _serve(driver_dir: str, directory: str, specs: list[str]) -> None:
    from exon.archive import ArchiveService

    ingest = {}
    fsync = "none"
    for spec in specs:
        name, _, value = spec.partition("=")
        if name == "--fsync":
            fsync = value
        else:
            ingest[name] = int(value)
    with _node(driver_dir) as node, \
            ArchiveService(directory, ingest=ingest, fsync=fsync, node=node) as service:
        print(service.address, flush=True)
        sys.stdin.read()  # until the bench closes our stdin
        for event in service.events:
            print(f"archive event: {event}", file=sys.stderr, flush=True)


def _pull(driver_dir: str, count: int) -> None:
    from exon.archive.service import DEFAULT_INGEST_MESSAGE, INGEST_CREDITS

    with _node(driver_dir) as node:
        # the credits and largest message of the archive's ingest sockets: the same window
        # on both sides (a window is the memory budget over the largest message)
        sock = node.socket("pull", tag=1, credits=INGEST_CREDITS,
                           max_message_size=DEFAULT_INGEST_MESSAGE)
        print(f"{node.address}/1", flush=True)
        recv = sock.receive
        for _ in range(count):
            recv(timeout=60)


def _push_worker(driver_dir: str, count: int, size: int, peer: str, idle: int = 0) -> None:
    with _node(driver_dir) as node:
        others = [node.socket("push") for _ in range(idle)]
        for other in others:  # linked first, and never send
            other.link(peer, timeout=10)
        sock = node.socket("push")
        sock.link(peer, timeout=10)
        print(timed_push(sock, count, size), flush=True)
        sock.close(timeout=10)


def timed_push(sock: Any, count: int, size: int, *, last_timeout: float = 60,
               cookie_timeout: float = 120) -> float:
    """Send ``count`` messages of ``size`` bytes, the last with a cookie: the seconds from
    the first send to that cookie (every message durable, in order)."""
    from exon.sockets.messages import Cookie

    payload = b"x" * size
    send = sock.send
    start = time.perf_counter()
    for _ in range(count - 1):
        send(payload)
    sock.send(payload, cookie="last", timeout=last_timeout)
    item = sock.receive(timeout=cookie_timeout)
    seconds = time.perf_counter() - start
    if not isinstance(item, Cookie) or item.value != "last":
        raise SystemExit(f"push: got {item!r} instead of the last cookie")
    return seconds


def _replay_worker(driver_dir: str, address: str, name: str) -> None:
    from exon.archive import ArchiveClient

    with _node(driver_dir) as node, ArchiveClient(address, node=node) as client:
        client.stop_position(name)  # links the control socket before the clock starts
        n = 0
        start = time.perf_counter()
        for _rec in client.replay(name):
            n += 1
        print(n, time.perf_counter() - start, flush=True)


def main(argv: list[str]) -> None:
    role, driver_dir = argv[0], argv[1]
    if role == "serve":
        _serve(driver_dir, argv[2], argv[3:])
    elif role == "pull":
        _pull(driver_dir, int(argv[2]))
    elif role == "push":
        _push_worker(driver_dir, int(argv[2]), int(argv[3]), argv[4],
                     int(argv[5]) if len(argv) > 5 else 0)
    elif role == "replay":
        _replay_worker(driver_dir, argv[2], argv[3])
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1)  # a stuck run: `kill -USR1 PID` dumps the stacks
    main(sys.argv[1:])
