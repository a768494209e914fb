"""``exon bench archive --vs aeron``: exon's archive beside the real Aeron Archive (issue 30).

Aeron 1.15.1's own samples, run through ``shared/tools/aeron-peer.sh`` (Java), are the peer:

* ``io.aeron.samples.archive.EmbeddedRecordingThroughput``: a media driver and an archive
  in one JVM; an exclusive publication on ``aeron:ipc`` is recorded, the clock running from
  the first offer until the archive's recording position reaches the end.
* ``io.aeron.samples.archive.EmbeddedReplayThroughput``: records the same way (untimed),
  then replays the recording over ``aeron:ipc`` into a subscription, clock including the
  replay request and its connection.

Both read ``aeron.sample.messageLength``, ``aeron.sample.messages`` and
``aeron.sample.channel``; the archive directory goes next to exon's (one file system), and
``aeron.archive.file.sync.level`` is 0 (the page cache, exon's ``fsync="none"``) or 1 for
``fsync="data"`` (the segment file's data forced per write; exon: ``fdatasync`` per batch).
Each JVM runs its sample ``passes`` times (it asks "Execute again?"; the bench answers),
the first a warm-up for the JIT: ``peer`` is the last pass, ``peer_cold`` the first.

exon's side, the same sizes and counts (:mod:`exon.bench.archive`'s pieces):

* ``record_{size}``: the archive service in its own process (``fsync`` as asked), a
  producer worker PUSHes the messages, the last with a cookie; clock from the first send to
  that cookie (every message durable per the policy).
* ``replay_local_{size}``: ``for rec in Archive(dir).replay(name): n += 1`` over that
  recording in the bench process (a new read-only ``Archive`` on the clock): replay into
  Python, where Aeron's replays into Java.

Rounds alternate: round ``k`` runs exon then Aeron for even ``k``, Aeron then exon for odd,
each timed phase after an ``os.sync()``. One JSON line per case (``exon``, ``peer``: the
medians of the rounds; ``*_runs``: each round; ratio > 1: exon faster). Without java the
bench prints one line saying why and runs nothing.

On a shared machine the rates say as much about the other loads as about the archives, so
each line also gives the CPU time each side spent per message (``exon_cpu_ns``,
``peer_cpu_ns``, medians; ``cpu_ratio`` > 1: exon spends less), from ``/proc`` and
``os.times()`` (Linux): exon's record counts the producer worker, the archive service and
the bench process (which hosts the media driver); its replay the bench process; Aeron's the
whole JVM over the measured pass (driver, archive, publisher or subscriber, JIT and GC).
Waiting counts on both sides: Aeron's agents back off by spinning and yielding before they
park, and exon's producer spins on its send door while it has no credit (``--fsync data``
above all), so read the CPU figures as what each side took from a shared machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from exon.bench.archive import _DRIVER, _FIRST_TAG, _local_replay, _push, _service_process
from exon.bench.peers import _peer_env, aeron_peer_script, aeron_peer_unavailable_reason
from exon.bench.report import emit

__all__ = ["aeron_archive_sample", "run_archive_vs_aeron"]

RECORDING_SAMPLE = "io.aeron.samples.archive.EmbeddedRecordingThroughput"
REPLAY_SAMPLE = "io.aeron.samples.archive.EmbeddedReplayThroughput"
#: "Recorded 91.55 MB @ 148.38 MB/s - 1,620,000 msg/sec - 64 byte payload + 32 byte header"
_RESULT_LINE = re.compile(r"(?:Recorded|Replayed) [\d.]+ MB @ [\d.]+ MB/s - ([\d,]+) msg/sec")
_SYNC_LEVEL = {"none": 0, "data": 1}
_PEER_PASSES = 2  # per JVM: a warm-up pass, then the measured one
_PEER_ATTEMPTS = 3  # JVMs run for one figure at most (see aeron_archive_sample)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process ``pid`` has used (all its threads) so far; None
    where ``/proc`` cannot tell (not Linux, the process gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _own_cpu_seconds() -> tuple[float, float]:
    """(this process's CPU seconds, its reaped children's). Its own from the process CPU
    clock (nanoseconds): ``os.times`` counts in clock ticks (10 ms), longer than a short
    local replay takes, which then read as no CPU at all."""
    t = os.times()
    return time.process_time(), t.children_user + t.children_system


def aeron_archive_sample(sample: str, size: int, messages: int, archive_dir: str, *,
                         fsync: str = "none", passes: int = _PEER_PASSES,
                         timeout: float = 600,
                         attempts: int = _PEER_ATTEMPTS) -> list[tuple[float, float | None]]:
    """(msgs/s, the JVM's CPU seconds) of each of ``passes`` passes of an Aeron Archive
    sample in one JVM (the archive in ``archive_dir``, deleted on start; the first pass's
    CPU includes the JVM's start). A JVM that fails is run again, ``attempts`` times in
    all: 1.15.1's EmbeddedRecordingThroughput races, now and then reading the recording's
    counter before the archive made it ("Counter id -1 out of range"). Raises RuntimeError
    when every attempt fails."""
    for attempt in range(attempts):
        try:
            return _sample_once(sample, size, messages, archive_dir, fsync=fsync,
                                passes=passes, timeout=timeout)
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    raise ValueError("attempts must be >= 1")


def _sample_once(sample: str, size: int, messages: int, archive_dir: str, *, fsync: str,
                 passes: int, timeout: float) -> list[tuple[float, float | None]]:
    script = aeron_peer_script()
    if script is None:
        raise RuntimeError("aeron-peer.sh not found (set EXON_AERON_PEER)")
    props = [f"-Daeron.sample.messageLength={size}", f"-Daeron.sample.messages={messages}",
             "-Daeron.sample.channel=aeron:ipc", f"-Daeron.archive.dir={archive_dir}",
             f"-Daeron.archive.file.sync.level={_SYNC_LEVEL[fsync]}"]
    env = _peer_env(f"archive-{os.getpid()}")
    rates: list[tuple[float, float | None]] = []
    last_cpu: float | None = 0.0
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen([str(script), "java", *props, sample], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None
            assert proc.stdout is not None
            for line in proc.stdout:
                m = _RESULT_LINE.search(line)  # after the last "Execute again?"
                if m is None:
                    continue
                # aeron-peer.sh execs java: the process is the JVM
                cpu = process_cpu_seconds(proc.pid)
                rates.append((float(m.group(1).replace(",", "")),
                              None if cpu is None or last_cpu is None else cpu - last_cpu))
                last_cpu = cpu
                # the sample asks "Execute again? (y/n)" after each pass
                proc.stdin.write("y\n" if len(rates) < passes else "n\n")
                proc.stdin.flush()
                if len(rates) == passes:
                    break
            proc.stdin.close()
            proc.wait(60)
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            shutil.rmtree(env["AERON_DIR"], ignore_errors=True)
            shutil.rmtree(archive_dir, ignore_errors=True)
        if len(rates) < passes:
            errors.seek(0)
            raise RuntimeError(f"{sample} printed {len(rates)} of {passes} results "
                               f"(exit {proc.returncode}): {errors.read()[-800:]}")
    return rates


@dataclass(frozen=True, slots=True, kw_only=True)
class _Side:
    """One side's figures in one round."""

    #: messages per second
    rate: float
    #: CPU seconds per message, None where unknown
    cpu: float | None
    #: exon's record: that CPU by process (producer, service, bench process with the
    #: driver), seconds per message
    parts: dict[str, float] | None = None


def _per_message(cpu: float | None, messages: int) -> float | None:
    return None if cpu is None else cpu / messages


def _cpu_median(sides: list[_Side]) -> float | None:
    known = [s.cpu for s in sides if s.cpu is not None]
    return statistics.median(known) * 1e9 if len(known) == len(sides) else None


def _median_line(case: str, size: int, messages: int, rounds: list[tuple[_Side, _Side]],
                 peer_cold: list[float], *, peer_name: str, note: str,
                 extra: dict[str, Any]) -> dict[str, Any]:
    """One case's line from its rounds' (exon, peer) figures."""
    exon_cpu = _cpu_median([e for e, _ in rounds])
    peer_cpu = _cpu_median([p for _, p in rounds])
    parts = [e.parts for e, _ in rounds if e.parts is not None]
    if len(parts) == len(rounds):
        extra = {**extra, "exon_cpu_ns_parts": {
            k: round(statistics.median(p[k] for p in parts) * 1e9, 1) for k in parts[0]}}
    return emit(
        case, exon=statistics.median(e.rate for e, _ in rounds),
        peer=statistics.median(p.rate for _, p in rounds), peer_name=peer_name,
        unit="msgs/s", higher_is_better=True, goal=1.0, size=size, messages=messages,
        runs=len(rounds), exon_runs=[round(e.rate, 3) for e, _ in rounds],
        peer_runs=[round(p.rate, 3) for _, p in rounds],
        ratio_runs=[round(e.rate / p.rate, 3) for e, p in rounds],
        peer_cold=round(statistics.median(peer_cold), 3),
        exon_cpu_ns=None if exon_cpu is None else round(exon_cpu, 1),
        peer_cpu_ns=None if peer_cpu is None else round(peer_cpu, 1),
        cpu_ratio=None if not (exon_cpu and peer_cpu) else round(peer_cpu / exon_cpu, 3),
        note=note + "; exon, peer: medians of the rounds, *_runs: each round (rounds "
                    "alternate which side runs first); peer: the JVM's last pass, "
                    "peer_cold: its first (JIT warm-up); exon_cpu_ns, peer_cpu_ns: CPU "
                    "time per message (medians), cpu_ratio = peer_cpu_ns / exon_cpu_ns; "
                    "exon_cpu_ns_parts: exon's record by process (the producer worker, the "
                    "archive service, the bench process hosting the media driver)",
        **extra)


def run_archive_vs_aeron(*, sizes: tuple[int, ...] = (64, 1024), messages: int = 1_000_000,
                         runs: int = 3, replay: bool = True, fsync: str = "none",
                         directory: str | None = None) -> list[dict[str, Any]]:
    """Run the cases (see the module docstring) and return their JSON lines; one line
    saying why when the Aeron peer cannot run here."""
    from exon.transport.aeron import MediaDriver
    from exon.transport.aeron.settings import fresh_driver_dir

    if messages < 1 or runs < 1:
        raise ValueError("messages and runs must be >= 1")
    if fsync not in _SYNC_LEVEL:
        raise ValueError(f"fsync must be one of {sorted(_SYNC_LEVEL)}, not {fsync!r}")
    reason = aeron_peer_unavailable_reason()
    if reason is not None:
        return [emit("archive_vs_aeron", exon=None, peer=None, peer_name="Aeron Archive 1.15.1",
                     unit="msgs/s", higher_is_better=True, skipped=reason,
                     note=f"skipped: {reason}")]
    sizes = tuple(dict.fromkeys(sizes))
    names = {f"vs{size}_{k}": _FIRST_TAG + len(sizes) * k + i
             for k in range(runs) for i, size in enumerate(sizes)}
    work = tempfile.mkdtemp(prefix="exon-bench-vs-aeron-", dir=directory)
    archive_dir = os.path.join(work, "archive")
    peer_dir = os.path.join(work, "aeron-archive")
    driver_dir = fresh_driver_dir("exon-bench-vs-aeron")
    record: dict[int, list[tuple[_Side, _Side]]] = {size: [] for size in sizes}
    replayed: dict[int, list[tuple[_Side, _Side]]] = {size: [] for size in sizes}
    cold: dict[tuple[str, int], list[float]] = {}
    lines = []
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(MediaDriver.launch(dir=driver_dir, **_DRIVER))
            address, service_pid = stack.enter_context(
                _service_process(driver_dir, archive_dir, names, fsync=fsync))
            for k in range(runs):
                for size in sizes:
                    name = f"vs{size}_{k}"

                    def exon_record(size: int = size, name: str = name) -> _Side:
                        os.sync()
                        own, children = _own_cpu_seconds()
                        service = process_cpu_seconds(service_pid)
                        seconds = _push(driver_dir, messages, size, f"{address}/{names[name]}")
                        own_after, children_after = _own_cpu_seconds()
                        service_after = process_cpu_seconds(service_pid)
                        if service is None or service_after is None:
                            return _Side(rate=messages / seconds, cpu=None)
                        parts = {"producer": (children_after - children) / messages,
                                 "service": (service_after - service) / messages,
                                 "bench_with_driver": (own_after - own) / messages}
                        return _Side(rate=messages / seconds, cpu=sum(parts.values()),
                                     parts=parts)

                    def exon_replay(name: str = name) -> _Side:
                        os.sync()
                        own, _ = _own_cpu_seconds()
                        n, seconds = _local_replay(archive_dir, name)[0]
                        cpu = _own_cpu_seconds()[0] - own
                        if n != messages:
                            raise RuntimeError(f"local replay: {n} records, want {messages}")
                        return _Side(rate=messages / seconds, cpu=_per_message(cpu, messages))

                    def peer(sample: str, size: int = size) -> _Side:
                        os.sync()
                        passes = aeron_archive_sample(sample, size, messages, peer_dir,
                                                      fsync=fsync)
                        cold.setdefault((sample, size), []).append(passes[0][0])
                        rate, cpu = passes[-1]
                        return _Side(rate=rate, cpu=_per_message(cpu, messages))

                    if k % 2 == 0:
                        e = exon_record()
                        record[size].append((e, peer(RECORDING_SAMPLE)))
                    else:
                        p = peer(RECORDING_SAMPLE)
                        record[size].append((exon_record(), p))
                    if not replay:
                        continue
                    if k % 2 == 0:
                        e = exon_replay()
                        replayed[size].append((e, peer(REPLAY_SAMPLE)))
                    else:
                        p = peer(REPLAY_SAMPLE)
                        replayed[size].append((exon_replay(), p))
        extra = {"fsync": fsync, "aeron_file_sync_level": _SYNC_LEVEL[fsync]}
        for size in sizes:
            lines.append(_median_line(
                f"record_{size}" + ("" if fsync == "none" else f"_fsync_{fsync}"), size,
                messages, record[size], cold[(RECORDING_SAMPLE, size)],
                peer_name=f"Aeron Archive 1.15.1 {RECORDING_SAMPLE.rsplit('.', 1)[1]} "
                          f"(aeron:ipc)",
                note="exon: archive service in its own process, a PUSH producer in another, "
                     "one media driver (IPC); clock from the first send to the last "
                     "message's cookie; peer: driver + archive + publisher in one JVM, clock "
                     "from the first offer to the recorded position reaching the end",
                extra=extra))
            if replay:
                lines.append(_median_line(
                    f"replay_local_{size}", size, messages, replayed[size],
                    cold[(REPLAY_SAMPLE, size)],
                    peer_name=f"Aeron Archive 1.15.1 {REPLAY_SAMPLE.rsplit('.', 1)[1]} "
                              f"(aeron:ipc)",
                    note="exon: for rec in Archive(dir).replay(name): n += 1 in the bench "
                         "process over the round's record_ recording (a new read-only "
                         "Archive on the clock); peer: a replay over aeron:ipc into a "
                         "Java subscription, clock including the replay request",
                    extra=extra))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(driver_dir, ignore_errors=True)
    return lines
