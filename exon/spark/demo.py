"""The pipeline demo: producers -> exon archive -> Spark (windowed aggregates) -> Parquet,
with the Spark driver killed hard midway and restarted from its checkpoint.

``python examples/pipeline.py`` (or ``exon pipeline demo``) runs it on this machine:

1. ``exon archive serve`` records ``events`` (a subprocess);
2. ``--producers`` processes PUSH JSON events ``{key, value, event_time, sent_ns, id}`` to
   the recording's ingest at ``--rate`` events/s each; a cookie comes back once an event
   is durable;
3. a Spark query (its own process: ``local[2]``, or ``--master`` a cluster's URL) reads
   ``format("exon")``, counts and sums ``value`` per key in tumbling event-time windows
   with a watermark, and appends the closed windows to Parquet with a checkpoint;
4. a quarter into the producers' run the demo SIGKILLs that process (driver and JVM) while
   a batch is between the offset log and the commit log, and starts it again on the same
   checkpoint;
5. once the producers are done it sends one late-in-the-future event so that the watermark
   closes every window, waits for the sink to hold every event, and checks the Parquet
   output against the archive: for every (window, key), the count and the sum equal those
   of the recorded events -- each event counted exactly once.

It prints one JSON line per step and a summary: events, the rate Spark processed them at
(rows/s, its own ``processedRowsPerSecond``: the median over batches, and the largest --
the batch that caught up after the restart shows the capacity), and the window latency:
the send time of a window's last event -> the commit of the Parquet file holding that
window, p50/p99, over all windows (the outage included) and over the steady ones (written
before the kill, or sent after the restarted query committed its first batch). The window (2 s),
the watermark (1 s) and the trigger (1 s) are part of that latency by design: a window is
written once the watermark has passed its end.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from exon.spark.tools import (
    ArchiveProcess,
    committed_batches,
    committed_files,
    kill_group,
    produce_one,
)

__all__ = ["build_query", "run_demo"]

EVENT_DDL = "key string, value long, event_time timestamp, sent_ns long, id string"
RECORDING = "events"
INGEST_TAG = 10


def build_query(spark: Any, archive: str, out: str, checkpoint: str, *,
                window: str = "2 seconds", watermark: str = "1 second",
                trigger: str = "1 second", max_per_trigger: int | None = None) -> Any:
    """The demo's streaming query (started): exon -> windowed count/sum -> Parquet."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("exon").option("archive", archive)
              .option("recording", RECORDING).option("format", "json")
              .option("schema", EVENT_DDL).option("minPartitions", "2"))
    if max_per_trigger:
        reader = reader.option("maxRecordsPerTrigger", str(max_per_trigger))
    events = reader.load().where(F.col("_corrupt").isNull())
    windows = (events.withWatermark("event_time", watermark)
               .groupBy(F.window("event_time", window), "key")
               .agg(F.count("*").alias("count"), F.sum("value").alias("sum"),
                    F.max("sent_ns").alias("last_sent_ns")))
    rows = windows.select(F.col("window.start").alias("window_start"),
                          F.col("window.end").alias("window_end"),
                          "key", "count", "sum", "last_sent_ns")
    return (rows.writeStream.format("parquet").outputMode("append")
            .option("path", out).option("checkpointLocation", checkpoint)
            .trigger(processingTime=trigger).start())


def _query_main(argv: list[str]) -> int:
    """``python -m exon.spark.demo query ARCHIVE OUT CHECKPOINT PROGRESS [MASTER]``: run the
    query until SIGTERM, appending each micro-batch's progress to PROGRESS (JSON lines)."""
    archive, out, checkpoint, progress_path = argv[:4]
    master = argv[4] if len(argv) > 4 else None
    from exon.spark.session import local_session

    spark = local_session("exon-pipeline-demo", cores=2, master=master)
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    query = build_query(spark, archive, out, checkpoint)
    print("started", flush=True)
    seen = -1
    with open(progress_path, "a") as progress:
        while not stop and query.isActive:
            time.sleep(0.2)
            for p in query.recentProgress:
                if p["batchId"] > seen:
                    seen = p["batchId"]
                    progress.write(json.dumps({"batchId": p["batchId"],
                                               "numInputRows": p["numInputRows"],
                                               "processedRowsPerSecond":
                                                   p.get("processedRowsPerSecond", 0.0),
                                               "durationMs": p["durationMs"]}) + "\n")
                    progress.flush()
    error = query.exception()
    query.stop()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


