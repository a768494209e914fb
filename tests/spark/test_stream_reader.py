"""The stream reader's driver side against a plain-Python archive: offsets, admission
control in both latestOffset forms, Trigger.AvailableNow, partitions."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import StructType

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
