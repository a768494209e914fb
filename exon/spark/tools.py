"""Processes the pipeline demo and the Spark bench run: an archive service, producers, and
a look at what a Parquet sink committed. No pyspark here.

``python -m exon.spark.tools produce PEER --rate R --seconds S --name NAME`` is one
producer process: it PUSHes JSON events ``{"key", "value", "event_time", "sent_ns", "id"}``
(about 100 bytes; ``--size 64`` pads nothing and drops ``id`` for 64-byte events) at ``R``
events/s for ``S`` seconds, each with a cookie, and prints a JSON summary once every
cookie came back (every event durable in the archive).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

__all__ = [
    "ArchiveProcess",
    "committed_files",
    "event",
    "kill_group",
    "produce",
    "produce_one",
]


class ArchiveProcess:
    """``exon archive serve`` as a subprocess on 127.0.0.1 (``with``: started, stopped)."""

    def __init__(self, directory: str | os.PathLike[str], ingest: dict[str, int],
                 *, fsync: str = "none", endpoint: str = "127.0.0.1:0") -> None:
        self.directory = pathlib.Path(directory)
        self.ingest = ingest
        self.fsync = fsync
        self.endpoint = endpoint
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def start(self) -> str:
        args = [sys.executable, "-m", "exon.cli", "archive", "serve", "--dir",
                str(self.directory), "--endpoint", self.address or self.endpoint,
                "--fsync", self.fsync]
        for name, tag in self.ingest.items():
            args += ["--ingest", f"{name}={tag}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            self.stop()
            raise RuntimeError("exon archive serve exited before printing its address")
        self.address = line
        return line

    def peer(self, recording: str) -> str:
        return f"{self.address}/{self.ingest[recording]}"

    def stop(self, timeout: float = 15.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> ArchiveProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def kill_group(proc: subprocess.Popen[Any], sig: int = signal.SIGKILL,
               timeout: float = 30.0) -> None:
    """Signal ``proc`` and everything in its process group (it was started with
    ``start_new_session=True``: a Spark driver and its JVM), then reap it."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


def event(name: str, seq: int, keys: int, *, size: int = 0) -> bytes:
    """One JSON event. ``value`` is an integer (sums compare exactly); ``event_time`` is the
    send time in seconds; ``sent_ns`` the same in ns (for latency)."""
    now = time.time_ns()
    if size:
        # a compact event of exactly `size` bytes when it fits (the bench's 64 B events)
        body = f'{{"key":"k{seq % keys}","value":{seq % 1000},"sent_ns":{now}}}'
        return body.encode().ljust(size)
    return json.dumps({"key": f"k{seq % keys}", "value": seq % 1000,
                       "event_time": now / 1e9, "sent_ns": now,
                       "id": f"{name}-{seq}"}, separators=(",", ":")).encode()


def produce(peer: str, *, rate: float, seconds: float, name: str, keys: int = 8,
            size: int = 0, count: int | None = None, timeout: float = 60.0) -> dict[str, Any]:
    """PUSH events to ``peer`` at ``rate``/s (0: as fast as credits allow) for ``seconds``
    (or until ``count`` were sent); return once every cookie came back:
    ``{sent, confirmed, lost, first_ns, last_ns}``."""
    import exon

    with exon.Node("127.0.0.1:0") as node:
        push = node.socket("push")
        push.link(peer, timeout=timeout)
        sent = confirmed = lost = 0
        start = time.monotonic()
        first_ns = time.time_ns()
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= seconds or (count is not None and sent >= count):
                break
            due = int(elapsed * rate) + 1 if rate else sent + 256
            if count is not None:
                due = min(due, count)
            while sent < due:
                push.send(event(name, sent, keys, size=size), cookie=sent, timeout=timeout)
                sent += 1
            while confirmed < sent:  # collect the cookies already back
                try:
                    item = push.receive_nowait()
                except (exon.Timeout, exon.StateError):  # none back yet / none outstanding
                    break
                confirmed += 1
                lost += isinstance(item, exon.CookieLost)
            if rate:
                time.sleep(min(0.005, max(0.0, (sent / rate) - (time.monotonic() - start))))
        last_ns = time.time_ns()
        deadline = time.monotonic() + timeout
        while confirmed < sent and time.monotonic() < deadline:
            try:
                item = push.receive(timeout=max(0.01, deadline - time.monotonic()))
            except exon.StateError:  # the socket says nothing is outstanding any more
                break
            confirmed += 1
            lost += isinstance(item, exon.CookieLost)
        push.close(timeout=timeout)
    return {"name": name, "sent": sent, "confirmed": confirmed, "lost": lost,
            "first_ns": first_ns, "last_ns": last_ns}


def committed_files(path: str | os.PathLike[str]) -> list[str]:
    """The data files a Spark file sink at ``path`` committed (its ``_spark_metadata``
    log): what a reader of the sink sees, never a file of a batch that did not commit."""
    log = pathlib.Path(path) / "_spark_metadata"
    files: dict[str, None] = {}
    if not log.is_dir():
        return []
    for entry in sorted(log.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name.endswith(".crc"):
            continue
        for line in entry.read_text().splitlines()[1:]:  # line 1: the log version
            if line.strip():
                record = json.loads(line)
                if record.get("action", "add") == "add":
                    files[record["path"]] = None
    return [p.removeprefix("file://") for p in files]


def committed_batches(path: str | os.PathLike[str]) -> Iterator[tuple[int, float, list[str]]]:
    """``(batch id, commit time, files)`` of each batch a file sink committed (a compacted
    log entry repeats earlier batches' files: only its own new ones are given)."""
    log = pathlib.Path(path) / "_spark_metadata"
    if not log.is_dir():
        return
    seen: set[str] = set()
    entries = [(int(p.name.removesuffix(".compact")), p) for p in log.iterdir()
               if p.name.removesuffix(".compact").isdigit()]
    for batch, entry in sorted(entries):
        lines = entry.read_text().splitlines()[1:]
        paths = [json.loads(x)["path"].removeprefix("file://") for x in lines if x.strip()]
        new = [p for p in paths if p not in seen]
        seen.update(new)
        yield batch, entry.stat().st_mtime, new


def _main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m exon.spark.tools")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce", help="push JSON events to a PULL (an archive's ingest)")
    p.add_argument("peer")
    p.add_argument("--rate", type=float, default=1000.0, help="events/s (0: max)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--name", default=f"p{os.getpid()}")
    p.add_argument("--keys", type=int, default=8)
    p.add_argument("--size", type=int, default=0, help="pad compact events to SIZE bytes")
    p.add_argument("--count", type=int, default=None, help="stop after COUNT events")
    args = parser.parse_args(argv)
    summary = produce(args.peer, rate=args.rate, seconds=args.seconds, name=args.name,
                      keys=args.keys, size=args.size, count=args.count)
    print(json.dumps(summary), flush=True)
    return 0 if summary["confirmed"] == summary["sent"] and not summary["lost"] else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


def produce_one(peer: str, body: dict[str, Any], timeout: float = 30.0) -> None:
    """PUSH one JSON event and wait until it is durable."""
    import exon

    with exon.Node("127.0.0.1:0") as node:
        push = node.socket("push")
        push.link(peer, timeout=timeout)
        push.send(json.dumps(body).encode(), cookie=0, timeout=timeout)
        item = push.receive(timeout=timeout)
        if isinstance(item, exon.CookieLost):
            raise RuntimeError(f"{peer} did not confirm the event")
        push.close(timeout=timeout)