def _say(step: str, **fields: Any) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def _start_query(archive: str, work: pathlib.Path, master: str | None) -> subprocess.Popen[str]:
    from exon.spark.session import spark_env

    log = open(work / "query.log", "a")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        [sys.executable, "-m", "exon.spark.demo", "query", archive, str(work / "out"),
         str(work / "checkpoint"), str(work / "progress.jsonl"), *([master] if master else [])],
        stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, **spark_env()},
        start_new_session=True)
    log.close()
    return proc


def _batches(directory: pathlib.Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def _has_data(offsets: pathlib.Path, batch: int) -> bool:
    """Batch ``batch`` of the offset log reads records (not a watermark-only batch)."""
    try:
        end = (offsets / str(batch)).read_text().splitlines()[-1]
        start = (offsets / str(batch - 1)).read_text().splitlines()[-1] if batch else "{}"
    except (OSError, IndexError):
        return False
    return end != start


def _sink_rows(out: pathlib.Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in committed_files(out):
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def _expected(archive: str) -> tuple[dict[tuple[int, str], tuple[int, int]], int]:
    """(window start in µs, key) -> (count, sum) of every recorded event, from a replay."""
    from exon.archive import ArchiveClient

    expected: dict[tuple[int, str], tuple[int, int]] = {}
    total = 0
    with ArchiveClient(archive) as ac:
        for record in ac.replay(RECORDING):
            e = json.loads(record.payload)
            if e["key"].startswith("__"):  # the warm-up and flush events
                continue
            start = int(e["event_time"] // 2) * 2_000_000
            count, total_sum = expected.get((start, e["key"]), (0, 0))
            expected[(start, e["key"])] = (count + 1, total_sum + e["value"])
            total += 1
    return expected, total


def _micros(value: Any) -> int:
    import datetime as dt

    if isinstance(value, dt.datetime):
        stamp: dt.datetime = value
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)
        return round(stamp.timestamp() * 1_000_000)
    return int(value)


def run_demo(*, producers: int = 3, rate: float = 2000.0, seconds: float = 60.0,
             workdir: str | None = None, keep: bool = False, timeout: float = 300.0,
             master: str | None = None) -> int:
    """Run the whole demo; 0 when the Parquet output counts every event exactly once.
    ``master``: the Spark master the query runs on (default ``local[2]``), e.g. a
    standalone cluster's ``spark://HOST:PORT``."""
    from exon.spark.clients import sweep_stale_dirs

    work = pathlib.Path(workdir or tempfile.mkdtemp(prefix="exon-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    archive = ArchiveProcess(work / "archive", {RECORDING: INGEST_TAG})
    query: subprocess.Popen[str] | None = None
    producer_procs: list[subprocess.Popen[str]] = []
    try:
        archive.start()
        _say("archive", address=archive.address, recording=RECORDING,
             ingest=archive.peer(RECORDING))
        query = _start_query(archive.address, work, master)
        assert query.stdout is not None
        if query.stdout.readline().strip() != "started":
            raise RuntimeError(f"the query did not start; see {work / 'query.log'}")
        _say("query", pid=query.pid, master=master or "local[2]", sink=str(work / "out"),
             checkpoint=str(work / "checkpoint"))
        # one event first, so that Spark's first (slow: planning, Python workers) batch is
        # behind us before the producers start
        offsets = work / "checkpoint" / "offsets"
        commits = work / "checkpoint" / "commits"
        produce_one(archive.peer(RECORDING), {"key": "__warmup__", "value": 0,
                                              "event_time": time.time(),
                                              "sent_ns": time.time_ns(), "id": "warmup"})
        deadline = time.monotonic() + timeout
        while not _batches(commits) and time.monotonic() < deadline:
            if query.poll() is not None:
                raise RuntimeError(f"the query died; see {work / 'query.log'}")
            time.sleep(0.1)
        _say("warm", first_batch_committed=bool(_batches(commits)))
        for i in range(producers):
            producer_procs.append(subprocess.Popen(
                [sys.executable, "-m", "exon.spark.tools", "produce", archive.peer(RECORDING),
                 "--rate", str(rate), "--seconds", str(seconds), "--name", f"p{i}"],
                stdout=subprocess.PIPE, text=True))
        _say("producers", count=producers, rate_each=rate, seconds=seconds)

        # midway: SIGKILL the driver while a batch is between its offset and commit logs
        killed_in, killed_at = None, 0.0
        midway = time.monotonic() + seconds / 4
        deadline = midway + 120
        while time.monotonic() < deadline and killed_in is None:
            pending = sorted(_batches(offsets) - _batches(commits))
            if time.monotonic() >= midway and pending and _has_data(offsets, pending[0]):
                kill_group(query)
                killed_in, killed_at = pending[0], time.time()
            elif query.poll() is not None:
                raise RuntimeError(f"the query died; see {work / 'query.log'}")
            time.sleep(0.01)
        if killed_in is None:
            raise RuntimeError("never caught a batch between its offset and commit logs")
        _say("killed", signal="SIGKILL", batch=killed_in,
             offset_log=sorted(_batches(offsets))[-1], commit_log=sorted(_batches(commits))[-1])
        query = _start_query(archive.address, work, master)
        assert query.stdout is not None
        if query.stdout.readline().strip() != "started":
            raise RuntimeError(f"the query did not restart; see {work / 'query.log'}")
        _say("restarted", pid=query.pid, checkpoint=str(work / "checkpoint"))
        recovered_ns = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if killed_in in _batches(commits):
                recovered_ns = time.time_ns()
                break
            if query.poll() is not None:
                raise RuntimeError(f"the query died; see {work / 'query.log'}")
            time.sleep(0.05)
        _say("recovered", batch=killed_in, committed=recovered_ns is not None)

        summaries = []
        for proc in producer_procs:
            out, _ = proc.communicate(timeout=seconds + 120)
            summaries.append(json.loads(out))
        sent = sum(s["sent"] for s in summaries)
        if any(s["confirmed"] != s["sent"] or s["lost"] for s in summaries):
            raise RuntimeError(f"a producer lost events: {summaries}")
        _say("produced", events=sent, durable=sent)

        # one event far ahead moves the watermark past every real window
        produce_one(archive.peer(RECORDING), {"key": "__flush__", "value": 0,
                                              "event_time": time.time() + 3600,
                                              "sent_ns": time.time_ns(), "id": "flush"})
        expected, recorded = _expected(archive.address)
        if recorded != sent:
            raise RuntimeError(f"the archive holds {recorded} events, producers sent {sent}")
        deadline = time.monotonic() + timeout
        rows: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            rows = [r for r in _sink_rows(work / "out") if not r["key"].startswith("__")]
            if sum(r["count"] for r in rows) >= sent:
                break
            if query.poll() is not None:
                raise RuntimeError(f"the query died; see {work / 'query.log'}")
            time.sleep(0.5)
        kill_group(query, signal.SIGTERM, timeout=60)
        query = None

        got: dict[tuple[int, str], tuple[int, int]] = {}
        duplicates = 0
        for r in rows:
            key = (_micros(r["window_start"]), r["key"])
            duplicates += key in got
            got[key] = (r["count"], r["sum"])
        counted = sum(c for c, _ in got.values())
        ok = got == expected and duplicates == 0
        windows = _window_times(work / "out")
        latencies = [done - sent for done, sent in windows]
        # steady: the windows written before the kill, and those sent after the restarted
        # query committed its first batch (the outage between is no steady latency)
        recovered_at = (recovered_ns or time.time_ns()) / 1e9
        steady = [done - sent for done, sent in windows
                  if done < killed_at or sent > recovered_at]
        progress = [json.loads(x) for x in (work / "progress.jsonl").read_text().splitlines()]
        busy = [p["processedRowsPerSecond"] for p in progress if p["numInputRows"] > 1]
        _say("check", exactly_once=ok, events=sent, counted=counted, windows=len(got),
             expected_windows=len(expected), duplicate_windows=duplicates,
             missing=len(set(expected) - set(got)), wrong=sum(
                 1 for k in got if k in expected and got[k] != expected[k]))
        _say("summary", events=sent, offered_rows_per_s=round(producers * rate),
             spark_rows_per_s_p50=round(statistics.median(busy)) if busy else None,
             spark_rows_per_s_max=round(max(busy)) if busy else None,
             window_latency_s_p50=_pct(latencies, 50), window_latency_s_p99=_pct(latencies, 99),
             steady_window_latency_s_p50=_pct(steady, 50),
             steady_window_latency_s_p99=_pct(steady, 99), steady_windows=len(steady),
             killed_batch=killed_in, workdir=str(work))
        return 0 if ok else 1
    finally:
        if query is not None and query.poll() is None:
            kill_group(query)
        for proc in producer_procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        archive.stop()
        sweep_stale_dirs()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _window_times(out: pathlib.Path) -> list[tuple[float, float]]:
    """(commit time of its Parquet file, send time of its last event) of every window, s."""
    import pyarrow.parquet as pq

    times = []
    for _, committed_at, paths in committed_batches(out):
        for path in paths:
            for row in pq.read_table(path, columns=["key", "last_sent_ns"]).to_pylist():
                if not row["key"].startswith("__"):
                    times.append((committed_at, row["last_sent_ns"] / 1e9))
    return times


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))], 3)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "query":
        sys.exit(_query_main(sys.argv[2:]))
    sys.exit(run_demo())
