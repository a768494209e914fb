"""read()'s replay: resumes after the last record when the archive goes away, gives up
after replayTimeout naming the archive and the option, never skips or repeats a record."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import exon
from exon.archive import Record, RecordingNotFound
from exon.spark.clients import ReplayFailed, replay_range
from tests.spark.helpers import ArchiveService, events, push_events

Fresh = Callable[[], str]


class FlakyClient:
    """Replays positions 0, 32, 64, ... in batches of 3 and breaks after ``break_after``
    batches of each replay, ``failures`` times in all."""

    def __init__(self, count: int, break_after: int, failures: int) -> None:
        self.records = [Record(32 * i, b"%d" % i, "p", i) for i in range(count)]
        self.break_after = break_after
        self.failures = failures
        self.starts: list[int] = []

    def replay_batches(self, name: str, start: int, end: int) -> Iterator[list[Record]]:
        self.starts.append(start)
        todo = [r for r in self.records if start <= r.position < end]
        for n, i in enumerate(range(0, len(todo), 3)):
            if n == self.break_after and self.failures:
                self.failures -= 1
                raise exon.BrokenLink("archive restarted")
            yield todo[i:i + 3]


def test_replay_resumes_after_the_last_record_it_yielded() -> None:
    client = FlakyClient(40, break_after=2, failures=3)
    got = [r.position for batch in replay_range("h:1", "r", 64, 32 * 40, timeout=1,
                                                 replay_timeout=5, client=client,
                                                 sleep=lambda s: None)
           for r in batch]
    assert got == [32 * i for i in range(2, 40)]
    # each retry starts at the last record yielded (a record boundary), never later
    # (a replay from a resume point repeats that one record first, and it is dropped)
    assert client.starts == [64, 32 * 7, 32 * 12, 32 * 17]


def test_replay_gives_up_after_replay_timeout() -> None:
    now = [0.0]
    client = FlakyClient(10, break_after=0, failures=1000)

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(ReplayFailed) as info:
        list(replay_range("10.0.0.9:77", "orders", 0, 320, timeout=1, replay_timeout=3,
                          client=client, sleep=sleep, clock=lambda: now[0]))
    message = str(info.value)
    assert "10.0.0.9:77" in message
    assert "replayTimeout" in message
    assert "'orders' [0, 320)" in message
    assert 3 <= now[0] < 5


def test_a_missing_recording_is_not_retried() -> None:
    class Missing:
        def replay_batches(self, *args: Any) -> Iterator[list[Record]]:
            raise RecordingNotFound("gone")

    with pytest.raises(RecordingNotFound, match="gone"):
        list(replay_range("h:1", "gone", 0, 32, timeout=1, replay_timeout=60,
                          client=Missing()))


def test_replay_waits_for_an_archive_that_restarts(archive: ArchiveService,
                                                    fresh: Fresh) -> None:
    name = fresh()
    sent = events(500)
    push_events(archive.address, name, sent)
    from exon.archive import ArchiveClient

    with ArchiveClient(archive.address) as ac:
        end = ac.stop_position(name)
    archive.stop()  # down when the task starts; back 2 s later on the same address
    restarter = threading.Timer(2.0, lambda: archive.start(endpoint=archive.address))
    restarter.start()
    try:
        started = time.monotonic()
        got = [r.payload for batch in replay_range(archive.address, name, 0, end, timeout=1,
                                                   replay_timeout=30)
               for r in batch]
        assert time.monotonic() - started >= 1.5
    finally:
        restarter.join()
    assert got == sent


def test_replay_fails_clearly_when_the_archive_stays_down(archive: ArchiveService,
                                                           fresh: Fresh) -> None:
    name = fresh()
    push_events(archive.address, name, events(5))
    address = archive.address
    archive.stop()
    try:
        with pytest.raises(ReplayFailed, match=address):
            list(replay_range(address, name, 0, 1 << 20, timeout=0.5, replay_timeout=1))
    finally:
        archive.start(endpoint=address)
