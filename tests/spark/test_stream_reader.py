"""The stream reader's driver side against a plain-Python archive: offsets, admission
control in both latestOffset forms, Trigger.AvailableNow, partitions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows
from pyspark.sql.types import StructType

from exon.archive import ReplayRangeError
from exon.spark import source as source_module
from exon.spark.options import ExonOptionError
from exon.spark.plan import DataLoss, DataLossError
from exon.spark.source import ExonPartition, ExonStreamReader
from tests.spark.fakes import FakeArchive

RAW = StructType.fromJson({"type": "struct", "fields": [
    {"name": "position", "type": "long", "nullable": True, "metadata": {}}]})


def _reader(archive: FakeArchive, **options: str) -> ExonStreamReader:
    reader = ExonStreamReader({"archive": "127.0.0.1:1", "recording": "orders", **options},
                              RAW)
    reader._client = archive  # what the runner process would have opened
    return reader


def test_offsets_cover_the_recording_and_partitions_carry_ranges_only() -> None:
    archive = FakeArchive(orders=[50] * 250)
    reader = _reader(archive, maxRecordsPerPartition="100")
    start = reader.initialOffset()
    assert start == {"orders": 0}
    assert isinstance(reader.getDefaultReadLimit(), ReadAllAvailable)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"orders": archive.stops["orders"]}
    parts = reader.partitions(start, end)
    assert all(isinstance(p, ExonPartition) for p in parts)
    assert [archive.count("orders", p.start, p.end) for p in parts] == [100, 100, 50]


def test_max_records_per_trigger_is_the_default_read_limit_and_caps() -> None:
    archive = FakeArchive(orders=[10] * 100)
    reader = _reader(archive, maxRecordsPerTrigger="30")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxRows(30)
    offset, batches = reader.initialOffset(), 0
    while True:
        end = reader.latestOffset(offset, limit)
        if end == offset:
            break
        assert archive.count("orders", offset["orders"], end["orders"]) <= 30
        offset, batches = end, batches + 1
    assert batches == 4
    assert offset == {"orders": archive.stops["orders"]}


def test_the_zero_argument_form_caps_from_the_last_planned_end() -> None:
    archive = FakeArchive(orders=[10] * 100)
    reader = _reader(archive, maxRecordsPerTrigger="30")
    # before any batch (a restart, say) the start is unknown: no cap, never backwards
    assert reader._latest(None, 30) == {"orders": archive.stops["orders"]}
    reader.partitions({"orders": 0}, {"orders": archive.positions["orders"][40]})
    end = reader._latest(None, 30)
    assert archive.count("orders", archive.positions["orders"][40], end["orders"]) == 30


def test_available_now_stops_at_what_was_there_when_it_began() -> None:
    archive = FakeArchive(orders=[10] * 10)
    reader = _reader(archive)
    reader.prepareForTriggerAvailableNow()
    target = archive.stops["orders"]
    archive.positions["orders"].append(target)  # a record arrives afterwards
    archive.stops["orders"] = target + 64
    assert reader.latestOffset({"orders": 0}, ReadAllAvailable()) == {"orders": target}


def test_an_offset_of_other_recordings_is_refused() -> None:
    reader = _reader(FakeArchive(orders=[1]))
    with pytest.raises(ValueError, match="checkpoint"):
        reader.partitions({"clicks": 0}, {"clicks": 32})


def test_a_truncated_start_fails_naming_the_recording_and_the_lost_positions() -> None:
    archive = FakeArchive(orders=[10] * 100)
    reader = _reader(archive)
    start = reader.initialOffset()
    lost_to = archive.positions["orders"][30]
    archive.truncate("orders", lost_to)
    for plan in (lambda: reader.latestOffset(start, ReadAllAvailable()),
                 lambda: reader.partitions(start, {"orders": archive.stops["orders"]})):
        with pytest.raises(DataLossError, match=rf"'orders'.*\[0, {lost_to}\)") as info:
            plan()
        assert (info.value.recording, info.value.start, info.value.end) == ("orders", 0,
                                                                             lost_to)


def test_without_fail_on_data_loss_the_lost_range_is_skipped_warned_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    archive = FakeArchive(orders=[10] * 100)
    reader = _reader(archive, failOnDataLoss="false")
    start = reader.initialOffset()
    lost_to = archive.positions["orders"][30]
    archive.truncate("orders", lost_to)
    with caplog.at_level("WARNING", logger="exon.spark"):
        end = reader.latestOffset(start, ReadAllAvailable())
        parts = reader.partitions(start, end)
    assert [p.start for p in parts] == [lost_to]
    assert sum(archive.count("orders", p.start, p.end) for p in parts) == 70
    assert reader.lost == [DataLoss("orders", 0, lost_to)]  # once, not per call
    assert reader.lost_bytes == lost_to
    assert len([r for r in caplog.records if "truncated" in r.getMessage()]) == 1


def test_min_records_per_trigger_waits_for_them_or_for_max_trigger_delay() -> None:
    archive = FakeArchive(orders=[10] * 10)

    def grow(n: int) -> None:
        for _ in range(n):
            archive.positions["orders"].append(archive.stops["orders"])
            archive.stops["orders"] += 64

    reader = _reader(archive, minRecordsPerTrigger="25", maxRecordsPerTrigger="40",
                     maxTriggerDelay="2s")
    now = [100.0]
    reader._clock = lambda: now[0]
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMinRows(25)
    start = reader.initialOffset()
    first = reader.latestOffset(start, limit)  # as Kafka: the first trigger is not held
    assert archive.count("orders", 0, first["orders"]) == 10
    grow(10)
    now[0] += 1.0
    assert reader.latestOffset(first, limit) == first  # 10 < 25: held back
    now[0] += 0.9
    assert reader.latestOffset(first, limit) == first
    now[0] += 0.2  # maxTriggerDelay since the last trigger let through: what is there goes
    second = reader.latestOffset(first, limit)
    assert archive.count("orders", first["orders"], second["orders"]) == 10
    grow(50)  # enough at once (the delay restarted), capped by maxRecordsPerTrigger
    now[0] += 0.1
    capped = reader.latestOffset(second, limit)
    assert archive.count("orders", second["orders"], capped["orders"]) == 40
    # Trigger.AvailableNow: its last records are never held back
    reader.prepareForTriggerAvailableNow()
    now[0] += 0.1
    assert reader.latestOffset(capped, limit) == {"orders": archive.stops["orders"]}


def test_starting_timestamp_starts_at_the_first_record_at_or_after_it() -> None:
    archive = FakeArchive(orders=[10] * 10, clicks=[10] * 10)
    both = {"archive": "127.0.0.1:1", "recording": "orders,clicks"}
    reader = ExonStreamReader({**both, "startingTimestamp": "0"}, RAW)
    reader._client = archive
    assert reader.initialOffset() == {"orders": 0, "clicks": 0}
    archive.stamps["orders"] = [i * 2_000_000 for i in range(10)]  # every 2 ms
    archive.stamps["clicks"] = [i * 1_000_000 for i in range(10)]  # every 1 ms
    reader = ExonStreamReader({**both, "startingPositionByTimestamp":
                               '{"orders": 5, "clicks": 5}'}, RAW)
    reader._client = archive
    assert reader.initialOffset() == {"orders": archive.positions["orders"][3],
                                      "clicks": archive.positions["clicks"][5]}


def test_the_stop_positions_are_reported_as_the_latest_offset() -> None:
    archive = FakeArchive(orders=[10] * 10)
    reader = _reader(archive, maxRecordsPerTrigger="3")
    assert reader.reportLatestOffset() is None  # before any trigger
    end = reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
    assert end["orders"] < archive.stops["orders"]
    assert reader.reportLatestOffset() == {"orders": archive.stops["orders"]}


def test_a_task_whose_range_was_truncated_under_it_fails_or_skips(
        monkeypatch: pytest.MonkeyPatch) -> None:
    archive = FakeArchive(orders=[10] * 100)
    positions = archive.positions["orders"]
    archive.truncate("orders", positions[40])

    def replay_range(address: str, recording: str, start: int, end: int,
                     **kwargs: object) -> Iterator[list[tuple[int, bytes, str, int]]]:
        if start < archive.starts[recording]:
            raise ReplayRangeError(f"range [{start}, {end}) is outside")
        yield [(p, b"x", "p", 0) for p in positions if start <= p < end]

    monkeypatch.setattr(source_module.clients, "replay_range", replay_range)
    monkeypatch.setattr(source_module.clients, "shared_client", lambda *a: archive)
    part = ExonPartition("orders", positions[10], positions[60])
    reader = _reader(archive)
    with pytest.raises(DataLossError, match=rf"\[{positions[10]}, {positions[40]}\)"):
        list(reader.read(part))
    reader = _reader(archive, failOnDataLoss="false")
    rows = [row for batch in reader.read(part) for row in batch.column(0).to_pylist()]
    assert rows == positions[40:60]


def test_an_end_is_refused_on_a_stream() -> None:
    for option, value in (("endingPosition", "64"), ("endingTimestamp", "5"),
                          ("endingPositionByTimestamp", '{"orders": 5}')):
        with pytest.raises(ExonOptionError, match="batch reads"):
            _reader(FakeArchive(orders=[1]), **{option: value})
