"""``exon bench archive --replicated``: what replication costs the archive (issue 27,
"Speed"), measured side by side in one run.

Every service and producer is a worker process of its own (``python -m
exon.bench.archive_replicated ROLE ...``), each node with its own embedded driver: UDP
over loopback between them. One JSON line per case (:func:`exon.bench.report.emit`; ratio
> 1 means exon is better):

* ``replicated_record_{size}``: a producer PUSHes N messages of ``size`` bytes to a
  primary with ``--min-insync 2`` and one replica following it; the clock runs from the
  first send until the last message's cookie is back (the primary confirms in order, so
  every message is then durable on both). Peer: the same against a primary with
  ``--min-insync 1`` and the same replica following (the replica copies in both: the peer
  pays for the copy too, not for the wait). Goal: ratio >= 0.5. ``lag_p50``/``lag_p99``:
  the replica's lag in bytes (the primary's durable end minus what the replica
  acknowledged), sampled by the primary every 5 ms while the producer runs (min-insync 2).
* ``replicated_catchup``: a replica started empty against the primary of the last
  ``1024``-byte round (its recording whole, N messages), the clock from its start until it
  holds the primary's stop position. Peer: ``Archive(dir).replay(name)`` of the same
  recording in the bench process, as bytes/s. Goal: ratio >= 0.5.

Worker roles (``python -m exon.bench.archive_replicated ROLE ...``)::

    primary DIR MIN_INSYNC NAME=TAG   print the address; serve until stdin closes; then
                                      print "lag P50 P99" (bytes)
    replica DIR PRIMARY               print the address; serve until stdin closes
    catchup DIR PRIMARY ID=STOP...    follow PRIMARY until it holds every STOP; print seconds
    push N SIZE PEER                  link, send N (the last with a cookie), wait for the
                                      cookie; print seconds
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from exon.bench.report import emit

__all__ = ["run_replicated_bench"]

_TAG = 10
_SAMPLE = 0.005  # seconds between lag samples


def _worker(*args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "exon.bench.archive_replicated", *args],
                            stdout=subprocess.PIPE, stdin=stdin, text=True)


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.wait(10)
        raise RuntimeError(f"bench worker {proc.args!r} exited ({proc.returncode}) early")
    return line


def _end(proc: subprocess.Popen[str]) -> str:
    """Close the worker's stdin (it stops cleanly) and return the rest of its output."""
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait(60)
        return out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@contextmanager
def _pair(work: str, min_insync: int, name: str) -> Iterator[tuple[str, list[str]]]:
    """A primary and a replica following it: yields the primary's address and, once the
    pair is stopped, the primary's last output lines (its lag figures)."""
    primary = _worker("primary", os.path.join(work, f"p-{name}"), str(min_insync),
                      f"{name}={_TAG}", stdin=subprocess.PIPE)
    replica = None
    tail: list[str] = []
    try:
        address = _line(primary)
        replica = _worker("replica", os.path.join(work, f"r-{name}"), address,
                          stdin=subprocess.PIPE)
        _line(replica)
        yield address, tail
    finally:
        tail.extend(_end(primary).split("\n"))
        if replica is not None:
            _end(replica)


def _push(messages: int, size: int, peer: str) -> float:
    proc = _worker("push", str(messages), str(size), peer)
    out, _ = proc.communicate(timeout=900)
    if proc.returncode:
        raise RuntimeError(f"push worker exited with {proc.returncode}")
    return float(out.strip().splitlines()[-1])


