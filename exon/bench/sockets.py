"""``exon bench sockets``: exon's sockets beside pyzmq's, in the same run.

* push/pull throughput (msgs/s), 64 B, 1 KiB, 64 KiB and 1 MiB (:data:`DEFAULT_SIZES`), one
  message per call, two processes; a large size sends fewer messages (:func:`messages_for`);
* req/rep round-trip latency p50 and p99 (µs), two processes.

``transport="ipc"`` (the default): exon's two processes are nodes of one media driver
(launched here, IPC between them); pyzmq's use ``ipc://``. ``transport="udp"``: each exon
process runs a node with its own embedded driver (UDP over loopback between them, the
cross-host path); pyzmq's use ``tcp://127.0.0.1``; the cases are named ``..._udp``. One
JSON line per case (:func:`exon.bench.report.emit`): ratio > 1 means exon is better.

With ``transport="udp"`` two more lines give the physical floor: exon's req/rep round trip
(p50, p99) against a bare C UDP ping-pong on loopback measured in the same run
(:func:`udp_floor`: two sockets, one blocking ``recv`` per side, no driver), cases
``req_rep_64B_p50_udp_floor`` / ``..._p99_udp_floor`` with ``peer_name="udp-floor"``.

``processes=True`` runs the shared driver of the ipc case as its own ``exon driver``
process (how a host driver is deployed) instead of inside the benchmark's process; the
nodes always run in worker processes of their own, one node per process.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from exon.bench.peers import Latency, Throughput, zmq_push_pull, zmq_req_rep, zmq_unavailable_reason
from exon.bench.report import emit
from exon.transport.aeron.settings import fresh_driver_dir

__all__ = ["DEFAULT_SIZES", "LARGE_RUN_BYTES", "exon_push_pull", "exon_req_rep", "messages_for",
           "run_sockets_bench", "udp_floor"]

#: the push/pull message sizes when none are given: small messages (per-message costs) and
#: large ones (copies and wake-ups per fragment: 64 KiB and 1 MiB span many MTUs)
DEFAULT_SIZES = (64, 1024, 64 * 1024, 1024 * 1024)
#: the bytes a push/pull run of one size sends at most (each side, exon and pyzmq alike):
#: 200,000 messages of 1 MiB would take minutes, 1,024 of them take about a second
LARGE_RUN_BYTES = 1 << 30
_MIN_LARGE_MESSAGES = 100  #: a run sends at least this many messages (when asked for more)


def messages_for(size: int, messages: int) -> int:
    """The messages of a push/pull run of ``size`` bytes: ``messages``, fewer for a size
    whose run would send more than :data:`LARGE_RUN_BYTES`, but not fewer than 100 (nor than
    ``messages`` when that is less)."""
    if size <= 0 or messages <= 0:
        raise ValueError(f"size and messages must be positive, not {size} and {messages}")
    return min(messages, max(_MIN_LARGE_MESSAGES, LARGE_RUN_BYTES // size))

#: DriverSettings overrides for MediaDriver.launch(**_DRIVER)
_DRIVER: dict[str, Any] = {
    "threading_mode": "SHARED",
    "publication_linger_timeout_ns": 0,
}


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "exon.bench.sockets_worker", *args],
                            stdout=subprocess.PIPE, text=True)


def _finish(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@contextmanager
def _worker_pair(
    server: tuple[str, ...], client: tuple[str, ...]
) -> Iterator[tuple[subprocess.Popen[str], subprocess.Popen[str]]]:
    """The server worker, then the client worker with the server's peer address (the
    server's first line) as its last argument; whichever still runs is killed on the way out."""
    first = _worker(*server)
    second = None
    try:
        assert first.stdout is not None
        peer = first.stdout.readline().strip()
        second = _worker(*client, peer)
        yield first, second
    finally:
        _finish(*(p for p in (second, first) if p is not None))


def exon_push_pull(driver_dir: str, size: int, messages: int, credits: int) -> Throughput:
    with _worker_pair(("pull", driver_dir, str(messages), str(credits)),
                      ("push", driver_dir, str(messages), str(size))) as (pull, push):
        out, _ = pull.communicate(timeout=600)
        push.communicate(timeout=120)
        return Throughput(messages, float(out.strip().splitlines()[-1]))


