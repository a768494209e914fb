"""Exactly-once across a hard crash, on a cluster.

The query runs on a Spark standalone cluster on localhost (a master and a worker, started
with the ``spark-class`` script pyspark ships): its executors are JVMs of the worker, apart
from the driver, and reach the archive over exon, never through a path. The driver process
is SIGKILLed after Spark wrote ``offsets/N`` and while batch N's rows were going into the
sink, before ``commits/N``. Restarted from its checkpoint (here in the tests' local
session), the query re-plans batch N with the same range, the source replays exactly those
records, and the archive sink drops the rows it already has (including any that the
orphaned executors still sent after the driver died)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from exon.archive import ArchiveClient
from exon.spark.session import spark_env
from tests.spark.helpers import REPO, ArchiveService, StandaloneCluster, events, push_events

Fresh = Callable[[], str]


def _batches(directory: pathlib.Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the query process and its JVM (they share the process group we made)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


@pytest.mark.slow
def test_driver_killed_between_offset_log_and_commit_log_then_restarted_records_each_row_once(
        spark: Any, archive: ArchiveService, fresh: Fresh, tmp_path: pathlib.Path) -> None:
    source, out = fresh(), fresh()
    sent = events(2400)
    push_events(archive.address, source, sent)
    checkpoint = tmp_path / "ck"
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    # one core: the batch's two partitions run one after the other, so the rows of the
    # first are in while the second still runs, a window of 200 x 2 ms however loaded
    cluster = StandaloneCluster(tmp_path / "cluster", cores=1)
    cluster.start()
    killed_in: int | None = None
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.query_main", archive.address, source, out,
         str(checkpoint), "--slow", "0.002", "--master", cluster.url],
        cwd=REPO, env={**os.environ, **spark_env()}, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        with ArchiveClient(archive.address, timeout=5) as ac:
            deadline = time.monotonic() + 180
            grown_at: dict[int, int] = {}
            while time.monotonic() < deadline and proc.poll() is None:
                open_batches = sorted(_batches(offsets) - _batches(commits))
                if open_batches:  # a batch planned and not committed
                    batch = open_batches[0]
                    stop = ac.stop_position(out)
                    first = grown_at.setdefault(batch, stop)
                    if stop > first and batch not in _batches(commits):
                        _kill_group(proc)  # rows of `batch` are in, its commit is not
                        killed_in = batch
                        break
                time.sleep(0.01)
        executors = cluster.executor_logs()
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        if proc.stdout is not None:
            proc.stdout.close()
        cluster.stop()
    assert executors, "no executor ran on the cluster's worker"
    assert killed_in is not None, "the query finished before it could be caught mid-batch"
    assert killed_in in _batches(offsets)
    assert killed_in not in _batches(commits)
    planned_end = (offsets / str(killed_in)).read_text()
    with ArchiveClient(archive.address) as ac:
        partial = ac.stop_position(out)
        recorded = [r.payload for r in ac.replay(out)]
    assert 0 < len(recorded) < len(sent)
    assert len(set(recorded)) == len(recorded)

    # restart from the checkpoint (here, in the test's own session) and run to the end
    df = (spark.readStream.format("exon").option("archive", archive.address)
          .option("recording", source).option("maxRecordsPerTrigger", "400")
          .option("maxRecordsPerPartition", "200").load())
    query = (df.select("payload").writeStream.format("exon")
             .option("archive", archive.address).option("recording", out)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    # batch N ran again with the range planned before the crash
    assert (offsets / str(killed_in)).read_text() == planned_end
    assert query.recentProgress[0]["batchId"] == killed_in
    end = json.loads(query.recentProgress[-1]["sources"][0]["endOffset"])
    with ArchiveClient(archive.address) as ac:
        assert end == {source: ac.stop_position(source)}
        assert ac.stop_position(out) > partial
        final = [r.payload for r in ac.replay(out)]
    assert sorted(final) == sorted(sent)  # every event once: none lost, none twice
