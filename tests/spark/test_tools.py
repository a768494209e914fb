"""The demo's and the bench's helpers that need no Spark: events, a file sink's committed
files, the capacity figure."""

from __future__ import annotations

import json
import pathlib

from exon.bench.spark import _capacity, _line
from exon.spark.tools import committed_batches, committed_files, event


def test_bench_lines_are_64_bytes_of_json() -> None:
    line = _line(12345, 1_700_000_000_000_000_000)
    assert len(line) == 64
    assert line.endswith(b"\n")
    assert json.loads(line) == {"key": "k1", "value": 345, "sent_ns": 1_700_000_000_000_000_000}
    assert len(event("p", 7, 8, size=64)) == 64
    assert json.loads(event("p", 7, 8))["id"] == "p-7"


def _metadata(out: pathlib.Path, batch: str, paths: list[str]) -> None:
    log = out / "_spark_metadata"
    log.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": f"file://{p}", "size": 1, "isDir": False,
                                  "modificationTime": 0, "blockReplication": 1,
                                  "blockSize": 1, "action": "add"}) for p in paths]
    (log / batch).write_text("\n".join(lines) + "\n")


def test_committed_files_follow_the_sink_log_only(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    _metadata(out, "0", ["/x/a.parquet"])
    _metadata(out, "1", ["/x/b.parquet", "/x/c.parquet"])
    _metadata(out, "2.compact", ["/x/a.parquet", "/x/b.parquet", "/x/c.parquet",
                                 "/x/d.parquet"])
    (out / "_spark_metadata" / ".2.compact.crc").write_text("")
    (out / "orphan.parquet").write_text("")  # written by a batch that never committed
    assert committed_files(out) == ["/x/a.parquet", "/x/b.parquet", "/x/c.parquet",
                                    "/x/d.parquet"]
    assert [(b, files) for b, _, files in committed_batches(out)] == [
        (0, ["/x/a.parquet"]), (1, ["/x/b.parquet", "/x/c.parquet"]),
        (2, ["/x/d.parquet"])]
    assert committed_files(tmp_path / "nothing") == []


def test_capacity_leaves_the_first_busy_batch_out() -> None:
    def p(rows: int, ms: int) -> dict[str, object]:
        return {"numInputRows": rows, "durationMs": {"triggerExecution": ms}}

    progress = [p(0, 500), p(1000, 10_000), p(3000, 1000), p(0, 100), p(1000, 1000)]
    assert _capacity(progress) == 4000 / 2.0
    assert _capacity([p(500, 250)]) == 2000.0
    assert _capacity([]) == 0.0