def exon_req_rep(driver_dir: str, size: int, round_trips: int, credits: int) -> Latency:
    with _worker_pair(("rep", driver_dir, str(round_trips), str(credits)),
                      ("req", driver_dir, str(round_trips), str(size))) as (rep, req):
        out, _ = req.communicate(timeout=600)
        rep.communicate(timeout=60)
        return Latency(tuple(float(x) for x in out.split()))


def udp_floor(size: int, round_trips: int, timeout: float = 5.0) -> Latency:
    """Round trips (us) of a bare C UDP ping-pong on 127.0.0.1 (exon_bench_udp_floor)."""
    from exon.native.bench_loops import check, ffi, lib

    rtt = ffi.new("int64_t[]", round_trips)
    done = check(lib.exon_bench_udp_floor(size, round_trips, int(timeout * 1e9), rtt),
                 "udp floor ping-pong")
    return Latency(tuple(rtt[i] / 1000.0 for i in range(done)))


@contextmanager
def _driver_process(directory: str) -> Iterator[str]:
    """``exon driver --dir DIRECTORY`` as a child process (its first line: the dir)."""
    args = [sys.executable, "-m", "exon.transport.aeron.driver_main", "--dir", directory]
    for key, value in _DRIVER.items():
        args += ["--set", f"{key}={value}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        if not proc.stdout.readline().strip():
            raise RuntimeError(f"exon driver did not start in {directory}")
        yield directory
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def run_sockets_bench(*, sizes: tuple[int, ...] = DEFAULT_SIZES, messages: int = 200_000,
                      round_trips: int = 10_000, credits: int | None = None,
                      with_zmq: bool = True, transport: str = "ipc",
                      processes: bool = False) -> list[dict[str, object]]:
    from exon.transport.aeron import MediaDriver

    if credits is None:
        from exon.core import LinkSettings

        credits = LinkSettings().initial_credits  # the default a user gets
    reason = zmq_unavailable_reason() if with_zmq else "disabled"
    directory = fresh_driver_dir("exon-bench-sockets")
    if transport not in ("ipc", "udp"):
        raise ValueError(f"transport must be 'ipc' or 'udp', not {transport!r}")
    udp = transport == "udp"
    suffix, zmq_transport = ("_udp", "tcp") if udp else ("", "ipc")
    extra: dict[str, object] = ({"exon_transport": "udp", "peer_transport": "tcp"} if udp
                                else {})
    extra["processes"] = processes
    lines = []
    try:
        with contextlib.ExitStack() as stack:
            if udp:
                target = "-"  # each worker's node launches its own driver
            elif processes:
                target = stack.enter_context(_driver_process(directory))
            else:
                stack.enter_context(MediaDriver.launch(dir=directory, **_DRIVER))
                target = directory
            for size in sizes:
                count = messages_for(size, messages)
                ex = exon_push_pull(target, size, count, credits)
                peer = (zmq_push_pull(size, count, zmq_transport) if reason is None
                        else None)
                lines.append(emit(f"push_pull_{size}B{suffix}", exon=ex.rate,
                                  peer=None if peer is None else peer.rate,
                                  peer_name="pyzmq", unit="msgs/s", higher_is_better=True,
                                  messages=count, credits=credits, **extra))
            size = 64
            lat = exon_req_rep(target, size, round_trips, credits)
            zlat = zmq_req_rep(size, round_trips, zmq_transport) if reason is None else None
            for p in (50, 99):
                lines.append(emit(f"req_rep_{size}B_p{p}{suffix}", exon=lat.percentile(p),
                                  peer=None if zlat is None else zlat.percentile(p),
                                  peer_name="pyzmq", unit="us", higher_is_better=False,
                                  round_trips=round_trips, **extra))
            if udp:
                floor = udp_floor(size, round_trips)
                for p in (50, 99):
                    lines.append(emit(f"req_rep_{size}B_p{p}_udp_floor", exon=lat.percentile(p),
                                      peer=floor.percentile(p), peer_name="udp-floor",
                                      unit="us", higher_is_better=False,
                                      round_trips=round_trips, **extra))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return lines