def run_replicated_bench(*, sizes: tuple[int, ...] = (64, 1024), messages: int = 200_000,
                         runs: int = 3, directory: str | None = None) -> list[dict[str, object]]:
    """Run the cases (see the module docstring); return their JSON lines."""
    from exon.archive import Archive

    if messages < 1 or runs < 1:
        raise ValueError("messages and runs must be >= 1")
    work = tempfile.mkdtemp(prefix="exon-bench-replicated-", dir=directory)
    lines = []
    common = {"transport": "udp", "messages": messages,
              "note_machine": "figures of one run; compare the ratios"}
    try:
        last = ""
        for size in dict.fromkeys(sizes):
            rounds: list[tuple[float, float]] = []
            lags: list[tuple[float, float]] = []
            for k in range(runs):
                seconds = {}
                for min_insync in (2, 1):
                    name = f"r{size}_{min_insync}_{k}"
                    with _pair(work, min_insync, name) as (address, tail):
                        os.sync()
                        seconds[min_insync] = _push(messages, size, f"{address}/{_TAG}")
                    shutil.rmtree(os.path.join(work, f"r-{name}"), ignore_errors=True)
                    if min_insync == 2:
                        lag = next((t.split() for t in tail if t.startswith("lag ")), None)
                        if lag is not None:
                            lags.append((float(lag[1]), float(lag[2])))
                        if last:  # only the newest min-insync-2 primary is kept (catch-up)
                            shutil.rmtree(os.path.join(work, f"p-{last}"), ignore_errors=True)
                        last = name
                    else:
                        shutil.rmtree(os.path.join(work, f"p-{name}"), ignore_errors=True)
                rounds.append((messages / seconds[2], messages / seconds[1]))
            exon_rate = statistics.median(r[0] for r in rounds)
            peer_rate = statistics.median(r[1] for r in rounds)
            lines.append(emit(
                f"replicated_record_{size}", exon=exon_rate, peer=peer_rate,
                peer_name="min-insync 1 (a replica following)", unit="msgs/s",
                higher_is_better=True, size=size,
                exon_runs=[round(r[0]) for r in rounds],
                peer_runs=[round(r[1]) for r in rounds],
                ratio_runs=[round(r[0] / r[1], 3) for r in rounds],
                lag_p50=statistics.median(lag[0] for lag in lags) if lags else None,
                lag_p99=max(lag[1] for lag in lags) if lags else None,
                note="a producer to a primary with --min-insync 2 and a replica following, "
                     "clock until the last cookie; peer: --min-insync 1, the replica "
                     "following too; lag in bytes, sampled every 5 ms by the primary; each "
                     "service and the producer a process of its own, UDP over loopback",
                **common))
        # catch-up: a new replica of the primary of the last min-insync-2 round
        pdir = os.path.join(work, f"p-{last}")
        with Archive(pdir) as ar:
            stops = {r.id: r.stop_position for r in ar.recordings()}
            total = sum(stops.values())
            os.sync()
            start = time.perf_counter()
            n = 0
            for rec in ar.replay(last):
                n += len(rec.payload)
            local = time.perf_counter() - start
        primary = _worker("primary", pdir, "1", f"{last}={_TAG}", stdin=subprocess.PIPE)
        try:
            address = _line(primary)
            proc = _worker("catchup", os.path.join(work, "catchup"), address,
                           *(f"{rid}={stop}" for rid, stop in stops.items()))
            out, _ = proc.communicate(timeout=900)
            if proc.returncode:
                raise RuntimeError(f"catchup worker exited with {proc.returncode}")
            catchup = float(out.strip().splitlines()[-1])
        finally:
            _end(primary)
        lines.append(emit(
            "replicated_catchup", exon=total / catchup, peer=total / local,
            peer_name="exon Archive.replay (local)", unit="bytes/s", higher_is_better=True,
            bytes=total, payload_bytes=n,
            note="a replica started empty copies the primary's recording (records as on "
                 "disk, over UDP loopback, synced under fsync none, acknowledged); clock "
                 "until it holds the primary's stop; peer: a local replay of the same "
                 "recording in the bench process",
            **common))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lines


# ---- the workers ----------------------------------------------------------------------------

def _primary(directory: str, min_insync: int, spec: str) -> None:
    from exon.archive import ArchiveService

    name, _, tag = spec.partition("=")
    with ArchiveService(directory, ingest={name: int(tag)}, min_insync=min_insync,
                        segment_length=1 << 30) as service:
        print(service.address, flush=True)
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(_SAMPLE):
                members = service.replication_status()["members"]
                if members and service.archive.stop_position(name) > 0:
                    samples.append(int(members[0]["lag"]))

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        sys.stdin.read()
        done.set()
        t.join()
        if samples:
            samples.sort()
            print(f"lag {samples[len(samples) // 2]} {samples[int(len(samples) * 0.99)]}",
                  flush=True)


def _replica(directory: str, primary: str) -> None:
    from exon.archive import ArchiveService

    with ArchiveService(directory, replica_of=primary) as service:
        print(service.address, flush=True)
        sys.stdin.read()


def _catchup(directory: str, primary: str, specs: list[str]) -> None:
    from exon.archive import ArchiveService
    from exon.archive.errors import RecordingNotFound

    stops = {int(a): int(b) for a, _, b in (s.partition("=") for s in specs)}
    start = time.perf_counter()
    with ArchiveService(directory, replica_of=primary) as service:
        def held() -> bool:
            try:
                return all(service.archive.stop_position(rid) >= stop
                           for rid, stop in stops.items())
            except RecordingNotFound:
                return False
        while not held():
            time.sleep(0.002)
        print(time.perf_counter() - start, flush=True)


def _push_worker(count: int, size: int, peer: str) -> None:
    import exon
    from exon.bench.archive import timed_push

    with exon.Node(endpoint="127.0.0.1:0") as node:
        sock = node.socket("push")
        sock.link(peer, timeout=10)
        print(timed_push(sock, count, size, last_timeout=120, cookie_timeout=300), flush=True)
        sock.close(timeout=10)


def main(argv: list[str]) -> None:
    role = argv[0]
    if role == "primary":
        _primary(argv[1], int(argv[2]), argv[3])
    elif role == "replica":
        _replica(argv[1], argv[2])
    elif role == "catchup":
        _catchup(argv[1], argv[2], argv[3:])
    elif role == "push":
        _push_worker(int(argv[1]), int(argv[2]), argv[3])
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
