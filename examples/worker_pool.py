"""A worker pool over PUSH/PULL: a ventilator spreads tasks over workers, a sink collects.

    python examples/worker_pool.py [--workers 3] [--tasks 300]

The ventilator's PUSH is linked with every worker's PULL and sends each task to the next
worker that has credit (round-robin); each worker sends its result through its own PUSH to
the sink's PULL, which fair-queues them. A slow worker gets fewer tasks: it grants credit
back only as it takes them. Every task goes with a cookie, which comes back to the
ventilator once a worker's application took that task.

Uses the media driver of ``$EXON_NODE_DRIVER_DIR`` when set, else the host's (``exon
driver``) if one runs, else embeds one; it says which. Every blocking call has a timeout; the script
exits 0 and prints ``ok`` when every result arrived once and every cookie came back.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

import exon

TIMEOUT = 10.0  # seconds for any single step


def make_node() -> exon.Node:
    """A node on the driver of ``$EXON_NODE_DRIVER_DIR``, else the host's (``exon
    driver``) if one runs, else a driver of its own; says which."""
    node = exon.Node("127.0.0.1:0", driver_dir=os.environ.get("EXON_NODE_DRIVER_DIR") or None)
    if node.driver_kind == "embedded":
        print("no media driver running here: this node embeds one of its own")
    else:
        print(f"using the media driver in {node.driver_dir}")
    return node


# --8<-- [start:worker]
def worker(node: exon.Node, pull: exon.Socket, sink: str, done: list[int],
           finished: threading.Event) -> None:
    """Take tasks until ``finished`` is set; answer each through a PUSH."""
    with node.socket("push") as results:
        results.link(sink, timeout=TIMEOUT)
        while not finished.is_set():
            try:
                task = pull.receive(timeout=0.1)  # short, to look at `finished` again
            except exon.Timeout:
                continue
            n = int(task.payload)
            results.send(b"%d %d" % (n, n * n), timeout=TIMEOUT)
            done.append(n)
        # close() returns once the sink's application took every result sent
# --8<-- [end:worker]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=300)
    args = parser.parse_args()

    with make_node() as hub, make_node() as pool:
        sink = hub.socket("pull", tag=2)
        ventilator = hub.socket("push")
        pulls = [pool.socket("pull", credits=16) for _ in range(args.workers)]
        for pull in pulls:
            ventilator.link(f"{pool.address}/{pull.tag}", timeout=TIMEOUT)
        per_worker: list[list[int]] = [[] for _ in pulls]
        finished = threading.Event()
        threads = [threading.Thread(target=worker,
                                    args=(pool, pull, f"{hub.address}/2", done, finished))
                   for pull, done in zip(pulls, per_worker, strict=True)]
        for t in threads:
            t.start()

        for n in range(args.tasks):
            ventilator.send(b"%d" % n, cookie=n, timeout=TIMEOUT)

        results = {}
        for _ in range(args.tasks):
            n, square = map(int, sink.receive(timeout=TIMEOUT).payload.split())
            results[n] = square
        cookies = [ventilator.receive(timeout=TIMEOUT) for _ in range(args.tasks)]
        finished.set()
        for t in threads:
            t.join(TIMEOUT)

    confirmed = sorted(c.value for c in cookies if isinstance(c, exon.Cookie))
    print("tasks per worker:", [len(d) for d in per_worker])
    total = sum(results.values())
    expected = sum(n * n for n in range(args.tasks))
    print(f"results {len(results)}/{args.tasks}, sum of squares {total} (expected {expected})")
    print(f"cookies confirmed {len(confirmed)}/{args.tasks}")
    ok = (total == expected and len(results) == args.tasks
          and confirmed == list(range(args.tasks)) and not any(t.is_alive() for t in threads))
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
