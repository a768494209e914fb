"""``exon bench sockets --flood``: a good PUSH -> PULL stream beside a session flooding the
PULL's node with garbage (issue #32), against the same stream without the flood.

Two nodes of one media driver (IPC) in this process; the flooder is a process of its own
(:mod:`exon.bench.flood_worker`): its own Aeron publication on the receiving node's
stream, ``rate`` messages a second, 9 in 10 no exon frame at all, 1 in 10 DATA for
sockets that do not exist. Each phase runs ``seconds``: a sender thread streams 64-byte
messages, this thread receives and notes the longest gap between two messages. One JSON
line: ``exon`` = the good stream's rate with the flood, ``peer`` = without (ratio: with /
without), ``longest_gap_s`` with and without, the flood's real rate, and the node's
native malformed drops. Goals (docs/protocol.md 2.17): longest gap <= 0.1 s, ratio >= 0.5.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from typing import Any

import exon
from exon.bench.report import emit
from exon.transport.aeron.settings import fresh_driver_dir

__all__ = ["good_stream", "run_flood_bench", "start_flooder"]

_DRIVER: dict[str, Any] = {"threading_mode": "SHARED", "publication_linger_timeout_ns": 0}


def good_stream(push: exon.Socket, pull: exon.Socket, seconds: float) -> tuple[int, float]:
    """A sender thread streams while this thread receives for ``seconds``: (messages
    received, longest gap between two consecutive ones, seconds). Drains the queue after."""
    stop = threading.Event()
    payload = b"g" * 64

    def send() -> None:
        while not stop.is_set():
            try:
                push.send(payload, timeout=0.5)
            except exon.Timeout:
                pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        pull.receive(timeout=5)  # the stream runs
        received, gap = 1, 0.0
        last = time.monotonic()
        end = last + seconds
        while last < end:
            try:
                pull.receive(timeout=1.0)
            except exon.Timeout:
                pass
            else:
                received += 1
            now = time.monotonic()
            gap = max(gap, now - last)
            last = now
    finally:
        stop.set()
        sender.join(5)
    while True:
        try:
            pull.receive(timeout=0.2)
        except exon.Timeout:
            break
    return received, gap


def start_flooder(driver_dir: str, node: exon.Node, rate: float,
                  seconds: float) -> subprocess.Popen[str]:
    """The flooder process, once its publication is connected (its first line)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "exon.bench.flood_worker", driver_dir, node.address,
         str(rate), str(seconds)],
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.wait(10)
        raise RuntimeError("the flooder did not start")
    return proc


def run_flood_bench(*, seconds: float = 3.0, rate: float = 100_000) -> dict[str, Any]:
    from exon.transport.aeron import MediaDriver

    directory = fresh_driver_dir("exon-bench-flood")
    try:
        with MediaDriver.launch(dir=directory, **_DRIVER):
            node = exon.Node("127.0.0.1:0", driver_dir=directory)
            other = exon.Node("127.0.0.1:0", driver_dir=directory)
            try:
                pull = node.socket("pull", tag=3)
                push = other.socket("push")
                push.link(f"{node.address}/3", timeout=10)
                quiet, quiet_gap = good_stream(push, pull, seconds)
                proc = start_flooder(directory, node, rate, seconds + 2)
                try:
                    flooded, flood_gap = good_stream(push, pull, seconds)
                    proc.wait(seconds + 30)
                    assert proc.stdout is not None
                    offered = int(proc.stdout.read().split()[-1])
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait(10)
                return emit("push_pull_64B_flood", exon=flooded / seconds,
                            peer=quiet / seconds, peer_name="no-flood", unit="msgs/s",
                            higher_is_better=True, longest_gap_s=round(flood_gap, 4),
                            longest_gap_no_flood_s=round(quiet_gap, 4),
                            flood_rate=round(offered / (seconds + 2)),
                            malformed_dropped_natively=node.malformed_native,
                            seconds=seconds)
            finally:
                other.close(timeout=2.0)
                node.close(timeout=2.0)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
