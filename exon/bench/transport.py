"""``exon bench transport``: exon's Aeron transport beside real Aeron and pyzmq.

Cases (one JSON line each, see :mod:`exon.bench.report`):

- ``native-ipc-throughput``: a C publisher thread and a C subscriber thread over one IPC
  publication of an embedded exon driver, against the real Aeron Java driver's
  ``EmbeddedIpcThroughput`` for the same message size, run just before in the same process
  tree.
- ``python-ipc-throughput``: a publisher process doing one ``offer`` per message from Python
  and this process polling with a handler, against pyzmq PUSH/PULL over ``ipc://`` between
  two processes, one message per Python call.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from typing import Any

from exon.bench import peers as peer_runs
from exon.bench.report import emit
from exon.native import ffi, lib


def _ipc_pair(aeron: Any, channel: str, stream_id: int, timeout: float = 5.0) -> tuple[Any, Any]:
    sub = aeron.add_subscription(channel, stream_id)
    pub = aeron.add_exclusive_publication(channel, stream_id)
    deadline = time.monotonic() + timeout
    while not sub.images or not pub.is_connected:
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark publication never connected")
        sub.wait(0.01)
        sub.poll(lambda data, header: None, 1)
    return pub, sub


def native_ipc_throughput(size: int, seconds: float) -> float:
    """Messages/s of exon's C publisher/subscriber loop over an embedded driver's IPC log."""
    from exon.transport.aeron import Aeron, MediaDriver

    with (
        tempfile.TemporaryDirectory(prefix="exon-bench-", dir="/dev/shm") as tmp,
        MediaDriver.launch(dir=f"{tmp}/driver", threading_mode="SHARED") as driver,
        Aeron.connect(dir=driver.dir) as aeron,
    ):
        pub, sub = _ipc_pair(aeron, "aeron:ipc", 1001)
        image = sub.images[0]
        result = ffi.new("exon_bench_result_t *")
        rc = lib.exon_bench_ipc_throughput(
            pub.cdata, image.cdata, size, int(seconds * 1e9), 0, result
        )
        if rc < 0:
            raise RuntimeError(f"native benchmark failed: {rc}")
        return float(result.messages_per_second)


def python_ipc_throughput(size: int, messages: int) -> float:
    """Messages/s from a Python publisher process to this process's Python poll loop."""
    from exon.transport.aeron import Aeron, MediaDriver

    with (
        tempfile.TemporaryDirectory(prefix="exon-bench-", dir="/dev/shm") as tmp,
        MediaDriver.launch(dir=f"{tmp}/driver", threading_mode="SHARED") as driver,
        Aeron.connect(dir=driver.dir) as aeron,
    ):
        sub = aeron.add_subscription("aeron:ipc", 1002)
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exon.bench.exon_worker",
                "offer",
                driver.dir,
                "aeron:ipc",
                "1002",
                str(messages),
                str(size),
            ],
            stdin=subprocess.PIPE,
        )
        try:
            count = 0
            start = 0.0

            def handler(data: Any, header: Any) -> None:
                nonlocal count
                count += 1

            poll = sub.poll
            deadline = time.monotonic() + 300
            while count == 0:
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError("the publisher process sent nothing")
                sub.wait(0.01)
                poll(handler, 1)
            start = time.perf_counter()
            first = count
            while count < messages:
                if poll(handler, 256) == 0:
                    if time.monotonic() > deadline or worker.poll() is not None:
                        raise RuntimeError(f"stream stopped after {count} messages")
                    sub.wait(0.001)
            elapsed = time.perf_counter() - start
            return (count - first) / elapsed
        finally:
            if worker.stdin:
                worker.stdin.close()
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def run_transport_bench(
    *,
    channel: str,
    sizes: tuple[int, ...],
    peers: tuple[str, ...],
    seconds: float,
    messages: int,
) -> None:
    if channel != "aeron:ipc":
        raise SystemExit(f"exon bench transport: channel {channel!r} is not supported yet")
    for size in sizes:
        peer = None
        peer_note = None
        if "aeron" in peers:
            reason = peer_runs.aeron_peer_unavailable_reason()
            if reason is None:
                peer = peer_runs.java_ipc_throughput(size, seconds=max(4, int(seconds) + 2))
            else:
                peer_note = reason
        exon = native_ipc_throughput(size, seconds)
        emit(
            f"native-ipc-throughput-{size}B",
            exon=exon,
            peer=peer,
            peer_name="aeron-java EmbeddedIpcThroughput",
            unit="msgs/s",
            higher_is_better=True,
            size=size,
            channel=channel,
            peer_note=peer_note,
        )
    if "zmq" in peers:
        size = 64
        reason = peer_runs.zmq_unavailable_reason()
        peer = None if reason else peer_runs.zmq_push_pull(size, messages).rate
        exon = python_ipc_throughput(size, messages)
        emit(
            f"python-ipc-throughput-{size}B",
            exon=exon,
            peer=peer,
            peer_name="pyzmq PUSH/PULL ipc://",
            unit="msgs/s",
            higher_is_better=True,
            size=size,
            channel=channel,
            messages=messages,
            peer_note=reason,
        )
