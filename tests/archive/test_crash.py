"""kill -9 of the archive service at random moments: after each restart every message
whose cookie came back is replayed intact, in order, once; nothing torn or duplicated is
ever replayed; recording resumes."""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest

import exon
from exon.archive import Archive

pytestmark = [pytest.mark.net, pytest.mark.slow]


def start_service(directory: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "exon.cli", "archive", "serve", "--dir", directory,
         "--ingest", "orders=10", "--segment-length", "65536"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        raise AssertionError(f"service did not start: {proc.stderr.read() if proc.stderr else ''}")
    return proc, line


def produce_until_killed(address: str, first_seq: int, rng: random.Random,
                         stop: threading.Event, confirmed: set[int]) -> int:
    """Push numbered messages (random sizes, some past the MTU) with cookies until
    ``stop``; the cookies that come back go into ``confirmed``. Returns the next seq."""
    seq = first_seq
    with exon.Node() as node:
        push = node.socket("push")
        push.link(f"{address}/10", timeout=10)
        try:
            while not stop.is_set():
                size = rng.choice([8, 100, 1000, 3000, 20000])
                payload = struct.pack("<Q", seq) + bytes([seq % 251]) * (size - 8)
                push.send(payload, cookie=seq, timeout=1.0)
                seq += 1
                while True:
                    try:
                        item = push.receive_nowait()
                    except exon.ExonError:
                        break
                    if isinstance(item, exon.Cookie):
                        confirmed.add(item.value)
        except exon.ExonError:
            pass  # the service died under us
        # cookies already back are kept; the rest never will be
        while True:
            try:
                item = push.receive(timeout=0.2)
            except exon.ExonError:
                break
            if isinstance(item, exon.Cookie):
                confirmed.add(item.value)
        node.close(timeout=0.2)
    return seq


def test_kill_9_at_random_points_loses_nothing_confirmed(tmp_path) -> None:
    directory = str(tmp_path / "arch")
    rng = random.Random(int(os.environ.get("EXON_CRASH_SEED", "9")))
    confirmed: set[int] = set()
    seq = 0
    for round_ in range(4):
        proc, address = start_service(directory)
        try:
            stop = threading.Event()
            result: list[int] = []
            def produce(result: list[int] = result, address: str = address, seq: int = seq,
                        stop: threading.Event = stop) -> None:
                result.append(produce_until_killed(address, seq, rng, stop, confirmed))

            t = threading.Thread(target=produce)
            t.start()
            time.sleep(rng.uniform(0.3, 1.2))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            stop.set()
            t.join(30)
            assert not t.is_alive()
            seq = result[0]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        # a restart recovers: every confirmed message is there once, in order, intact
        proc, address = start_service(directory)
        try:
            with exon.archive.ArchiveClient(address) as ac:
                records = list(ac.replay("orders"))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        seqs = [struct.unpack_from("<Q", r.payload)[0] for r in records]
        assert len(seqs) == len(set(seqs)), "a record was replayed twice"
        assert seqs == sorted(seqs)
        for r, s in zip(records, seqs, strict=False):
            assert r.payload[8:] == bytes([s % 251]) * (len(r.payload) - 8)
        missing = confirmed - set(seqs)
        assert not missing, f"round {round_}: confirmed but not recorded: {sorted(missing)[:5]}"
        assert confirmed, "the producer got no cookie at all"
    with Archive(directory) as ro:
        [report] = ro.verify()
        assert report["ok"]
        assert report["records"] >= len(confirmed)
