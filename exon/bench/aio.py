"""An asyncio request/reply round trip beside ``zmq.asyncio``.

The client is a coroutine (``await req.asend`` then ``await req.areceive``; pyzmq:
``zmq.asyncio`` REQ ``send``/``recv``); the echo server is a plain blocking REP in another
process. exon's two nodes share one driver (IPC), pyzmq uses ``ipc://``. Reported: p50 and
p99 in microseconds, ratio = pyzmq / exon (> 1: exon faster; the goal at p50 is >= 2).

``runs`` rounds, each exon then pyzmq, so that a machine busy at one moment slows both: a
line gives the medians over the rounds and each round's figures (``exon_runs``,
``peer_runs``, ``ratio_runs``). On a loaded machine a request/reply round trip is bimodal
(whether the peer still spins when the request comes, or must be woken), and one round can
land in either mode.
"""

from __future__ import annotations

import asyncio
import os
import statistics
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


def run_aio_bench(*, round_trips: int = 5000, size: int = 64, with_zmq: bool = True,
                  runs: int = 3) -> list[dict[str, object]]:
    if runs < 1:
        raise ValueError(f"runs must be >= 1, not {runs}")
    rounds: list[tuple[list[float], list[float] | None]] = []
    for _ in range(runs):
        exon_times = _exon(round_trips, size)
        rounds.append((exon_times, _zmq(round_trips, size) if with_zmq else None))
    lines = []
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        exon_runs = [_percentile(e, q) * 1e6 for e, _ in rounds]
        peer_runs = [_percentile(z, q) * 1e6 for _, z in rounds if z is not None]
        spread: dict[str, object] = {"runs": runs,
                                     "exon_runs": [round(v, 3) for v in exon_runs]}
        if peer_runs:
            spread["peer_runs"] = [round(v, 3) for v in peer_runs]
            spread["ratio_runs"] = [round(z / e, 3) for e, z in zip(exon_runs, peer_runs,
                                                                     strict=True)]
        lines.append(emit(
            f"asyncio_req_rep_{size}B_{name}", exon=statistics.median(exon_runs),
            peer=statistics.median(peer_runs) if peer_runs else None,
            peer_name="zmq.asyncio REQ over ipc://", unit="us", higher_is_better=False,
            **spread,
            note=f"{round_trips} round trips from a coroutine (await asend/areceive) to a "
                 f"blocking REP echo in another process; exon: both nodes on one driver; "
                 f"exon, peer: medians over {runs} interleaved rounds (ratio: of those); "
                 f"goal at p50: ratio >= 2"))
    return lines
