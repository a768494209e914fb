"""PULL batch receiving beside ``receive()``: ``python -m exon.bench.pull_batch``.

Two measures, both nodes on one media driver (IPC), as ``exon bench sockets``:

* end to end (default): one PUSH process sends N messages of SIZE bytes, one per
  ``send()``; the PULL process takes them with ``receive()`` (one per call),
  ``receive_many(B)``, or ``receive_held(B)`` then ``confirm(batch)``; messages per second
  from the first message to the last. The PUSH's send loop bounds it.
* ``--drain``: the receiver's own cost, in one process: N messages are queued at the PULL
  first (credits = N), then taken the same ways; messages per second of the taking alone.

One line per case: the median of ``--runs`` (cases interleaved run by run, so that a
busy machine slows them alike) and every run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

from exon.bench.sockets import _DRIVER, _worker_pair
from exon.transport.aeron.settings import fresh_driver_dir


def pull_rate(driver_dir: str, role: str, size: int, messages: int, credits: int,
              batch: int) -> float:
    """msgs/s of one PUSH -> PULL run between two processes; ``role``: pull, pull-many
    or pull-held (exon.bench.sockets_worker)."""
    server = ("pull", driver_dir, str(messages), str(credits)) if role == "pull" else (
        role, driver_dir, str(messages), str(credits), str(batch))
    with _worker_pair(server, ("push", driver_dir, str(messages), str(size))) as (pull, push):
        out, _ = pull.communicate(timeout=600)
        push.communicate(timeout=120)
    return (messages - 1) / float(out.strip().splitlines()[-1])


def _taker(pull: Any, role: str, batch: int) -> Callable[[int], None]:
    if role == "pull":
        def take(n: int) -> None:
            receive = pull.receive
            for _ in range(n):
                receive()
    elif role == "pull-many":
        def take(n: int) -> None:
            receive_many = pull.receive_many
            while n > 0:
                n -= len(receive_many(batch))
    else:
        def take(n: int) -> None:
            receive_held, confirm = pull.receive_held, pull.confirm
            while n > 0:
                held = receive_held(batch)
                n -= len(held)
                confirm(held)
    return take


def drain_rates(driver_dir: str, cases: list[tuple[str, int]], size: int, messages: int,
                runs: int) -> dict[tuple[str, int], list[float]]:
    """Per case, msgs/s of taking ``messages`` already queued at the PULL, ``runs`` times."""
    from exon.middleware.node import Node

    rates: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
    with Node("127.0.0.1:0", driver_dir=driver_dir) as a, \
            Node("127.0.0.1:0", driver_dir=driver_dir) as b:
        pull = b.socket("pull", tag=1, credits=messages)
        push = a.socket("push")
        push.link(f"{b.address}/1", timeout=10)
        pull.wait_for_links(1, timeout=10)
        payload = b"x" * size
        for _ in range(runs):
            for case in cases:
                for _ in range(messages):
                    push.send(payload, timeout=10)
                end = time.monotonic() + 30
                while pull._queued() < messages and time.monotonic() < end:
                    time.sleep(0.002)
                take = _taker(pull, *case)
                start = time.perf_counter()
                take(messages)
                rates[case].append(messages / (time.perf_counter() - start))
    return rates


def main() -> None:
    from exon.transport.aeron import MediaDriver

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--credits", type=int, default=1024, help="end to end only")
    parser.add_argument("--batch", type=int, action="append",
                        help="max_messages per batch (repeatable; default 64 and 256)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--drain", action="store_true",
                        help="the receiver's own cost (messages queued first)")
    args = parser.parse_args()
    batches = args.batch or [64, 256]
    cases = [("pull", 1)] + [(r, b) for b in batches for r in ("pull-many", "pull-held")]
    directory = fresh_driver_dir("exon-bench-pull-batch")
    try:
        with MediaDriver.launch(dir=directory, **_DRIVER):
            if args.drain:
                rates = drain_rates(directory, cases, args.size, min(args.messages, 100_000),
                                    args.runs)
            else:
                rates = {case: [] for case in cases}
                for _ in range(args.runs):
                    for role, batch in cases:
                        rates[(role, batch)].append(pull_rate(
                            directory, role, args.size, args.messages, args.credits, batch))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for (role, batch), got in rates.items():
        name = {"pull": "receive()", "pull-many": f"receive_many({batch})",
                "pull-held": f"receive_held({batch})+confirm"}[role]
        print(f"{name:28s} {statistics.median(got):12,.0f} msgs/s  "
              f"(runs: {', '.join(f'{r:,.0f}' for r in got)})", flush=True)


if __name__ == "__main__":
    main()
