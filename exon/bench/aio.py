"""An asyncio request/reply round trip beside ``zmq.asyncio``.

The client is a coroutine (``await req.asend`` then ``await req.areceive``; pyzmq:
``zmq.asyncio`` REQ ``send``/``recv``); the echo server is a plain blocking REP in another
process. exon's two nodes share one driver (IPC), pyzmq uses ``ipc://``. Reported: p50 and
p99 in microseconds, ratio = pyzmq / exon (> 1: exon faster; the goal at p50 is >= 2).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

from exon.bench.report import emit

_EXON_SERVER = """
import sys, exon
with exon.Node("127.0.0.1:0", driver_dir=sys.argv[1]) as node:
    rep = node.socket("rep")
    print(f"{node.address}/{rep.tag}", flush=True)
    for _ in range(int(sys.argv[2])):
        rep.send(rep.receive(timeout=60).payload, timeout=60)
"""

_ZMQ_SERVER = """
import sys, zmq
ctx = zmq.Context()
rep = ctx.socket(zmq.REP)
rep.bind(sys.argv[1])
print("ready", flush=True)
for _ in range(int(sys.argv[2])):
    rep.send(rep.recv())
rep.close(linger=0)
ctx.term()
"""


def _server(code: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        stderr = proc.stderr.read() if proc.stderr is not None else ""
        raise RuntimeError(f"the bench server did not start: {stderr[-2000:]}")
    return proc, line


async def _round_trips(send: Callable[[bytes], Awaitable[object]],
                       receive: Callable[[], Awaitable[bytes]], count: int,
                       size: int) -> list[float]:
    payload = b"x" * size
    times = []
    for i in range(count + count // 10):  # the first tenth warms up
        started = time.perf_counter()
        await send(payload)
        if await receive() != payload:
            raise RuntimeError("a wrong reply")
        if i >= count // 10:
            times.append(time.perf_counter() - started)
    return times


def _exon(round_trips: int, size: int) -> list[float]:
    from exon.middleware.node import Node
    from exon.transport.aeron import MediaDriver

    total = round_trips + round_trips // 10
    with tempfile.TemporaryDirectory(prefix="exon-bench-aio-", dir="/dev/shm") as work:
        driver_dir = f"{work}/driver"
        with MediaDriver.launch(dir=driver_dir, dir_delete_on_shutdown=True):
            server, address = _server(_EXON_SERVER, driver_dir, str(total))
            try:
                with Node("127.0.0.1:0", driver_dir=driver_dir) as node:
                    req = node.socket("req")

                    async def main() -> list[float]:
                        await req.alink(address, timeout=10)

                        async def receive() -> bytes:
                            return (await req.areceive(timeout=10)).payload  # type: ignore[no-any-return]

                        return await _round_trips(lambda p: req.asend(p, timeout=10), receive,
                                                  round_trips, size)

                    return asyncio.run(main())
            finally:
                server.wait(timeout=30)


def _zmq(round_trips: int, size: int) -> list[float]:
    import zmq
    import zmq.asyncio

    total = round_trips + round_trips // 10
    with tempfile.TemporaryDirectory(prefix="exon-bench-aio-zmq-") as work:
        endpoint = f"ipc://{os.path.join(work, 'rep')}"
        server, _ = _server(_ZMQ_SERVER, endpoint, str(total))
        ctx = zmq.asyncio.Context()
        req = ctx.socket(zmq.REQ)
        try:
            req.connect(endpoint)

            async def main() -> list[float]:
                async def receive() -> bytes:
                    return await req.recv()

                return await _round_trips(req.send, receive, round_trips, size)

            return asyncio.run(main())
        finally:
            req.close(linger=0)
            ctx.term()
            server.wait(timeout=30)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_aio_bench(*, round_trips: int = 5000, size: int = 64,
                  with_zmq: bool = True) -> list[dict[str, object]]:
    exon_times = _exon(round_trips, size)
    zmq_times = _zmq(round_trips, size) if with_zmq else None
    lines = []
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        exon_us = _percentile(exon_times, q) * 1e6
        peer_us = None if zmq_times is None else _percentile(zmq_times, q) * 1e6
        lines.append(emit(
            f"asyncio_req_rep_{size}B_{name}", exon=exon_us, peer=peer_us,
            peer_name="zmq.asyncio REQ over ipc://", unit="us", higher_is_better=False,
            note=f"{round_trips} round trips from a coroutine (await asend/areceive) to a "
                 f"blocking REP echo in another process; exon: both nodes on one driver; "
                 f"goal at p50: ratio >= 2"))
    return lines
