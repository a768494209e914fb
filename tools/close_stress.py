#!/usr/bin/env python3
"""Close while others work: threads send, receive, offer and poll while the main thread
closes sockets, nodes, publications, subscriptions and clients under them (bounded rounds).

Meant for a sanitized build (docs/internals.md, "Sanitizers"): a close that frees or unmaps
memory another thread's native call still uses shows up as an AddressSanitizer report;
without sanitizers, as a crash at best. Run it from a tree built with
``EXON_NATIVE_SANITIZE=1``::

    LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \\
    PYTHONPATH=. python tools/close_stress.py --rounds 6 --seed 3 [--udp]

Scenarios: ``pushpull``, ``pubsub``, ``routerdealer``, ``reqrep`` (two nodes on one shared
driver over IPC, or with ``--udp`` each with its own driver over UDP on loopback), and
``aeron`` (one client: a concurrent and an exclusive publication, a claim, a subscription).
Each round waits for traffic to flow, then closes one side first (chosen by the seed) and
the rest after it. An exception that is not an ``ExonError`` (or an outcome), a thread that
does not stop, or a crash fails the run (exit status 1, or the signal's).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import exon  # noqa: E402
from exon.transport.aeron import Aeron, MediaDriver  # noqa: E402
from exon.transport.aeron.settings import fresh_driver_dir  # noqa: E402

SHARED_DRIVER = {
    "ipc_term_buffer_length": 1024 * 1024,
    "to_driver_buffer_length": 256 * 1024,
    "to_clients_buffer_length": 256 * 1024,
    "counters_values_buffer_length": 256 * 1024,
    "publication_linger_timeout_ns": 0,
    "client_liveness_timeout_ns": 2_000_000_000,
    "threading_mode": "SHARED",
}
UDP_DRIVER = {
    "ipc_term_buffer_length": 1024 * 1024,
    "term_buffer_length": 1024 * 1024,
    "image_liveness_timeout_ns": 1_000_000_000,
}
ERRORS_PER_THREAD = 200  #: a thread stops after this many errors (its object is closed)
THREAD_SECONDS = 20.0  #: and in any case after this long

Work = list[tuple[str, Callable[[], object]]]


class Round:
    """The threads of one round: ``work`` runs in a loop per thread until stopped."""

    def __init__(self, work: Work) -> None:
        self.work = work
        self.counts: dict[str, int] = {}
        self.unexpected: list[str] = []
        self._stop = threading.Event()

    def _loop(self, name: str, fn: Callable[[], object]) -> None:
        deadline = time.monotonic() + THREAD_SECONDS
        self.counts[name] = 0
        errors = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                fn()
                self.counts[name] += 1
            except (exon.Timeout, exon.BackPressured):
                pass
            except exon.ExonError as e:  # closed under it: keep at it a while
                key = f"{name}:{type(e).__name__}"
                self.counts[key] = self.counts.get(key, 0) + 1
                errors += 1
                if errors > ERRORS_PER_THREAD:
                    return
            except Exception as e:  # anything else is a finding
                self.unexpected.append(f"{name}: {type(e).__name__}: {e}")
                return

    def run(self, closers: list[Callable[[], object]], rnd: random.Random) -> None:
        threads = [threading.Thread(target=self._loop, args=(name, fn), daemon=True)
                   for name, fn in self.work]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 3  # traffic flowing first
        while (time.monotonic() < deadline
               and sum(self.counts.get(name, 0) for name, _ in self.work) < 200):
            time.sleep(0.01)
        time.sleep(rnd.uniform(0.0, 0.05))
        for close in closers:
            close()
            time.sleep(rnd.uniform(0.0, 0.02))
        time.sleep(0.05)
        self._stop.set()
        for t in threads:
            t.join(30)
            if t.is_alive():
                self.unexpected.append(f"{t.name} did not stop")


def _closers(rnd: random.Random, first: dict[str, list[Callable[[], object]]]
             ) -> list[Callable[[], object]]:
    return first[rnd.choice(sorted(first))]


def _two_nodes(make: Callable[[], exon.Node]) -> tuple[exon.Node, exon.Node]:
    return make(), make()


def _node_closers(rnd: random.Random, a: exon.Node, b: exon.Node,
                  sockets: dict[str, tuple[Any, exon.Node]]) -> list[Callable[[], object]]:
    """One close order, picked at random: a node first (then the other), or one of
    ``sockets`` (name: socket, its node) first, then its node, then the other."""
    def closing(what: Any) -> Callable[[], object]:
        return lambda: what.close(timeout=1)

    first: dict[str, list[Callable[[], object]]] = {
        "node a": [closing(a), closing(b)], "node b": [closing(b), closing(a)]}
    for name, (sock, node) in sockets.items():
        other = b if node is a else a
        first[name] = [closing(sock), closing(node), closing(other)]
    return _closers(rnd, first)


def pushpull(make: Callable[[], exon.Node], rnd: random.Random) -> Round:
    a, b = _two_nodes(make)
    pull = b.socket("pull", tag=1)
    push = a.socket("push")
    push.link(f"{b.address}/1")
    r = Round([
        ("send", lambda: push.send(b"x" * rnd.randrange(1, 3000), timeout=0.01)),
        ("send_nowait", lambda: push.send_nowait(b"y" * 64)),
        ("receive", lambda: pull.receive(timeout=0.01)),
        ("receive_many", lambda: pull.receive_many(64, timeout=0.01)),
        ("receive_held", lambda: pull.confirm(pull.receive_held(64, timeout=0.01))),
    ])
    r.run(_node_closers(rnd, a, b, {"pull": (pull, b), "push": (push, a)}), rnd)
    return r


def pubsub(make: Callable[[], exon.Node], rnd: random.Random) -> Round:
    a, b = _two_nodes(make)
    pub = a.socket("pub", tag=1)
    subs = [b.socket("sub", tag=10 + i) for i in range(2)]
    for s in subs:
        s.subscribe(b"")
        s.link(f"{a.address}/1")
    r = Round([
        ("send", lambda: pub.send(b"m" * rnd.randrange(1, 2000), timeout=0.01)),
        ("send_nowait", lambda: pub.send_nowait(b"n")),
        ("receive", lambda: subs[0].receive(timeout=0.01)),
        ("receive_nowait", lambda: subs[1].receive_nowait()),
    ])
    r.run(_node_closers(rnd, a, b, {"sub": (subs[0], b), "pub": (pub, a)}), rnd)
    return r


def routerdealer(make: Callable[[], exon.Node], rnd: random.Random) -> Round:
    a, b = _two_nodes(make)
    router = a.socket("router", tag=1)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/1")
    peers: list[Any] = []

    def router_receive() -> None:
        m = router.receive(timeout=0.01)
        if isinstance(m, exon.Message):
            peers[:] = [m.peer]

    def router_send() -> None:
        if peers:
            router.send(b"r" * 100, peer=peers[0], timeout=0.01)

    r = Round([
        ("dealer send", lambda: dealer.send(b"d" * 50, timeout=0.01)),
        ("dealer receive", lambda: dealer.receive(timeout=0.01)),
        ("router receive", router_receive),
        ("router send", router_send),
    ])
    r.run(_node_closers(rnd, a, b, {"router": (router, a), "dealer": (dealer, b)}), rnd)
    return r


def reqrep(make: Callable[[], exon.Node], rnd: random.Random) -> Round:
    a, b = _two_nodes(make)
    rep = a.socket("rep", tag=1)
    reqs = [b.socket("req") for _ in range(2)]
    for req in reqs:
        req.link(f"{a.address}/1")

    def serve() -> None:
        m = rep.receive(timeout=0.01)
        if isinstance(m, exon.Message):
            rep.send(m.payload, timeout=0.01)

    def ask(req: Any) -> Callable[[], object]:
        def once() -> None:
            req.send(b"q", timeout=0.05)
            req.receive(timeout=0.05)
        return once

    r = Round([("serve", serve), ("ask 0", ask(reqs[0])), ("ask 1", ask(reqs[1]))])
    r.run(_node_closers(rnd, a, b, {"rep": (rep, a), "req": (reqs[0], b)}), rnd)
    return r


def aeron(driver_dir: str, rnd: random.Random) -> Round:
    client = Aeron.connect(driver_dir)
    pub = client.add_publication("aeron:ipc", 7)
    xpub = client.add_exclusive_publication("aeron:ipc", 7)
    sub = client.add_subscription("aeron:ipc", 7)

    def exclusive() -> None:  # one writer: offer and offer2 in one thread
        if rnd.random() < 0.5:
            xpub.offer(b"z" * 128)
        else:
            xpub.offer2(b"a" * 10, b"b" * 20)

    def claim() -> None:
        c = pub.try_claim(64)
        c.buffer[0:1] = b"c"
        c.commit()

    def read() -> None:  # poll, wait and images: one thread at a time (like Aeron's)
        sub.poll(lambda data, header: None, 32)
        sub.wait(0.01)
        for image in sub.images:
            image.position  # noqa: B018

    r = Round([
        ("offer", lambda: pub.offer(b"o" * rnd.randrange(1, 5000))),
        ("exclusive", exclusive),
        ("claim", claim),
        ("read", read),
        ("positions", lambda: (pub.position, pub.position_limit, pub.is_connected)),
        ("counters", client.allocated_counters),
    ])
    r.run(_closers(rnd, {"sub": [sub.close, pub.close, client.close],
                         "pub": [pub.close, xpub.close, sub.close, client.close],
                         "exclusive": [xpub.close, client.close],
                         "client": [client.close]}), rnd)
    return r


NODE_SCENARIOS = {f.__name__: f for f in (pushpull, pubsub, routerdealer, reqrep)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append",
                        choices=[*NODE_SCENARIOS, "aeron"], help="default: all")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--udp", action="store_true", help="nodes with drivers of their own")
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    path = fresh_driver_dir("exon-close-stress")
    failed = False
    try:
        with MediaDriver.launch(dir=path, **SHARED_DRIVER) as driver:
            def make() -> exon.Node:
                if args.udp:
                    return exon.Node("127.0.0.1:0", driver_options=UDP_DRIVER)
                return exon.Node("127.0.0.1:0", driver_dir=driver.dir)

            for name in args.scenario or [*NODE_SCENARIOS, "aeron"]:
                for n in range(args.rounds):
                    if name == "aeron":
                        r = aeron(driver.dir, rnd)
                    else:
                        r = NODE_SCENARIOS[name](make, rnd)
                    print(name, n, r.counts, flush=True)
                    for problem in r.unexpected:
                        print("  UNEXPECTED", problem, flush=True)
                        failed = True
    finally:
        shutil.rmtree(path, ignore_errors=True)
    print("FAILED" if failed else "OK", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
