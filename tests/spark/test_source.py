"""format("exon") as a source: streaming and batch reads against a real archive service."""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from exon.archive import ArchiveClient
from tests.spark.helpers import ArchiveService, events, push_events, wait_for

EVENT_DDL = "key string, value double, seq long"
Fresh = Callable[[], str]


def _stream(spark: Any, archive: ArchiveService, **options: str) -> Any:
    reader = spark.readStream.format("exon").option("archive", archive.address)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run_available_now(df: Any, name: str, tmp_path: pathlib.Path) -> Any:
    query = (df.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / f"ck-{name}"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return query


def test_stream_reads_every_record_once_within_admission_limits_and_commits(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    orders = fresh()
    sent = events(3000)
    push_events(archive.address, orders, sent)
    df = _stream(spark, archive, recording=orders, maxRecordsPerPartition="700",
                 maxRecordsPerTrigger="1000", consumer="test-stream")
    assert df.schema.simpleString() == (
        "struct<position:bigint,payload:binary,producer:string,timestamp:timestamp>")
    query = _run_available_now(df, "raw_stream", tmp_path)
    rows = spark.table("raw_stream").collect()
    with ArchiveClient(archive.address) as ac:
        replayed = list(ac.replay(orders))
        info = ac.recording(orders)
    assert sorted(bytes(r.payload) for r in rows) == sorted(sent)
    assert sorted(r.position for r in rows) == [r.position for r in replayed]
    assert {r.producer for r in rows} == {r.producer for r in replayed}
    # admission control: at most maxRecordsPerTrigger records per micro-batch
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    assert [p["numInputRows"] for p in progress] == [1000, 1000, 1000]
    # commit(end) told the archive how far this query consumed. Spark commits a batch's
    # offsets to the source when it plans the next one: here up to the second batch.
    ends = [json.loads(p["sources"][0]["endOffset"])[orders] for p in progress]
    assert ends[-1] == info.stop_position
    # the archive's stop positions, as the source's latestOffset in Spark's progress
    assert json.loads(progress[0]["sources"][0]["latestOffset"]) == {orders: info.stop_position}
    assert info.consumers.get("test-stream") == ends[1]


@pytest.mark.slow  # about 13 s: three micro-batches and a 1 s delay on a streaming query
def test_min_records_per_trigger_holds_batches_back_until_the_records_or_the_delay(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    orders = fresh()
    push_events(archive.address, orders, events(300))
    df = _stream(spark, archive, recording=orders, minRecordsPerTrigger="100",
                 maxRecordsPerTrigger="200", maxTriggerDelay="1s")
    query = (df.writeStream.format("memory").queryName("min_rows")
             .option("checkpointLocation", str(tmp_path / "ck-min-rows"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        rows = lambda: spark.table("min_rows").count()  # noqa: E731
        wait_for(lambda: rows() == 300, 60, what="the first 300 rows")
        push_events(archive.address, orders, events(10, start=300))  # < 100: the delay
        wait_for(lambda: rows() == 310, 60, what="the 10 rows after maxTriggerDelay")
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        # capped at 200; then 100 are enough at once; then 10 wait for maxTriggerDelay
        assert sizes == [200, 100, 10]  # ReadMinRows went through Spark and back
    finally:
        query.stop()


def test_json_payloads_decode_and_bad_ones_land_in_corrupt(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    orders = fresh()
    good = events(50)
    bad = [b"not json", b'{"key": "k", "value": "NaN-ish", "seq": 1}', b"\xff\x00"]
    push_events(archive.address, orders, good[:25] + bad + good[25:])
    df = _stream(spark, archive, recording=orders, format="json", schema=EVENT_DDL)
    assert [f.name for f in df.schema.fields] == [
        "position", "producer", "timestamp", "key", "value", "seq", "_corrupt"]
    _run_available_now(df, "decoded", tmp_path)
    rows = spark.table("decoded").collect()
    assert len(rows) == 53
    clean = sorted((r.seq, r.key, r.value) for r in rows if r._corrupt is None)
    assert clean == sorted((e["seq"], e["key"], e["value"]) for e in map(json.loads, good))
    corrupt = sorted(r._corrupt for r in rows if r._corrupt is not None)
    assert corrupt == sorted(b.decode("utf-8", "replace") for b in bad)
    assert all(r.key is None and r.seq is None for r in rows if r._corrupt is not None)


def test_several_recordings_add_a_recording_column(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    orders, clicks = fresh(), fresh()
    push_events(archive.address, orders, events(400))
    push_events(archive.address, clicks, events(150, start=10_000))
    df = _stream(spark, archive, recording=f"{orders},{clicks}", format="json", schema=EVENT_DDL,
                 maxRecordsPerTrigger="200")
    assert df.schema.fieldNames()[0] == "recording"
    query = _run_available_now(df, "two", tmp_path)
    rows = spark.table("two").collect()
    by_recording: dict[str, list[int]] = {}
    for r in rows:
        by_recording.setdefault(r.recording, []).append(r.seq)
    assert sorted(by_recording[orders]) == list(range(400))
    assert sorted(by_recording[clicks]) == list(range(10_000, 10_150))
    last = json.loads(query.lastProgress["sources"][0]["endOffset"])
    with ArchiveClient(archive.address) as ac:
        assert last == {orders: ac.stop_position(orders), clicks: ac.stop_position(clicks)}


def test_batch_read_of_a_position_range(spark: Any, archive: ArchiveService,
                                        fresh: Fresh) -> None:
    orders = fresh()
    push_events(archive.address, orders, events(500))
    with ArchiveClient(archive.address) as ac:
        records = list(ac.replay(orders))
    start, end = records[100].position, records[400].position
    df = (spark.read.format("exon").option("archive", archive.address)
          .option("recording", orders).option("startingPosition", str(start))
          .option("endingPosition", str(end)).option("maxRecordsPerPartition", "64")
          .option("format", "json").option("schema", EVENT_DDL).load())
    assert df.rdd.getNumPartitions() == 5  # 300 records, 64 per partition
    rows = df.orderBy("position").collect()
    assert [r.position for r in rows] == [r.position for r in records[100:400]]
    assert [r.seq for r in rows] == list(range(100, 400))
    whole = spark.read.format("exon").option("archive", archive.address) \
        .option("recording", orders).load()
    assert whole.count() == 500


def _batch(spark: Any, archive: ArchiveService, **options: str) -> Any:
    reader = spark.read.format("exon").option("archive", archive.address)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_reads_by_timestamp(spark: Any, archive: ArchiveService, fresh: Fresh) -> None:
    orders = fresh()
    push_events(archive.address, orders, events(200))
    with ArchiveClient(archive.address) as ac:
        cut_ms = max(r.timestamp for r in ac.replay(orders)) // 1_000_000 + 1
        time.sleep(0.005)  # the second lot is received in a later millisecond
        push_events(archive.address, orders, events(100, start=200))
        records = list(ac.replay(orders))
    later = _batch(spark, archive, recording=orders, format="json", schema=EVENT_DDL,
                   startingTimestamp=str(cut_ms))
    assert sorted(r.seq for r in later.collect()) == list(range(200, 300))
    earlier = _batch(spark, archive, recording=orders, format="json", schema=EVENT_DDL,
                     endingPositionByTimestamp=json.dumps({orders: cut_ms}))
    assert sorted(r.seq for r in earlier.collect()) == list(range(200))
    # a time after every record: the stop position, an empty range
    assert _batch(spark, archive, recording=orders,
                  startingTimestamp=str(records[-1].timestamp // 1_000_000 + 1)).count() == 0


def test_a_truncated_range_fails_the_read_unless_fail_on_data_loss_is_false(
        spark: Any, archive: ArchiveService, fresh: Fresh) -> None:
    orders = fresh()
    push_events(archive.address, orders, events(3000))
    with ArchiveClient(archive.address) as ac:
        records = list(ac.replay(orders))
        start = ac.truncate(orders, records[1500].position)
    assert start > 0
    with pytest.raises(Exception, match=rf"'{orders}': positions \[0, {start}\) were truncated"):
        _batch(spark, archive, recording=orders, startingPosition="0").collect()
    kept = _batch(spark, archive, recording=orders, startingPosition="0",
                  failOnDataLoss="false")
    assert kept.count() == len([r for r in records if r.position >= start])


def test_batch_read_of_an_empty_recording(spark: Any, archive: ArchiveService,
                                          fresh: Fresh) -> None:
    df = spark.read.format("exon").option("archive", archive.address) \
        .option("recording", fresh()).load()
    assert df.collect() == []


# ---- bad input -------------------------------------------------------------------------


def _load_error(spark: Any, **options: str) -> str:
    reader = spark.readStream.format("exon")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as info:  # Spark wraps it; the text matters
        reader.load()
    return str(info.value)


def test_an_unknown_or_mistyped_option_fails_at_load_naming_it(
        spark: Any, archive: ArchiveService) -> None:
    base = {"archive": archive.address, "recording": "r0"}
    # Spark hands the names over in lower case
    message = _load_error(spark, **base, startingOffsets="earliest")
    assert "option 'startingoffsets'" in message
    assert "did you mean 'startingPosition'" in message
    assert "option 'failOnDataLoss'" in _load_error(spark, **base, failOnDataLoss="nope")


def test_a_missing_option_fails_at_load_naming_it(spark: Any, archive: ArchiveService) -> None:
    assert "option 'recording'" in _load_error(spark, archive=archive.address)
    assert "option 'archive'" in _load_error(spark, recording="r0")
    assert "option 'schema'" in _load_error(spark, archive=archive.address,
                                            recording="r0", format="json")


def test_an_unreachable_archive_fails_at_load_naming_the_address(spark: Any) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # a port nobody serves
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        message = _load_error(spark, archive=address, recording="r0", timeout="1")
    assert address in message
    assert "option 'archive'" in message


def test_an_unknown_recording_raises_recording_not_found(
        spark: Any, archive: ArchiveService) -> None:
    message = _load_error(spark, archive=archive.address, recording="r0,nosuch")
    assert "RecordingNotFound" in message
    assert "nosuch" in message


def test_a_bad_schema_ddl_surfaces_sparks_own_error(spark: Any, archive: ArchiveService) -> None:
    message = _load_error(spark, archive=archive.address, recording="r0", format="json",
                          schema="key strin g,, value")
    assert "PARSE_SYNTAX_ERROR" in message or "ParseException" in message
