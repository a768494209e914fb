"""Failover with kill -9, on loopback: archive services as processes (`exon archive serve`),
the primary killed at random moments while a producer sends with --min-insync 2, the
replica promoted, the old primary restarted as a replica of the new one (it cuts its tail).
At the end every message whose cookie came back is in the primary exactly once, and the
members hold the same bytes (docs/protocol.md 3.7)."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import exon
from exon.archive import Archive
from exon.archive.client import ArchiveClient
from exon.archive.segments import segment_bases, segment_path

ROUNDS = 5
TAG = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Member:
    def __init__(self, directory: Path, port: int) -> None:
        self.directory = directory
        self.address = f"127.0.0.1:{port}"
        self.proc: subprocess.Popen[str] | None = None

    def start(self, replica_of: str | None = None) -> None:
        args = [sys.executable, "-m", "exon.cli", "archive", "serve", "--dir",
                str(self.directory), "--endpoint", self.address, "--min-insync", "2",
                "--replica-timeout", "2", "--segment-length", str(1 << 20)]
        args += ["--replica-of", replica_of] if replica_of else ["--ingest", f"orders={TAG}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == self.address, line if line else self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.close_pipes()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.close_pipes()

    def close_pipes(self) -> None:
        if self.proc is not None:
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()


def produce(node: exon.Node, peer: str, first: int, stop: threading.Event,
            confirmed: set[int]) -> None:
    """Send ids from ``first`` until ``stop`` (or the link breaks); note confirmed ones."""
    push = node.socket("push")
    try:
        push.link(peer, timeout=10)
        i = first

        def drain(wait: float) -> None:
            while True:
                try:
                    item = push.receive(timeout=wait)
                except (exon.Timeout, exon.ClosedError, exon.BrokenLink, exon.StateError):
                    return  # StateError: no cookie pending
                if isinstance(item, exon.Cookie):
                    confirmed.add(item.value)

        while not stop.is_set():
            try:
                push.send(i.to_bytes(8, "little") * 8, cookie=i, timeout=0.2)
                i += 1
            except exon.Timeout:
                pass
            except (exon.BrokenLink, exon.ClosedError):
                break
            drain(0)
        drain(0.5)
    finally:
        push.close(timeout=0)


def segment_bytes(directory: Path, stop: int) -> bytes:
    out = bytearray()
    for base in segment_bases(str(directory), 1):
        out += Path(segment_path(str(directory), 1, base)).read_bytes()
    return bytes(out[:stop])


@pytest.mark.slow
def test_kill_primary_promote_restart_keeps_every_confirmed_message(tmp_path) -> None:
    rng = random.Random(27)
    a = Member(tmp_path / "a", free_port())
    b = Member(tmp_path / "b", free_port())
    primary, replica = a, b
    primary.start()
    replica.start(replica_of=primary.address)
    confirmed: set[int] = set()
    node = exon.Node(endpoint="127.0.0.1:0")
    try:
        for round_ in range(ROUNDS):
            stop = threading.Event()
            t = threading.Thread(target=produce, args=(
                node, f"{primary.address}/{TAG}", round_ * 1_000_000, stop, confirmed))
            before = len(confirmed)
            t.start()
            deadline = time.monotonic() + 30
            while len(confirmed) < before + 50 and time.monotonic() < deadline:
                time.sleep(0.01)  # the pair confirms (the replica is in sync)
            time.sleep(rng.uniform(0.0, 1.0))
            primary.kill()  # mid-batch, at a random moment
            stop.set()
            t.join(30)
            assert len(confirmed) > before, f"round {round_}: nothing confirmed"
            with ArchiveClient(replica.address, node=node, timeout=10) as client:
                assert client.promote() == round_ + 2
            # on a new port: a node restarted after kill -9 at the same address does not
            # link again to a node that linked with its previous incarnation (a link-layer
            # limit of today, outside the archive)
            primary.address = f"127.0.0.1:{free_port()}"
            primary.start(replica_of=replica.address)  # cuts its tail, then follows
            primary, replica = replica, primary
        deadline = time.monotonic() + 60
        while True:
            with ArchiveClient(primary.address, node=node) as client:
                stop_p = client.stop_position("orders")
            with ArchiveClient(replica.address, node=node) as client:
                stop_r = client.stop_position("orders")
            if stop_p == stop_r or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert stop_p == stop_r
    finally:
        primary.stop()
        replica.stop()
        node.close()
    ids = Counter(int.from_bytes(r.payload[:8], "little")
                  for r in Archive(str(primary.directory)).replay("orders"))
    assert all(ids[i] == 1 for i in confirmed), "a confirmed message lost or doubled"
    assert max(ids.values()) == 1
    assert segment_bytes(primary.directory, stop_p) == segment_bytes(replica.directory, stop_p)
    epochs = Archive(str(primary.directory)).catalog.epochs
    assert [e[0] for e in epochs] == list(range(2, ROUNDS + 2))


def test_a_client_skips_a_killed_member_without_waiting_its_whole_timeout(tmp_path) -> None:
    """A client of several members whose first member was killed (no LINK will ever be
    answered) asks the next after a LINK's wait (3 s), not after its own ``timeout`` (60 s:
    the Spark sink's default), so a query that fails over does not stall a minute."""
    a = Member(tmp_path / "a", free_port())
    b = Member(tmp_path / "b", free_port())
    a.start()
    b.start(replica_of=a.address)
    try:
        a.kill()
        answers: list[object] = []
        with ArchiveClient(f"{a.address},{b.address}", timeout=60) as client:
            reader = threading.Thread(target=lambda: answers.append(client.recordings()),
                                      daemon=True)
            reader.start()
            reader.join(30)
            assert answers, "the read still waited for the killed member after 30 s"
            assert client.address == b.address
    finally:
        a.kill()
        b.stop()
