"""The Spark bench's inputs: the same events for every source, and the no-work ceiling
source's offsets and rows (no SparkSession: the reader is plain Python)."""

from __future__ import annotations

import json
import pathlib

import pytest

from exon.bench.spark import LINES_PER_FILE, SIZE, write_event_files

pytest.importorskip("pyspark", reason="the ceiling source needs the spark extra")
pytest.importorskip("pyarrow", reason="the ceiling source needs pyarrow")


def test_event_files_hold_every_event_once_each_stamped_when_made(tmp_path: pathlib.Path) -> None:
    count = LINES_PER_FILE + 7
    files = write_event_files(tmp_path / "in", count, tmp_path / "staging")
    assert files == 2
    lines = b"".join(p.read_bytes() for p in sorted((tmp_path / "in").iterdir())).splitlines(
        keepends=True)
    assert len(lines) == count
    assert all(len(line) == SIZE and line.endswith(b"\n") for line in lines)
    events = [json.loads(line) for line in lines]
    assert [e["value"] for e in events[:3]] == [0, 1, 2]
    stamps = [e["sent_ns"] for e in events]
    assert stamps == sorted(stamps)
    # a live producer's stamps differ from event to event; one per file would not
    assert len(set(stamps)) > count // 2


def test_ceiling_source_plans_two_tasks_per_trigger_up_to_its_rows() -> None:
    from exon.bench.spark_ceiling import CeilingSource

    reader = CeilingSource({"ROWS": "25000", "perTrigger": "10000"}).streamReader(None)
    assert reader.initialOffset() == {"n": 0}
    assert reader.latestOffset({"n": 0}, None) == {"n": 10000}
    assert reader.latestOffset({"n": 20000}, None) == {"n": 25000}  # never past rows
    parts = reader.partitions({"n": 20000}, {"n": 25000})
    assert [p.value for p in parts] == [(20000, 22500), (22500, 25000)]


def test_ceiling_source_rows_have_the_bench_columns_and_their_own_stamps() -> None:
    from pyspark.sql.datasource import InputPartition

    from exon.bench.spark_ceiling import CeilingSource

    reader = CeilingSource({"rows": "20000", "pertrigger": "20000"}).streamReader(None)
    batches = list(reader.read(InputPartition((0, 10000))))
    assert sum(b.num_rows for b in batches) == 10000
    assert batches[0].schema.names == ["key", "value", "sent_ns"]
    stamps = [s for b in batches for s in b.column(2).to_pylist()]
    assert len(set(stamps)) == len(stamps)  # Parquet gets a clock's column, not a repeat
    later = next(iter(reader.read(InputPartition((10000, 10001))))).column(2).to_pylist()
    assert later[0] > max(stamps)
