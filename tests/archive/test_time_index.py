"""The time index: ``position_at`` against a scan of every record, as the recording grows,
is truncated, and through the service, the client and ``exon archive position-at``."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from exon.archive import Archive, ArchiveClient, ArchiveService, ControlError
from exon.archive import time_index as time_index_module
from exon.archive.errors import IndexBuilding
from exon.archive.format import Record
from exon.archive.time_index import TimeIndex
from tests.archive.conftest import PRODUCER, SEGMENT


def _append(ar: Archive, stamps: list[int], size: int = 200) -> None:
    """One batch per timestamp (a batch's records share its receive time)."""
    w = ar.writer("orders")
    for stamp in stamps:
        w.append([b"x" * size] * 3, [PRODUCER] * 3, stamp)


def _scan(ar: Archive, timestamp: int) -> int:
    for record in ar.replay("orders", ar.recording("orders").start_position):
        if record.timestamp >= timestamp:
            return record.position
    return ar.stop_position("orders")


@pytest.fixture
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time_index_module, "CHUNK_RECORDS", 8)  # many runs, few records


@pytest.mark.usefixtures("small_runs")
def test_position_at_is_the_first_record_at_or_after_even_when_the_clock_steps_back(
        owned: Archive) -> None:
    rng = random.Random(3)
    # mostly rising, with steps back (NTP): a sorted search over raw timestamps would err
    stamps = [1000 * i + rng.choice([0, 0, 0, -5000]) + 10_000 for i in range(300)]
    _append(owned, stamps)
    assert owned.stop_position("orders") > 2 * SEGMENT  # runs cross segment files
    probes = [0, 1, *rng.sample(range(5000, 320_000), 60), max(stamps), max(stamps) + 1]
    for t in probes:
        assert owned.position_at("orders", t) == _scan(owned, t), t
    assert owned.position_at("orders", 0) == 0
    assert owned.position_at("orders", max(stamps) + 1) == owned.stop_position("orders")


@pytest.mark.usefixtures("small_runs")
def test_the_index_grows_with_the_recording_and_follows_a_truncation(owned: Archive) -> None:
    assert owned.position_at("orders", 5) == 0  # empty: the start (= the stop)
    _append(owned, list(range(100, 200)))
    first = owned.position_at("orders", 150)
    assert first == _scan(owned, 150)
    _append(owned, list(range(200, 400)))  # only the new records are read
    assert owned.position_at("orders", 350) == _scan(owned, 350)
    assert owned.position_at("orders", 150) == first
    start = owned.truncate("orders", before=owned.position_at("orders", 300))
    assert start > 0
    # a time before what is left: the new start position (the nearest boundary)
    assert owned.position_at("orders", 150) == start
    assert owned.position_at("orders", 390) == _scan(owned, 390)


def test_a_bad_timestamp_is_a_clear_error(owned: Archive) -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="timestamp"):
            owned.position_at("orders", bad)  # type: ignore[arg-type]


@pytest.mark.net
def test_position_at_and_count_through_the_service_and_the_cli(tmp_path) -> None:
    directory = str(tmp_path / "a")
    with Archive(directory, owner=True) as ar:
        ar.create_recording("orders", segment_length=SEGMENT, ingest_tag=10)
        _append(ar, list(range(1000, 1100)))
        want = _scan(ar, 1050)
        stop = ar.stop_position("orders")
    with ArchiveService(directory, ingest={"orders": 10}) as svc, \
            ArchiveClient(svc.address, timeout=10) as ac:
        assert ac.position_at("orders", 1050) == want
        assert ac.count("orders", want) == 150  # 50 batches of 3 records
        assert ac.count("orders", 0, want, max_records=7) == 7
        with pytest.raises(ControlError, match="timestamp"):
            ac.position_at("orders", -1)
        cli = [sys.executable, "-m", "exon.cli", "archive", "position-at"]
        out = subprocess.run([*cli, "--archive", svc.address, "orders", "--at", "1050"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert int(out.stdout) == want
    out = subprocess.run([*cli, "--dir", directory, "orders", "--at", "2100-01-01T00:00"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == stop
    out = subprocess.run([*cli, "--dir", directory, "orders", "--at", "yesterday"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--at" in out.stderr


def test_a_long_build_answers_index_building_and_then_the_position() -> None:
    release = threading.Event()
    records = [Record(i * 32, b"", "p", 1000 + i) for i in range(100)]

    class SlowFiles:
        def batches(self, start: int, end: int) -> Iterator[list[Record]]:
            release.wait(10)
            yield [r for r in records if start <= r.position < end]

        def close(self) -> None:
            pass

    class SlowSource:
        def recording(self, recording: str | int) -> Any:
            return SimpleNamespace(id=1, name="orders", start_position=0,
                                   stop_position=100 * 32)

        def files(self, recording: str | int) -> SlowFiles:
            return SlowFiles()

    index = TimeIndex(SlowSource())
    with pytest.raises(IndexBuilding, match=r"'orders'.*being built"):
        index.position_at("orders", 1050, wait=0.05)
    release.set()
    assert index.position_at("orders", 1050, wait=5) == 50 * 32
