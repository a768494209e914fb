"""format("exon") as a sink: PUSH to a PULL (at-least-once), into a recording
(exactly-once through the archive's keyed ingest)."""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Callable
from typing import Any

import pytest

import exon
from exon.archive import ArchiveClient
from tests.spark.helpers import ArchiveService, events, push_events

Fresh = Callable[[], str]


def _source(spark: Any, archive: ArchiveService, recording: str, **options: str) -> Any:
    reader = (spark.readStream.format("exon").option("archive", archive.address)
              .option("recording", recording))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _finish(writer: Any, checkpoint: pathlib.Path) -> Any:
    query = (writer.option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return query


def _payloads(archive: ArchiveService, recording: str) -> list[bytes]:
    with ArchiveClient(archive.address) as ac:
        return [r.payload for r in ac.replay(recording)]


def test_peer_mode_pushes_every_row_to_a_pull(spark: Any, archive: ArchiveService,
                                              fresh: Fresh, tmp_path: pathlib.Path) -> None:
    source = fresh()
    sent = events(2000)
    push_events(archive.address, source, sent)
    received: list[bytes] = []
    with exon.Node("127.0.0.1:0") as node:
        pull = node.socket("pull", tag=7)
        stop = threading.Event()

        def drain() -> None:
            while not stop.is_set():
                try:
                    received.append(pull.receive(timeout=0.2).payload)
                except exon.Timeout:
                    continue

        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        try:
            df = _source(spark, archive, source, maxRecordsPerPartition="500").select("payload")
            _finish(df.writeStream.format("exon").option("peer", f"{node.address}/7"),
                    tmp_path / "ck")
        finally:
            stop.set()
            thread.join(5)
    # every row's cookie came back before its task returned: all are here (at-least-once:
    # a retried task could add copies; none failed here)
    assert sorted(received) == sorted(sent)


def test_archive_mode_records_every_row_and_a_rerun_batch_adds_nothing(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    source, out = fresh(), fresh()
    sent = events(1000)
    push_events(archive.address, source, sent)
    df = _source(spark, archive, source, maxRecordsPerTrigger="500",
                 maxRecordsPerPartition="200").select("payload")
    writer = (df.writeStream.format("exon").option("archive", archive.address)
              .option("recording", out))
    query = _finish(writer, tmp_path / "ck")
    assert sorted(_payloads(archive, out)) == sorted(sent)
    # Spark re-runs a batch whose commit it never wrote (a crash between the offset log and
    # the commit log); the archive drops the rows it already recorded for that batch
    batches = sorted(int(p.name) for p in (tmp_path / "ck" / "commits").iterdir()
                     if p.name.isdigit())
    assert len(batches) == 2
    commits = tmp_path / "ck" / "commits"
    (commits / str(batches[-1])).unlink()
    (commits / f".{batches[-1]}.crc").unlink(missing_ok=True)
    with ArchiveClient(archive.address) as ac:
        before = ac.stop_position(out)
    rerun = _finish(writer, tmp_path / "ck")
    assert rerun.id == query.id
    assert [p["batchId"] for p in rerun.recentProgress if p["numInputRows"]] == [batches[-1]]
    with ArchiveClient(archive.address) as ac:
        assert ac.stop_position(out) == before
    assert sorted(_payloads(archive, out)) == sorted(sent)


def test_rows_without_a_payload_column_travel_as_msgpack(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    source, out = fresh(), fresh()
    push_events(archive.address, source, events(300))
    ddl = "key string, value double, seq long"
    df = _source(spark, archive, source, format="json", schema=ddl)
    rows = df.select("key", "value", "seq", "timestamp")
    _finish(rows.writeStream.format("exon").option("archive", archive.address)
            .option("recording", out), tmp_path / "ck")
    back = (spark.read.format("exon").option("archive", archive.address)
            .option("recording", out).option("format", "msgpack")
            .option("schema", ddl + ", timestamp_ timestamp").load())
    got = back.collect()
    assert sorted((r.key, r.value, r.seq) for r in got) == sorted(
        (e["key"], e["value"], e["seq"]) for e in map(json.loads, events(300)))
    assert all(r._corrupt is None for r in got)


def test_peer_mode_fails_the_task_when_nobody_confirms(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    source = fresh()
    push_events(archive.address, source, events(10))
    with exon.Node("127.0.0.1:0") as node:  # no PULL on tag 9: the link is refused
        df = _source(spark, archive, source).select("payload")
        query = (df.writeStream.format("exon").option("peer", f"{node.address}/9")
                 .option("timeout", "1").option("checkpointLocation", str(tmp_path / "ck"))
                 .trigger(availableNow=True).start())
        with pytest.raises(Exception, match="option 'peer'"):
            query.awaitTermination(120)
