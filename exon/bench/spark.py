"""``exon bench spark``: format("exon") beside Spark's built-in sources and sinks, one run.

Workload: 64-byte JSON events ``{"key", "value", "sent_ns"}``, Spark ``local[2]`` (or
``master``: any cluster, e.g. a standalone one at ``spark://HOST:7077``), a 1 s
processing-time trigger, the events decoded into the columns ``key, value, sent_ns`` and
written to Parquet.

* **source** -- rows/s a query processes (the sum of its batches' input rows over the sum
  of their execution times, the first batch left out: Spark's own ``processedRowsPerSecond``
  over the run; the idle part of a trigger interval is not counted):
  exon (a recording of ``events`` events, ``maxRecordsPerTrigger``, ``minPartitions`` 2
  for the two cores) against Spark's
  ``socket`` source (a Python TCP producer writing the events at its maximum rate; the
  socket source is driver-only and not fault-tolerant) and its file source (the same
  events as JSON-lines files in a directory, ``maxFilesPerTrigger`` for the same batch
  size; the fault-tolerant built-in).
  The same work for each: the same events (each stamped when it was made, so every
  ``sent_ns`` differs, as a live producer's do; the Parquet files are as large), the same
  batch size, the same three columns (exon is given the schema the file source is given,
  so neither builds columns the query drops: a Python data source cannot prune columns),
  the same Parquet output (its row count checked). The JVM compiles its code during the
  first queries it runs, so a short warm-up query of each source runs first, unmeasured;
  then exon, the file source and a Python data source that does no work (the ceiling of
  any Python source: :mod:`exon.bench.spark_ceiling`) each run ``rounds`` times in
  rotating order, and the median round is reported (``rounds_rows_per_s`` lists all).
  The socket source, far behind, runs once, after them, on at most 200 000 events (its
  rate does not depend on the total).
* **latency** -- send -> the commit of the Parquet batch holding the row, p50/p99 (s), with
  producers at ``rate`` events/s for ``seconds`` (default 5000/s: what the socket source
  sustains here; beyond its capacity its backlog, not its latency, is measured): exon (a
  producer process PUSHing into the archive) against the socket source (the TCP producer
  at the same rate) and the file source (a file of the events of each 100 ms, renamed
  into the directory). Each query
  first takes 1000 warm-up events, then runs 5 s at ``rate`` unmeasured; the figures are
  over the events sent after that.
* **sink** -- rows/s into the exon sink, ``peer`` mode (PUSH to a PULL in this process,
  every row confirmed) and ``archive`` mode (exactly-once into a recording), against
  ``foreachBatch`` writing the same rows to text files; the input is the file source of the
  same events.

One JSON line per case (:func:`exon.bench.report.emit`): ratio > 1 means exon is better.

On a cluster of other hosts, ``host`` is this machine's address that the executors reach:
the archive, the sink case's PULL and Spark's driver bind it; and ``workdir`` must be a
directory every worker sees at the same path (the file source reads it, the Parquet
sinks write it).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from exon.bench.report import emit

__all__ = ["run_spark_bench"]

SCHEMA = "key string, value long, sent_ns long"
SIZE = 64
LINES_PER_FILE = 10_000
WARMUP = 1000  # events through each latency query before the measured ones
WARMUP_SECONDS = 5.0  # then this long at the measured rate, not measured
SOCKET_EVENTS = 200_000  # events through the socket source in the source case, at most


def _line(seq: int, now_ns: int) -> bytes:
    """One event as a 64-byte line (63 bytes of JSON padded with spaces, then a newline)."""
    body = f'{{"key":"k{seq % 8}","value":{seq % 1000},"sent_ns":{now_ns}}}'
    return body.encode().ljust(SIZE - 1) + b"\n"


# ---- the peers' producers ---------------------------------------------------------------


def socket_producer(count: int, rate: float, port_out: Callable[[int], None], *,
                    warmup: int = 0, go: threading.Event | None = None) -> int:
    """Serve one TCP client (Spark's socket source): write ``warmup`` lines at once, wait
    for ``go``, then write ``count`` lines at ``rate``/s (0: as fast as the socket takes
    them), then hold the connection open until the client leaves. Returns the lines
    written after ``go``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port_out(server.getsockname()[1])
        conn, _ = server.accept()
        with conn:
            if warmup:
                now = time.time_ns()
                conn.sendall(b"".join(_line(i, now) for i in range(warmup)))
            if go is not None:
                go.wait(600)
            sent = 0
            start = time.monotonic()
            chunk = 4096 if not rate else max(1, int(rate / 100))
            while sent < count:
                n = min(chunk, count - sent)
                now = time.time_ns()
                conn.sendall(b"".join(_line(sent + i, now) for i in range(n)))
                sent += n
                if rate:
                    ahead = sent / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
            conn.shutdown(socket.SHUT_WR)
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass
        return sent


def write_event_files(directory: pathlib.Path, count: int, staging: pathlib.Path, *,
                      prefix: str = "events") -> int:
    """``count`` events as JSON-lines files of LINES_PER_FILE, renamed into ``directory``.
    Each event is stamped when it is made, as a producer's are (one stamp for a whole file
    would make ``sent_ns`` a constant that Parquet stores in a few bytes)."""
    directory.mkdir(parents=True, exist_ok=True)
    staging.mkdir(parents=True, exist_ok=True)
    files = 0
    clock = time.time_ns
    for start in range(0, count, LINES_PER_FILE):
        n = min(LINES_PER_FILE, count - start)
        tmp = staging / f"{prefix}-{files:06d}.json"
        tmp.write_bytes(b"".join(_line(start + i, clock()) for i in range(n)))
        os.replace(tmp, directory / tmp.name)
        files += 1
    return files


def file_producer(directory: pathlib.Path, staging: pathlib.Path, rate: float,
                  seconds: float) -> int:
    """Every 100 ms, the events of those 100 ms as one file (stamped when written)."""
    directory.mkdir(parents=True, exist_ok=True)
    staging.mkdir(parents=True, exist_ok=True)
    per_file = max(1, int(rate / 10))
    start = time.monotonic()
    written = files = 0
    while time.monotonic() - start < seconds:
        now = time.time_ns()
        tmp = staging / f"live-{files:06d}.json"
        tmp.write_bytes(b"".join(_line(written + i, now) for i in range(per_file)))
        os.replace(tmp, directory / tmp.name)
        written += per_file
        files += 1
        time.sleep(max(0.0, files * 0.1 - (time.monotonic() - start)))
    return written


# ---- running queries -------------------------------------------------------------------


def _wait_rows(query: Any, rows: int, timeout: float,
               seen: dict[int, dict[str, Any]] | None = None) -> dict[int, dict[str, Any]]:
    """Wait until ``rows`` input rows went through ``query`` (or ``timeout``); its
    progress by batch id."""
    seen = {} if seen is None else seen
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and query.isActive:
        for p in query.recentProgress:
            seen[p["batchId"]] = p
        if sum(p["numInputRows"] for p in seen.values()) >= rows:
            break
        time.sleep(0.05)
    return seen


def _progress_until(query: Any, rows: int, timeout: float) -> list[dict[str, Any]]:
    """Every batch's progress until ``rows`` input rows went through (or ``timeout``)."""
    seen = _wait_rows(query, rows, timeout)
    for p in query.recentProgress:
        seen[p["batchId"]] = p
    error = query.exception()
    query.stop()
    if error is not None:
        raise RuntimeError(f"query failed: {error}")
    return [seen[k] for k in sorted(seen)]


def _capacity(progress: list[dict[str, Any]]) -> float:
    """Rows per second of batch execution, the first batch with rows (warm-up) left out."""
    busy = [p for p in progress if p["numInputRows"]]
    if len(busy) > 1:
        busy = busy[1:]
    rows = sum(p["numInputRows"] for p in busy)
    seconds = sum(p["durationMs"]["triggerExecution"] for p in busy) / 1000
    return rows / seconds if seconds else 0.0


def _latencies(out: pathlib.Path, after_ns: int = 0) -> list[float]:
    """Send -> commit of the Parquet batch, for the rows sent after ``after_ns`` (the
    warm-up rows before it are left out)."""
    import pyarrow.parquet as pq

    from exon.spark.tools import committed_batches

    latencies: list[float] = []
    for _, committed_at, paths in committed_batches(out):
        for path in paths:
            sent = pq.read_table(path, columns=["sent_ns"]).column(0).to_pylist()
            latencies.extend(committed_at - s / 1e9 for s in sent
                             if s is not None and s >= after_ns)
    return latencies


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


def _to_parquet(df: Any, work: pathlib.Path, name: str) -> Any:
    return (df.select("key", "value", "sent_ns").writeStream.format("parquet")
            .option("path", str(work / name / "out"))
            .option("checkpointLocation", str(work / name / "ck"))
            .trigger(processingTime="1 second").start())


class _Bench:
    def __init__(self, spark: Any, work: pathlib.Path, archive: Any, host: str) -> None:
        self.spark = spark
        self.work = work
        self.archive = archive
        self.host = host

    def exon_df(self, recording: str, per_trigger: int | None) -> Any:
        # .schema: the columns the file source is given (format("exon") would otherwise
        # also build position, producer, timestamp and _corrupt, which the query drops)
        reader = (self.spark.readStream.schema(SCHEMA).format("exon")
                  .option("archive", self.archive.address)
                  .option("recording", recording).option("format", "json")
                  .option("schema", SCHEMA).option("maxRecordsPerPartition", "100000")
                  .option("minPartitions", "2"))
        if per_trigger:
            reader = reader.option("maxRecordsPerTrigger", str(per_trigger))
        return reader.load()

    def file_df(self, directory: pathlib.Path, files_per_trigger: int | None) -> Any:
        reader = self.spark.readStream.schema(SCHEMA)
        if files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(files_per_trigger))
        return reader.json(str(directory))

    def socket_df(self, port: int) -> Any:
        from pyspark.sql import functions as F

        lines = (self.spark.readStream.format("socket").option("host", "127.0.0.1")
                 .option("port", str(port)).load())
        return lines.select(F.from_json("value", SCHEMA).alias("e")).select("e.*")

    def produce(self, recording: str, *, count: int | None, rate: float,
                seconds: float, producers: int) -> int:
        procs = []
        for i in range(producers):
            args = [sys.executable, "-m", "exon.spark.tools", "produce",
                    self.archive.peer(recording), "--rate", str(rate / producers),
                    "--seconds", str(seconds), "--size", str(SIZE), "--name", f"p{i}"]
            if count is not None:
                share = count // producers + (1 if i < count % producers else 0)
                args += ["--count", str(share)]
            procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, text=True))
        total = 0
        for proc in procs:
            out, _ = proc.communicate(timeout=seconds + 600)
            summary = json.loads(out)
            if summary["confirmed"] != summary["sent"] or summary["lost"]:
                raise RuntimeError(f"a producer lost events: {summary}")
            total += summary["sent"]
        return total

    def socket_query(self, name: str, count: int, rate: float, timeout: float, *,
                     warmup: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The socket source fed ``count`` lines at ``rate``: (progress, live start ns)."""
        ports: list[int] = []
        ready, go = threading.Event(), threading.Event()

        def port_out(port: int) -> None:
            ports.append(port)
            ready.set()

        thread = threading.Thread(target=socket_producer, args=(count, rate, port_out),
                                  kwargs={"warmup": warmup, "go": go}, daemon=True)
        thread.start()
        ready.wait(10)
        query = _to_parquet(self.socket_df(ports[0]), self.work, name)
        if warmup:
            _wait_rows(query, warmup, timeout)
        start_ns = time.time_ns()
        go.set()
        progress = _progress_until(query, warmup + count, timeout)
        thread.join(10)
        return progress, start_ns


def run_spark_bench(*, events: int = 1_000_000, per_trigger: int = 200_000,
                    rate: float = 5_000.0, seconds: float = 20.0, rounds: int = 3,
                    cases: tuple[str, ...] = ("source", "latency", "sink"),
                    workdir: str | None = None, timeout: float = 600.0,
                    master: str | None = None,
                    host: str = "127.0.0.1") -> list[dict[str, Any]]:
    """Run the cases; print and return one JSON line each. ``master``: the Spark master
    (default ``local[2]``); ``host``: the address the executors reach this machine at."""
    from exon.spark.clients import sweep_stale_dirs
    from exon.spark.session import local_session
    from exon.spark.tools import ArchiveProcess

    work = pathlib.Path(workdir or tempfile.mkdtemp(prefix="exon-bench-spark-"))
    lines: list[dict[str, Any]] = []
    archive = ArchiveProcess(work / "archive", {"events": 10, "live": 11, "sink": 12},
                             endpoint=f"{host}:0")
    archive.start()
    from pyspark.sql import SparkSession

    own_session = SparkSession.getActiveSession() is None
    spark = local_session("exon-bench-spark", cores=2, master=master,
                          conf={"spark.local.dir": str(work / "spark-local"),
                                "spark.driver.host": host, "spark.driver.bindAddress": host})
    bench = _Bench(spark, work, archive, host)
    common = {"events": events, "size": SIZE, "trigger_s": 1.0,
              "master": master or "local[2]"}
    try:
        files = work / "files"
        if "source" in cases or "sink" in cases:
            write_event_files(files, events, work / "staging")
        if "source" in cases:
            ingest_start = time.monotonic()
            bench.produce("events", count=events, rate=0, seconds=3600, producers=2)
            ingest = events / (time.monotonic() - ingest_start)
            lines.extend(_source_cases(bench, files, events, per_trigger, rounds, timeout,
                                       {**common, "archive_ingest_rows_per_s": round(ingest)}))
        if "latency" in cases:
            # each query first takes WARMUP events (its first batches start Python workers)
            # and then runs at `rate` for WARMUP_SECONDS more (the JVM compiles its code)
            # before the measured `seconds`; the figures are over the events sent after that
            span = seconds + WARMUP_SECONDS
            live = int(rate * span)
            skip = int(WARMUP_SECONDS * 1e9)
            exon_query = _to_parquet(bench.exon_df("live", None), work, "exon-live")
            bench.produce("live", count=WARMUP, rate=0, seconds=600, producers=1)
            _wait_rows(exon_query, WARMUP, timeout)
            start_ns = time.time_ns()
            sent = bench.produce("live", count=live, rate=rate, seconds=span + 60,
                                 producers=1)
            _progress_until(exon_query, WARMUP + sent, timeout)
            exon_lat = _latencies(work / "exon-live" / "out", start_ns + skip)
            _, start_ns = bench.socket_query("socket-live", live, rate, timeout, warmup=WARMUP)
            socket_lat = _latencies(work / "socket-live" / "out", start_ns + skip)
            live_dir = work / "live-files"
            live_dir.mkdir()
            file_query = _to_parquet(bench.file_df(live_dir, None), work, "file-live")
            write_event_files(live_dir, WARMUP, work / "staging-warmup")
            _wait_rows(file_query, WARMUP, timeout)
            start_ns = time.time_ns()
            written = file_producer(live_dir, work / "staging-live", rate, span)
            _progress_until(file_query, WARMUP + written, timeout)
            file_lat = _latencies(work / "file-live" / "out", start_ns + skip)
            extra = {**common, "rate": rate, "seconds": seconds}
            for q in (50, 99):
                for peer_name, peer in (("spark socket source", socket_lat),
                                        ("spark file source (json)", file_lat)):
                    kind = "socket" if "socket" in peer_name else "file"
                    lines.append(emit(f"latency_p{q}_s_vs_{kind}", exon=_pct(exon_lat, q),
                                      peer=_pct(peer, q), peer_name=peer_name, unit="s",
                                      higher_is_better=False, **extra))
        if "sink" in cases:
            lines.extend(_sink_cases(bench, files, events, per_trigger, timeout, common))
        return lines
    finally:
        if own_session:
            spark.stop()
        archive.stop()
        sweep_stale_dirs()
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _parquet_output(out: pathlib.Path) -> tuple[int, int]:
    """(rows, bytes) of the Parquet files a file sink committed under ``out``."""
    import pyarrow.parquet as pq

    from exon.spark.tools import committed_batches

    rows = size = 0
    for _, _, paths in committed_batches(out):
        for path in paths:
            rows += pq.ParquetFile(path).metadata.num_rows
            size += os.path.getsize(path)
    return rows, size


def _source_cases(bench: _Bench, files: pathlib.Path, events: int, per_trigger: int,
                  rounds: int, timeout: float, common: dict[str, Any]) -> list[dict[str, Any]]:
    """exon, the file source and the ceiling, ``rounds`` each in rotating order after a
    warm-up of each; then the socket source once."""
    from exon.bench.spark_ceiling import CeilingSource

    work = bench.work
    per_files = max(1, per_trigger // LINES_PER_FILE)
    bench.spark.dataSource.register(CeilingSource)

    def ceiling_df() -> Any:
        return (bench.spark.readStream.format("bench-ceiling").option("rows", str(events))
                .option("perTrigger", str(per_trigger)).load())

    queries: dict[str, Callable[[str], Any]] = {
        "exon": lambda name: _to_parquet(bench.exon_df("events", per_trigger), work, name),
        "file": lambda name: _to_parquet(bench.file_df(files, per_files), work, name),
        "ceiling": lambda name: _to_parquet(ceiling_df(), work, name),
    }
    # warm-up: three batches of each, unmeasured (the JVM compiles the JSON, Arrow and
    # Parquet code it runs; the exon query starts its Python workers)
    for kind, start in queries.items():
        _progress_until(start(f"warmup-{kind}"), min(events, 3 * per_trigger), timeout)
    measured: dict[str, list[float]] = {kind: [] for kind in queries}
    output: dict[str, tuple[int, int]] = {}
    for r in range(max(1, rounds)):
        order = list(queries)[r % len(queries):] + list(queries)[:r % len(queries)]
        for kind in order:
            name = f"{kind}-{r}"
            measured[kind].append(_capacity(_progress_until(queries[kind](name), events,
                                                            timeout)))
            output[kind] = _parquet_output(work / name / "out")
            if output[kind][0] != events:  # the same work: every event once, in Parquet
                raise RuntimeError(f"the {kind} query wrote {output[kind][0]} rows of "
                                   f"{events}")
    # the socket source's rate does not depend on the total (it takes what arrived each
    # trigger), and at its few thousand rows/s a million would take minutes
    socket_events = min(events, SOCKET_EVENTS)
    socket_progress, _ = bench.socket_query("socket", socket_events, 0, timeout)

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    exon = median(measured["exon"])
    extra = {**common, "rounds": len(measured["exon"]),
             "rounds_rows_per_s": {k: [round(v) for v in vs] for k, vs in measured.items()},
             "parquet_bytes": {k: v[1] for k, v in output.items()},
             # a Python data source doing no work (exon.bench.spark_ceiling): what Spark
             # itself takes from any Python source here, the bound of format("exon")
             "python_source_ceiling_rows_per_s": round(median(measured["ceiling"])),
             "socket_events": socket_events}
    return [
        # the goal: at least 0.9 of what Spark takes from a Python source doing no work
        emit("source_rows_per_s_vs_python_ceiling", exon=exon, peer=median(measured["ceiling"]),
             peer_name="python data source doing no work", unit="rows/s",
             higher_is_better=True, **extra),
        emit("source_rows_per_s_vs_socket", exon=exon, peer=_capacity(socket_progress),
             peer_name="spark socket source", unit="rows/s", higher_is_better=True, **extra),
        emit("source_rows_per_s_vs_file", exon=exon, peer=median(measured["file"]),
             peer_name="spark file source (json)", unit="rows/s", higher_is_better=True,
             **extra),
    ]


def _sink_cases(bench: _Bench, files: pathlib.Path, events: int, per_trigger: int,
                timeout: float, common: dict[str, Any]) -> list[dict[str, Any]]:
    import exon

    spark, work, archive = bench.spark, bench.work, bench.archive
    per_files = max(1, per_trigger // LINES_PER_FILE)

    def rows() -> Any:
        return (spark.readStream.option("maxFilesPerTrigger", str(per_files))
                .text(str(files)).withColumnRenamed("value", "payload"))

    def start(writer: Any, name: str) -> Any:
        return (writer.option("checkpointLocation", str(work / name / "ck"))
                .trigger(processingTime="1 second").start())

    # foreachBatch to a file: the built-in way to put a stream anywhere
    target = str(work / "foreach" / "out")

    def to_file(df: Any, batch_id: int) -> None:
        df.write.mode("append").text(target)

    peer = _capacity(_progress_until(start(rows().writeStream.foreachBatch(to_file),
                                           "foreach"), events, timeout))
    # peer mode: PUSH to a PULL here, every row's cookie back before a task returns
    received = [0]
    with exon.Node(f"{bench.host}:0") as node:
        pull = node.socket("pull", tag=5)
        stop = threading.Event()

        def drain() -> None:
            while not stop.is_set():
                try:
                    pull.receive(timeout=0.2)
                    received[0] += 1
                except exon.Timeout:
                    continue

        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        try:
            push_mode = _capacity(_progress_until(
                start(rows().writeStream.format("exon").option("peer", f"{node.address}/5"),
                      "exon-peer"), events, timeout))
        finally:
            stop.set()
            thread.join(5)
    archive_mode = _capacity(_progress_until(
        start(rows().writeStream.format("exon").option("archive", archive.address)
              .option("recording", "sink"), "exon-archive"), events, timeout))
    extra = {**common, "received_by_pull": received[0]}
    return [
        emit("sink_rows_per_s_peer_mode", exon=push_mode, peer=peer,
             peer_name="foreachBatch to text files", unit="rows/s", higher_is_better=True,
             **extra),
        emit("sink_rows_per_s_archive_mode", exon=archive_mode, peer=peer,
             peer_name="foreachBatch to text files", unit="rows/s", higher_is_better=True,
             **extra),
    ]
