"""The peers exon is measured against, run side by side in the same benchmark run.

- pyzmq PUSH/PULL throughput and REQ/REP latency over ``ipc://`` (two processes, one message
  per Python call, as a Python team would use it).
- The real Aeron 1.15.1 Java driver's samples, through ``shared/tools/aeron-peer.sh``
  (``EmbeddedIpcThroughput``, ``EmbeddedThroughput``, ``EmbeddedPingPong``).

Every function returns plain numbers; :mod:`exon.bench.report` turns them into JSON lines.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

# ---- locating the real Aeron peer -----------------------------------------------------


def aeron_peer_script() -> pathlib.Path | None:
    """``aeron-peer.sh`` from ``EXON_AERON_PEER`` or ``<repo>/../shared/tools``; None if absent."""
    env = os.environ.get("EXON_AERON_PEER")
    candidates = [pathlib.Path(env)] if env else []
    repo = pathlib.Path(__file__).resolve().parents[2]
    candidates.append(repo.parent / "shared" / "tools" / "aeron-peer.sh")
    for path in candidates:
        if path.is_file():
            return path
    return None


def aeron_peer_unavailable_reason() -> str | None:
    """Why the real Aeron peer cannot run here (None when it can)."""
    if aeron_peer_script() is None:
        return "shared/tools/aeron-peer.sh not found (set EXON_AERON_PEER)"
    if shutil.which(os.environ.get("JAVA", "java")) is None:
        return "java is not installed"
    if shutil.which("javac") is None:
        return "javac is not installed (needed once to patch Aeron 1.15.1 for this JDK)"
    return None


def _peer_env(tag: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("AERON_DIR", f"/dev/shm/aeron-exon-bench-{os.getpid()}-{tag}")
    return env


def _run_peer(args: list[str], tag: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``aeron-peer.sh ARGS`` with its own Aeron dir, removed afterwards."""
    env = _peer_env(tag)
    try:
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout,
                              check=False)
    finally:
        if "EXON_KEEP_AERON_DIR" not in os.environ:
            shutil.rmtree(env["AERON_DIR"], ignore_errors=True)


_RATE_LINE = re.compile(r"Duration (\d+)ms - ([\d,]+) messages")
_THROUGHPUT_LINE = re.compile(r"^([\d.]+e[+-]\d+|[\d.]+) msgs/sec")


def java_ipc_throughput(size: int, seconds: int = 8, warmup_samples: int = 2) -> float:
    """Median msgs/s of Aeron's EmbeddedIpcThroughput (driver in-process, aeron:ipc)."""
    script = aeron_peer_script()
    assert script is not None
    out = _run_peer([str(script), "embedded-ipc-throughput", str(size), str(seconds)], "ipc",
                    timeout=seconds + 120)
    rates = [
        int(m.group(2).replace(",", "")) * 1000.0 / int(m.group(1))
        for m in _RATE_LINE.finditer(out.stdout)
    ]
    # the last line is a partial interval cut by the stop signal
    samples = rates[warmup_samples:-1] or rates
    if not samples:
        raise RuntimeError(f"no rate lines from EmbeddedIpcThroughput: {out.stderr[-500:]}")
    return statistics.median(samples)


def java_udp_throughput(size: int, messages: int, channel: str, warmup_samples: int = 2) -> float:
    """Median msgs/s of Aeron's EmbeddedThroughput over UDP ``channel``."""
    script = aeron_peer_script()
    assert script is not None
    out = _run_peer([str(script), "embedded-throughput", str(size), str(messages), channel],
                    "udp", timeout=600)
    rates = [float(m.group(1)) for line in out.stdout.splitlines()
             if (m := _THROUGHPUT_LINE.match(line.strip()))]
    samples = rates[warmup_samples:] or rates
    if not samples:
        raise RuntimeError(f"no rate lines from EmbeddedThroughput: {out.stderr[-500:]}")
    return statistics.median(samples)


# ---- pyzmq ----------------------------------------------------------------------------------


def zmq_unavailable_reason() -> str | None:
    try:
        import zmq  # noqa: F401
    except ImportError:
        return "pyzmq is not installed (pip install pyzmq)"
    return None


@dataclass(frozen=True)
class Throughput:
    messages: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Latency:
    samples_us: tuple[float, ...]

    def percentile(self, p: float) -> float:
        ordered = sorted(self.samples_us)
        if not ordered:
            return float("nan")
        k = min(len(ordered) - 1, max(0, round(p / 100.0 * (len(ordered) - 1))))
        return ordered[k]


def _python() -> str:
    return sys.executable


def _free_tcp_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _zmq_workers(
    name: str, first: tuple[str, ...], second: tuple[str, ...], transport: str = "ipc"
) -> Iterator[tuple[subprocess.Popen[str], subprocess.Popen[str]]]:
    """Two ``exon.bench.zmq_worker`` processes, each ``(ROLE, *ARGS)``, on a fresh
    ``ipc://TMP/NAME`` address, or ``tcp://127.0.0.1:PORT`` for ``transport="tcp"``
    (``zmq_worker ROLE ADDRESS ARGS...``); whichever still runs is killed on the way out."""
    with tempfile.TemporaryDirectory(prefix="exon-bench-zmq-") as tmp:
        address = (f"tcp://127.0.0.1:{_free_tcp_port()}" if transport == "tcp"
                   else f"ipc://{tmp}/{name}")
        procs = [
            subprocess.Popen([_python(), "-m", "exon.bench.zmq_worker", role, address, *args],
                             stdout=subprocess.PIPE, text=True)
            for role, *args in (first, second)
        ]
        try:
            yield procs[0], procs[1]
        finally:
            for proc in reversed(procs):
                if proc.poll() is None:
                    proc.kill()


def zmq_push_pull(size: int, messages: int, transport: str = "ipc") -> Throughput:
    """pyzmq PUSH -> PULL over ipc:// (or tcp:// on loopback) between two processes, one
    message per call."""
    with _zmq_workers("pushpull", ("pull", str(messages)),
                      ("push", str(messages), str(size)), transport) as (pull, push):
        try:
            pull_out, _ = pull.communicate(timeout=60 + messages / 20_000)
        except subprocess.TimeoutExpired:
            # pyzmq's PULL never saw the tail of the stream (a PUSH closing right after
            # its last send has been seen to lose it): say so instead of hanging.
            raise RuntimeError(f"pyzmq PULL did not receive all {messages} messages") from None
        push.communicate(timeout=60)
    return Throughput(messages, float(pull_out.strip().splitlines()[-1]))


def zmq_req_rep(size: int, round_trips: int, transport: str = "ipc") -> Latency:
    """pyzmq REQ/REP round trips over ipc:// (or tcp:// on loopback) between two processes."""
    with _zmq_workers("reqrep", ("rep", str(round_trips)),
                      ("req", str(round_trips), str(size)), transport) as (rep, req):
        req_out, _ = req.communicate(timeout=300)
        rep.communicate(timeout=60)
    return Latency(tuple(float(x) for x in req_out.split()))


def now() -> float:
    return time.perf_counter()
