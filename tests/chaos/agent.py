"""One exon node in a namespace, driven by the chaos tests over its stdin/stdout.

Started by :meth:`tests.chaos.netns.Lab.start_node` as
``ip netns exec NS python -m tests.chaos.agent --endpoint HOST:PORT [--driver K=V ...]``.
The node embeds its own media driver and binds the namespace's address. The agent prints
one JSON line when ready (address, driver dir, pid, incarnation), then answers commands:
one JSON object per line in (``{"id": 1, "op": "push", ...}``), one per line out with the
same id (``{"id": 1, "ok": true, ...}`` or ``"ok": false`` with the error's type and text).
Every command runs in a thread of its own, so a long stream can be watched while it runs.

Payloads carry ``(incarnation, sequence)`` (two little-endian u64) so that the receiving
agent checks loss, duplication, order and the origin of every message itself; only the
figures cross the pipe.

Commands: ``socket``, ``link``, ``peers``, ``push``, ``sink_start``/``sink_stats``/
``sink_stop``, ``serve_start``/``serve_stop``, ``req``, ``stats``, ``close``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
import time
import tracemalloc
from typing import Any

import exon
from exon.core import LinkSettings
from exon.middleware.heap import HeapTrimmer
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import SystemCounter
from tests.chaos.sequence import SEQ, SequenceChecker

REPLY_PREFIX = b"R"


def memory() -> dict[str, int]:
    """Resident memory in bytes: ``rss`` in all, ``anon`` (heap, stacks: what a leak
    grows) and ``shmem`` (the log buffers and CnC mapped from /dev/shm, which grow until
    every page of their terms was touched once, then stay)."""
    fields = {"VmRSS:": "rss", "RssAnon:": "anon", "RssShmem:": "shmem"}
    found: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = fields.get(line.split(":", 1)[0] + ":")
            if key is not None:
                found[key] = int(line.split()[1]) * 1024
    return found


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _error(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc),
            "exon": isinstance(exc, exon.ExonError)}


class Sink:
    """A PULL's receiving loop: checks every (incarnation, sequence) it takes
    (:class:`tests.chaos.sequence.SequenceChecker`, whose memory stays flat)."""

    def __init__(self, sock: Any, idle: float) -> None:
        self.sock = sock
        self.idle = idle
        self.lock = threading.Lock()
        self.checker = SequenceChecker()
        self.error: dict[str, Any] | None = None
        self.first_at: float | None = None
        self.last_at: float | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="sink")
        self.thread.start()

    def _run(self) -> None:
        receive_many = self.sock.receive_many
        take = self.checker.take
        while not self._stop.is_set():
            try:
                batch = receive_many(4096, timeout=0.2)
            except exon.Timeout:
                continue
            except exon.ExonError as exc:
                if isinstance(exc, exon.ClosedError) and self._stop.is_set():
                    return
                with self.lock:
                    self.error = _error(exc)
                if isinstance(exc, exon.ClosedError):
                    return
                time.sleep(0.05)
                continue
            now = time.monotonic()
            with self.lock:
                if self.first_at is None:
                    self.first_at = now
                self.last_at = now
                for msg in batch:
                    take(msg.payload)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            span = ((self.last_at - self.first_at)
                    if self.first_at is not None and self.last_at is not None else 0.0)
            return {**self.checker.stats(), "span": span, "error": self.error}

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self.thread.join(timeout=5)
        return self.stats()


class Server:
    """A REP loop: every request comes back as REPLY_PREFIX + request."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.served = 0
        self.errors: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="server")
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.sock.receive(timeout=0.2)
            except exon.Timeout:
                continue
            except exon.ExonError as exc:
                if self._stop.is_set() or isinstance(exc, exon.ClosedError):
                    return
                self.errors.append(_error(exc))
                time.sleep(0.05)
                continue
            try:
                self.sock.send(REPLY_PREFIX + msg.payload, timeout=30)
                self.served += 1
            except exon.ExonError as exc:
                self.errors.append(_error(exc))

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self.thread.join(timeout=5)
        return {"served": self.served, "errors": self.errors[:20],
                "error_count": len(self.errors)}


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        driver = dict(kv.split("=", 1) for kv in args.driver)
        settings = LinkSettings(**dict(kv.split("=", 1) for kv in args.link))
        self.incarnation = int.from_bytes(secrets.token_bytes(8), "little") or 1
        # a driver of its own, always: a host driver would be one of the root namespace
        self.node = exon.Node(args.endpoint, driver="embedded", driver_options=driver,
                              settings=settings)
        self.sockets: dict[str, Any] = {}
        self.sinks: dict[str, Sink] = {}
        self.servers: dict[str, Server] = {}
        self.out_lock = threading.Lock()

    def write(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj) + "\n"
        with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    # ---- commands ---------------------------------------------------------------------

    def op_socket(self, name: str, type: str, tag: int | None = None,
                  credits: int | None = None) -> dict[str, Any]:
        sock = self.node.socket(type, tag=tag, credits=credits)
        self.sockets[name] = sock
        return {"tag": sock.tag, "peer": f"{self.node.address}/{sock.tag}"}

    def op_link(self, name: str, peer: str, timeout: float = 10.0) -> dict[str, Any]:
        start = time.monotonic()
        self.sockets[name].link(peer, timeout=timeout)
        return {"elapsed": time.monotonic() - start}

    def op_peers(self, name: str) -> dict[str, Any]:
        return {"peers": [str(p) for p in self.sockets[name].peers]}

    def op_push(self, name: str, count: int, start: int = 0, size: int = 16,
                timeout: float = 30.0, cookies: bool = False,
                cookie_wait: float = 30.0, rate: float = 0.0) -> dict[str, Any]:
        """Send ``count`` messages numbered from ``start``; stop at the first error.

        With ``cookies`` every message carries its sequence as cookie, and a second
        thread collects them: the answer lists how many came back confirmed, how many
        lost, and checks that every message sent came back exactly once as one or the
        other (``unaccounted``: sent but neither; ``twice``: both or twice)."""
        sock = self.sockets[name]
        pad = b"\0" * max(0, size - SEQ.size)
        pack = SEQ.pack
        inc = self.incarnation
        confirmed: list[int] = []
        lost: list[int] = []
        collector_error: list[dict[str, Any]] = []
        done = threading.Event()

        def collect() -> None:
            deadline_after_done: float | None = None
            while True:
                if done.is_set():
                    if deadline_after_done is None:
                        deadline_after_done = time.monotonic() + cookie_wait
                    if len(confirmed) + len(lost) >= sent or time.monotonic() > deadline_after_done:
                        return
                try:
                    item = sock.receive(timeout=0.2)
                except exon.Timeout:
                    continue
                except exon.BrokenLink:
                    continue  # the CookieLost items follow
                except exon.StateError:
                    time.sleep(0.01)  # no cookie outstanding (yet, or any more)
                    continue
                except exon.ExonError as exc:
                    collector_error.append(_error(exc))
                    return
                if isinstance(item, exon.CookieLost):
                    lost.append(item.value)
                elif isinstance(item, exon.Cookie):
                    confirmed.append(item.value)

        sent = 0
        error = None
        collector = None
        if cookies:
            collector = threading.Thread(target=collect, daemon=True)
            collector.start()
        t0 = time.monotonic()
        send = sock.send
        try:
            if rate:  # paced: about ``rate`` messages a second
                for seq in range(start, start + count):
                    due = t0 + (seq - start) / rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    send(pack(inc, seq) + pad, cookie=seq if cookies else None, timeout=timeout)
                    sent += 1
            elif cookies:
                for seq in range(start, start + count):
                    send(pack(inc, seq) + pad, cookie=seq, timeout=timeout)
                    sent += 1
            else:
                for seq in range(start, start + count):
                    send(pack(inc, seq) + pad, timeout=timeout)
                    sent += 1
        except exon.ExonError as exc:
            error = _error(exc)
            error["at"] = time.monotonic()  # the kernel's clock: the tests compare it
        elapsed = time.monotonic() - t0
        done.set()
        out: dict[str, Any] = {"sent": sent, "elapsed": elapsed, "error": error,
                               "incarnation": inc}
        if collector is not None:
            collector.join(timeout=cookie_wait + 10)
            everything = confirmed + lost
            seen = set(everything)
            out.update({
                "confirmed": len(confirmed), "lost": len(lost),
                "twice": len(everything) - len(seen),
                "unaccounted": len(set(range(start, start + sent)) - seen),
                "foreign": len(seen - set(range(start, start + sent))),
                "lost_range": [min(lost), max(lost)] if lost else None,
                "confirmed_max": max(confirmed) if confirmed else None,
                "collector_error": collector_error,
            })
        return out

    def op_sink_start(self, name: str, idle: float = 0.2) -> dict[str, Any]:
        self.sinks[name] = Sink(self.sockets[name], idle)
        return {}

    def op_sink_stats(self, name: str) -> dict[str, Any]:
        return self.sinks[name].stats()

    def op_sink_stop(self, name: str) -> dict[str, Any]:
        return self.sinks.pop(name).stop()

    def op_serve_start(self, name: str) -> dict[str, Any]:
        self.servers[name] = Server(self.sockets[name])
        return {}

    def op_serve_stop(self, name: str) -> dict[str, Any]:
        return self.servers.pop(name).stop()

    def op_req(self, peer: str, count: int, sockets: int = 1, timeout: float = 30.0,
               size: int = 16, link_timeout: float = 30.0) -> dict[str, Any]:
        """``count`` requests to ``peer`` from ``sockets`` REQ sockets at once (each its
        own thread, one request at a time); every reply must be REPLY_PREFIX + request.
        The sockets are closed at the end."""
        socks = [self.node.socket("req") for _ in range(sockets)]
        lock = threading.Lock()
        totals = {"matched": 0, "mismatched": 0}
        errors: list[dict[str, Any]] = []
        worst = [0.0]

        def client(index: int, sock: Any, n: int) -> None:
            pad = b"\0" * max(0, size - SEQ.size)
            matched = mismatched = 0
            slowest = 0.0
            try:
                sock.link(peer, timeout=link_timeout)
                for seq in range(n):
                    request = SEQ.pack(self.incarnation, (index << 32) | seq) + pad
                    t1 = time.monotonic()
                    sock.send(request, timeout=timeout)
                    reply = sock.receive(timeout=timeout)
                    slowest = max(slowest, time.monotonic() - t1)
                    if (isinstance(reply, exon.Message)
                            and reply.payload == REPLY_PREFIX + request):
                        matched += 1
                    else:
                        mismatched += 1
            except exon.ExonError as exc:
                with lock:
                    errors.append(_error(exc))
            with lock:
                totals["matched"] += matched
                totals["mismatched"] += mismatched
                worst[0] = max(worst[0], slowest)

        shares = [count // sockets + (1 if i < count % sockets else 0) for i in range(sockets)]
        threads = [threading.Thread(target=client, args=(i, sock, n), daemon=True)
                   for i, (sock, n) in enumerate(zip(socks, shares, strict=True))]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        for sock in socks:
            try:
                sock.close(timeout=5)
            except exon.ExonError as exc:
                errors.append(_error(exc))
        return {**totals, "errors": errors, "elapsed": elapsed, "worst": worst[0]}

    def op_stats(self) -> dict[str, Any]:
        with CncFile.open(self.node.driver_dir) as cnc:
            values = {c.id: c.value for c in cnc.counters().snapshot()}
        system = {c.name.lower(): values.get(int(c), 0) for c in SystemCounter}
        core = self.node.statistics()
        return {"driver": system,
                "core": {k: getattr(core, k) for k in core.__dataclass_fields__},
                "frames_dropped": self.node.frames_dropped,
                "hello_dropped": getattr(self.node._transport, "hello_dropped", None),
                **memory(), "fds": fd_count(), "threads": threading.active_count()}

    def op_heap(self, top: int = 12, trace: bool = True) -> dict[str, Any]:
        """Where the Python heap grew since the previous call (tracemalloc, started by the
        first call: allocations before it are not traced), and malloc's own figures
        (``mallinfo2``, for what C allocated): ``grew`` lists the ``top`` source lines whose
        traced size changed most, as [file:line, bytes changed, blocks changed]. With
        ``trace`` False only malloc's figures (tracemalloc's own tables would grow anon)."""
        grew: list[list[Any]] = []
        previous = None
        if trace:
            if not tracemalloc.is_tracing():
                tracemalloc.start(1)
            snapshot = tracemalloc.take_snapshot()
            previous, self._heap_snapshot = getattr(self, "_heap_snapshot", None), snapshot
        if previous is not None:
            for stat in snapshot.compare_to(previous, "lineno")[:top]:
                frame = stat.traceback[0]
                grew.append([f"{frame.filename}:{frame.lineno}", stat.size_diff,
                             stat.count_diff])
        info = None
        heap = HeapTrimmer()
        if heap.available:
            # in use (uordblks) and free but held (fordblks) in malloc's arenas, and
            # what it mapped apart (hblkhd: blocks above the mmap threshold)
            raw = heap._libc.mallinfo2()
            info = {"in_use": raw.uordblks, "free": raw.fordblks, "mmapped": raw.hblkhd,
                    "arena": raw.arena, "top_free": raw.keepcost}
        return {"traced": tracemalloc.get_traced_memory()[0], "grew": grew,
                "malloc": info, **memory()}

    def op_close(self, timeout: float = 5.0) -> dict[str, Any]:
        for sink in list(self.sinks.values()):
            sink.stop()
        for server in list(self.servers.values()):
            server.stop()
        self.node.close(timeout=timeout)
        return {}

    # ---- loop -------------------------------------------------------------------------

    def handle(self, cmd: dict[str, Any]) -> None:
        ident = cmd.pop("id", None)
        op = cmd.pop("op", "")
        try:
            result = getattr(self, f"op_{op}")(**cmd)
            self.write({"id": ident, "ok": True, **result})
        except Exception as exc:  # answered, never fatal: the test decides
            self.write({"id": ident, "ok": False, "error": _error(exc)})

    def run(self) -> None:
        self.write({"ready": True, "address": self.node.address, "pid": os.getpid(),
                    "driver_dir": self.node.driver_dir, "incarnation": self.incarnation})
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            if cmd.get("op") == "exit":
                break
            threading.Thread(target=self.handle, args=(cmd,), daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.agent")
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--driver", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--link", action="append", default=[], metavar="FIELD=VALUE")
    args = parser.parse_args()
    agent = Agent(args)
    try:
        agent.run()
    finally:
        agent.node.close(timeout=2.0)


if __name__ == "__main__":
    main()
