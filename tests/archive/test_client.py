"""ArchiveClient's own waits: closing with replays open, a service that died, and follow
replays against the service's keepalive cadence."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

import exon
from exon.archive import ArchiveClient, ArchiveService
from exon.archive.client import FOLLOW_MIN_WAIT
from exon.archive.protocol import KEEPALIVE_INTERVAL
from tests.archive.conftest import SEGMENT
from tests.archive.test_crash import start_service

pytestmark = pytest.mark.net


def _record(address: str, payloads: list[bytes]) -> None:
    with exon.Node() as node:
        push = node.socket("push")
        push.link(f"{address}/10", timeout=5)
        for i, p in enumerate(payloads):
            push.send(p, cookie=i, timeout=10)
        for _ in payloads:
            assert isinstance(push.receive(timeout=10), exon.Cookie)


def test_closing_the_client_stops_its_open_replays_at_once(tmp_path) -> None:
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10},
                        segment_length=SEGMENT) as svc:
        _record(svc.address, [os.urandom(1000) for _ in range(3000)])
        ac = ArchiveClient(svc.address, timeout=5)
        it = ac.replay_batches("orders")
        assert next(it)  # the service now waits on credit to send the rest
        started = time.monotonic()
        ac.close()
        # it waited on the open replay's links to drain (5 s) and never told the service
        assert time.monotonic() - started < 2.0
        end = time.monotonic() + 5
        while svc._replays and time.monotonic() < end:
            time.sleep(0.02)
        assert svc._replays == {}
        with pytest.raises(exon.ExonError):
            next(it)


@pytest.mark.slow
def test_a_dead_service_fails_a_replay_within_one_timeout(tmp_path) -> None:
    proc, address = start_service(str(tmp_path / "a"))
    try:
        _record(address, [b"a", b"b"])
        failed: list[Any] = []
        with ArchiveClient(address, timeout=FOLLOW_MIN_WAIT) as ac:
            it = ac.replay("orders", follow=True)
            assert [next(it).payload, next(it).payload] == [b"a", b"b"]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            started = time.monotonic()

            def follow() -> None:
                try:
                    next(it)
                except exon.ExonError as exc:
                    failed.append((exc, time.monotonic() - started))

            t = threading.Thread(target=follow, daemon=True)
            t.start()
            t.join(4 * FOLLOW_MIN_WAIT)
        assert len(failed) == 1
        exc, seconds = failed[0]
        assert isinstance(exc, exon.Timeout)
        # one timeout, not a second one spent asking the dead service to stop the replay
        assert seconds < FOLLOW_MIN_WAIT + 1.5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_follow_replay_outwaits_the_keepalives_whatever_the_timeout(tmp_path) -> None:
    """Idle, the service sends a keepalive each KEEPALIVE_INTERVAL (a little later under
    load): a client timeout that short must not end an idle follow replay."""
    assert FOLLOW_MIN_WAIT >= 3 * KEEPALIVE_INTERVAL
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10},
                        segment_length=SEGMENT) as svc:
        _record(svc.address, [b"only"])
        got: list[Any] = []
        stop = threading.Event()
        with ArchiveClient(svc.address, timeout=KEEPALIVE_INTERVAL) as ac:

            def follow() -> None:
                try:
                    for rec in ac.replay("orders", follow=True):
                        got.append(rec.payload)
                        if stop.is_set():
                            return
                except exon.ExonError as exc:
                    got.append(exc)

            t = threading.Thread(target=follow, daemon=True)
            t.start()
            time.sleep(4 * KEEPALIVE_INTERVAL)  # idle: only keepalives come
            assert got == [b"only"]
            stop.set()
            _record(svc.address, [b"then"])
            t.join(10)
            assert not t.is_alive()
        assert got == [b"only", b"then"]


def test_finished_replays_are_not_kept_by_the_client(tmp_path) -> None:
    """A replay that ended (END, or an error) leaves the client's list of open replays:
    they piled up, and close() asked the service to stop each (1 s each once it is gone)."""
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10},
                        segment_length=SEGMENT) as svc:
        _record(svc.address, [b"x"])
        ac = ArchiveClient(svc.address, timeout=5)
        for _ in range(5):
            assert [r.payload for r in ac.replay("orders")] == [b"x"]
        with pytest.raises(exon.ExonError):
            list(ac.replay("orders", start=10**6))  # refused: nothing was listed
        assert ac._replays == {}
        ac.close()
