"""``exon bench sockets --patterns``: pub/sub fan-out and dealer/router beside pyzmq.

* ``pub_sub_fanout4_64B``: one PUB, four SUBs (each its own process, subscribed to
  everything), 64 B messages; the figure is the messages per second each subscriber
  receives (the median of the four; from its first message to its last). exon's PUB uses
  the default policy "block" (nothing lost); pyzmq's PUB its default high-water mark (1000,
  like exon's 1024 credits), which drops for a subscriber that falls behind: the drops are
  reported beside (``peer_dropped``), and its rate counts the messages delivered only.
* ``dealer_router_64inflight_64B``: a DEALER keeping 64 requests in flight against an echo
  ROUTER (two processes); round trips per second.

exon's processes are nodes of one media driver (IPC between them), pyzmq's use ``ipc://``.
One JSON line per case (:func:`exon.bench.report.emit`): ratio > 1 means exon is better.
Workers: ``python -m exon.bench.patterns ROLE ...`` (below).
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from exon.bench.peers import zmq_unavailable_reason
from exon.bench.report import emit
from exon.transport.aeron.settings import fresh_driver_dir

__all__ = ["run_patterns_bench"]

#: DriverSettings overrides for MediaDriver.launch(**_DRIVER)
_DRIVER: dict[str, Any] = {
    "threading_mode": "SHARED",
    "publication_linger_timeout_ns": 0,
}
_END = b"END"
_SUBSCRIBERS = 4
_IN_FLIGHT = 64


# ---- orchestration -----------------------------------------------------------------------


@contextlib.contextmanager
def _workers(*commands: tuple[str, ...]) -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        for args in commands:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "exon.bench.patterns", *args], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True))
        yield procs
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _fanout(kind: str, target: str, messages: int, size: int) -> tuple[float, int]:
    """(median messages/s per subscriber, messages lost over all subscribers)."""
    with _workers((f"{kind}-pub", target, str(messages), str(size))) as (pub,):
        assert pub.stdout is not None
        assert pub.stdin is not None
        address = pub.stdout.readline().strip()
        if kind == "exon":
            address = f"{address}|{target}"  # the subscribers' nodes use the same driver
        with _workers(*[(f"{kind}-sub", address, str(messages))
                        for _ in range(_SUBSCRIBERS)]) as subs:
            for sub in subs:
                assert sub.stdout is not None
                if sub.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"a {kind} subscriber did not start")
            if kind == "zmq":
                time.sleep(0.5)  # ZeroMQ's subscriptions reach the PUB asynchronously
            pub.stdin.write("go\n")
            pub.stdin.flush()
            results = []
            for sub in subs:
                out, _ = sub.communicate(timeout=120 + messages / 10_000)
                received, seconds = out.split()
                results.append((int(received), float(seconds)))
            pub.communicate(timeout=60)
    rates = [n / s for n, s in results if s > 0]
    lost = sum(messages - n for n, _ in results)
    return (statistics.median(rates) if rates else 0.0), lost


def _dealer_router(kind: str, target: str, round_trips: int, size: int) -> float:
    with _workers((f"{kind}-router", target, str(round_trips))) as (router,):
        assert router.stdout is not None
        address = router.stdout.readline().strip()
        if kind == "exon":
            address = f"{address}|{target}"
        with _workers((f"{kind}-dealer", address, str(round_trips), str(size))) as (dealer,):
            out, _ = dealer.communicate(timeout=120 + round_trips / 5_000)
        router.communicate(timeout=60)
    return round_trips / float(out.strip())


def run_patterns_bench(*, messages: int = 200_000, round_trips: int = 100_000,
                       size: int = 64, with_zmq: bool = True,
                       ipc_term_length: int | None = None) -> list[dict[str, object]]:
    from exon.transport.aeron import MediaDriver
    from exon.transport.aeron.settings import DriverSettings

    reason = zmq_unavailable_reason() if with_zmq else "disabled"
    directory = fresh_driver_dir("exon-bench-patterns")
    driver = dict(_DRIVER)
    if ipc_term_length is not None:
        driver["ipc_term_buffer_length"] = ipc_term_length
    lines = []
    try:
        with MediaDriver.launch(dir=directory, **driver), \
                tempfile.TemporaryDirectory(prefix="exon-bench-zmq-") as tmp:
            ex_rate, ex_lost = _fanout("exon", directory, messages, size)
            zq = _fanout("zmq", f"ipc://{tmp}/pubsub", messages, size) if reason is None else None
            lines.append(emit(
                f"pub_sub_fanout{_SUBSCRIBERS}_{size}B", exon=ex_rate,
                peer=None if zq is None else zq[0], peer_name="pyzmq", unit="msgs/s",
                higher_is_better=True, messages=messages, subscribers=_SUBSCRIBERS,
                exon_dropped=ex_lost, peer_dropped=None if zq is None else zq[1],
                ipc_term_length=driver.get("ipc_term_buffer_length",
                                           DriverSettings.model_fields[
                                               "ipc_term_buffer_length"].default)))
            ex = _dealer_router("exon", directory, round_trips, size)
            zr = (_dealer_router("zmq", f"ipc://{tmp}/dealer", round_trips, size)
                  if reason is None else None)
            lines.append(emit(
                f"dealer_router_{_IN_FLIGHT}inflight_{size}B", exon=ex, peer=zr,
                peer_name="pyzmq", unit="round trips/s", higher_is_better=True,
                round_trips=round_trips, in_flight=_IN_FLIGHT))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return lines


# ---- workers -------------------------------------------------------------------------------


def _exon_pub(driver_dir: str, messages: int, size: int) -> None:
    import exon

    with exon.Node("127.0.0.1:0", driver_dir=driver_dir) as node:
        pub = node.socket("pub")
        print(f"{node.address}/{pub.tag}", flush=True)
        sys.stdin.readline()
        payload = b"x" * size
        send = pub.send
        for _ in range(messages):
            send(payload, timeout=60)
        pub.close(timeout=60)


def _exon_router(driver_dir: str, round_trips: int) -> None:
    import exon

    with exon.Node("127.0.0.1:0", driver_dir=driver_dir) as node:
        router = node.socket("router")
        print(f"{node.address}/{router.tag}", flush=True)
        receive, send = router.receive, router.send
        for _ in range(round_trips):
            msg = receive(timeout=60)
            send(msg.payload, peer=msg.peer, timeout=60)
        time.sleep(0.5)  # the last replies' credits and FLOWs settle before closing


def _exon_dealer(address: str, driver_dir: str, round_trips: int, size: int) -> None:
    import exon

    with exon.Node("127.0.0.1:0", driver_dir=driver_dir) as node:
        dealer = node.socket("dealer")
        dealer.link(address, timeout=10)
        payload = b"x" * size
        send, receive = dealer.send, dealer.receive
        start = time.perf_counter()
        for _ in range(min(_IN_FLIGHT, round_trips)):
            send(payload, timeout=60)
        sent = min(_IN_FLIGHT, round_trips)
        for _ in range(round_trips):
            receive(timeout=60)
            if sent < round_trips:
                send(payload, timeout=60)
                sent += 1
        print(time.perf_counter() - start, flush=True)


def _zmq_pub(address: str, messages: int, size: int) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUB)
    sock.bind(address)
    print(address, flush=True)
    sys.stdin.readline()
    payload = b"x" * size
    send = sock.send
    for _ in range(messages):
        send(payload)
    for _ in range(50):  # the end marker, repeated: a PUB at its high-water mark drops
        send(_END)
        time.sleep(0.01)
    sock.close(linger=1000)
    ctx.term()


def _zmq_sub(address: str, messages: int) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.connect(address)
    print("ready", flush=True)
    recv = sock.recv
    first = recv()
    start = last = time.perf_counter()
    received = 0 if first == _END else 1
    while first != _END:
        msg = recv()
        if msg == _END:
            break
        received += 1
        last = time.perf_counter()
    print(received, last - start)
    sock.close(linger=0)
    ctx.term()


def _zmq_router(address: str, round_trips: int) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(address)
    print(address, flush=True)
    recv, send = sock.recv_multipart, sock.send_multipart
    for _ in range(round_trips):
        send(recv())
    sock.close(linger=1000)
    ctx.term()


def _zmq_dealer(address: str, round_trips: int, size: int) -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.connect(address)
    payload = b"x" * size
    send, recv = sock.send, sock.recv
    start = time.perf_counter()
    sent = min(_IN_FLIGHT, round_trips)
    for _ in range(sent):
        send(payload)
    for _ in range(round_trips):
        recv()
        if sent < round_trips:
            send(payload)
            sent += 1
    print(time.perf_counter() - start, flush=True)
    sock.close(linger=0)
    ctx.term()


def main(argv: list[str]) -> None:
    role, where, count = argv[0], argv[1], int(argv[2])
    if role == "exon-pub":
        _exon_pub(where, count, int(argv[3]))
    elif role == "exon-sub":
        address, driver_dir = where.split("|")
        _exon_sub_at(address, driver_dir, count)
    elif role == "exon-router":
        _exon_router(where, count)
    elif role == "exon-dealer":
        address, driver_dir = where.split("|")
        _exon_dealer(address, driver_dir, count, int(argv[3]))
    elif role == "zmq-pub":
        _zmq_pub(where, count, int(argv[3]))
    elif role == "zmq-sub":
        _zmq_sub(where, count)
    elif role == "zmq-router":
        _zmq_router(where, count)
    elif role == "zmq-dealer":
        _zmq_dealer(where, count, int(argv[3]))
    else:
        raise SystemExit(f"unknown role {role!r}")


def _exon_sub_at(address: str, driver_dir: str, messages: int) -> None:
    import exon

    with exon.Node("127.0.0.1:0", driver_dir=driver_dir) as node:
        sub = node.socket("sub")
        sub.subscribe(b"")
        sub.link(address, timeout=10)
        print("ready", flush=True)
        receive = sub.receive
        receive(timeout=60)
        start = time.perf_counter()
        for _ in range(messages - 1):
            receive(timeout=60)
        print(messages, time.perf_counter() - start)


if __name__ == "__main__":
    main(sys.argv[1:])
