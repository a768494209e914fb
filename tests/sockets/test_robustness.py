"""Robustness of the receive/wake path: successive process pairs on one media driver (the
`exon bench sockets` pattern), the spin-then-park wait, and the short receive path."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

import exon
from exon.native import ffi, lib
from tests.sockets.helpers import ROOT, read_line, rest_of_output


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "exon.bench.sockets_worker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)


def _stop(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_successive_push_pull_process_pairs_on_one_driver(driver) -> None:
    """Each pair is a fresh PULL process (no images at start) and a fresh PUSH process on
    the same driver, with enough traffic to rotate the 1 MiB terms; every pair completes."""
    for messages, size in ((6000, 64), (3000, 1024), (6000, 64)):
        pull = _worker("pull", driver.dir, str(messages), "16")
        push = None
        try:
            peer = read_line(pull, timeout=20)
            push = _worker("push", driver.dir, str(messages), str(size), peer)
            out = rest_of_output(pull, timeout=60)
            assert pull.returncode == 0, pull.stderr.read()[-2000:] if pull.stderr else ""
            assert float(out.strip().splitlines()[-1]) >= 0.0
            _out, perr = push.communicate(timeout=60)
            assert push.returncode == 0, perr[-2000:]
        finally:
            _stop(*(p for p in (push, pull) if p is not None))


def test_lt_wait_timeout_ring_and_spin() -> None:
    word = ffi.new("int32_t *")
    start = time.monotonic()
    assert lib.exon_lt_wait(ffi.NULL, 0, word, 0, 20_000_000) == lib.EXON_E_TIMEOUT
    assert time.monotonic() - start >= 0.015
    # spinning longer than the timeout: still bounded by the timeout
    start = time.monotonic()
    assert lib.exon_lt_wait(ffi.NULL, 0, word, 10_000_000_000, 20_000_000) == lib.EXON_E_TIMEOUT
    assert time.monotonic() - start < 5.0
    for spin_ns in (0, 2_000_000_000):  # rung while parked, rung while spinning
        timer = threading.Timer(0.05, lambda: lib.exon_doorbell_ring(word))
        timer.start()
        try:
            start = time.monotonic()
            assert lib.exon_lt_wait(ffi.NULL, 0, word, spin_ns, 5_000_000_000) == 0
            assert time.monotonic() - start < 4.0
        finally:
            timer.join()


def test_plain_receive_path_keeps_fair_queue_and_credit(make_node) -> None:
    a, b, c = make_node(), make_node(), make_node()
    pull = a.socket("pull", tag=1, credits=4)
    pushes = [n.socket("push") for n in (b, c)]
    for p in pushes:
        p.link(f"{a.address}/1", timeout=5)
    # 3 credit windows per pusher: only possible if receive() hands credit back
    for k in range(12):
        for i, p in enumerate(pushes):
            p.send(bytes([i, k]), timeout=5)
        got = [pull.receive(timeout=5) for _ in range(2)]
        assert all(isinstance(m, exon.Message) for m in got)
        assert sorted(m.payload for m in got) == [bytes([0, k]), bytes([1, k])]
        assert {m.peer for m in got} == {exon.Peer.parse(f"{n.address}/{p.tag}")
                                         for n, p in zip((b, c), pushes, strict=True)}


def test_message_is_a_value() -> None:
    peer = exon.Peer("127.0.0.1", 5, 1)
    m = exon.Message(b"x", peer)
    assert m == exon.Message(payload=b"x", peer=peer)
    assert m.payload == b"x"
    assert m.peer == peer
    assert m != (b"x", peer)
    assert m != exon.Message(b"y", peer)
    assert hash(m) == hash(exon.Message(b"x", peer))
    with pytest.raises(AttributeError):
        m.payload = b"z"  # type: ignore[misc]
