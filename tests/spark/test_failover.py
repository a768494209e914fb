"""A streaming query across a failover of a replicated archive (docs/protocol.md 3.7), then a
hard crash of its driver: exactly-once into the archive through both.

The query (its own process, ``tests.spark.query_main``) reads with
``archive=PRIMARY,REPLICA`` and writes through the exactly-once sink. The primary is killed
with SIGKILL after the first batch committed and the replica promoted; the query runs on.
Then the driver process is SIGKILLed after Spark wrote ``offsets/N`` and while batch N's rows
were going into the sink, before ``commits/N``. Restarted from its checkpoint (here in the
tests' session), the query re-plans batch N with the same range, the source replays exactly
those records, and the archive sink drops the rows it already has. The output recording on
the new primary holds every event exactly once.

(Both in one query: each query process costs a JVM start, and the Spark tests are the
suite's largest. The same kill on a two-worker cluster: ``test_restart.py``.)"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest

from exon.archive import Archive, ArchiveClient
from exon.spark.session import spark_env
from exon.spark.tools import kill_group
from tests.spark.helpers import REPO, ArchiveService, events, push_events, wait_for

EVENTS = 1600  # four batches: the first, the failover, at least one to catch mid-batch
PER_TRIGGER = 400


def _batches(directory: pathlib.Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def _kill_mid_batch(proc: subprocess.Popen[str], client: ArchiveClient, recording: str,
                    checkpoint: pathlib.Path, timeout: float) -> int | None:
    """SIGKILL the query (driver and JVM) once rows of a planned, uncommitted batch are in
    ``recording``; the batch, or None if the query ended first."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    grown_at: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        open_batches = sorted(_batches(offsets) - _batches(commits))
        if open_batches:
            batch = open_batches[0]
            stop = client.stop_position(recording)
            first = grown_at.setdefault(batch, stop)
            if stop > first and batch not in _batches(commits):
                kill_group(proc)  # rows of `batch` are in, its commit is not
                return batch
        time.sleep(0.01)
    return None


@pytest.mark.slow
def test_a_query_runs_on_across_a_failover_and_a_killed_driver_recording_each_row_once(
        spark: Any, tmp_path: pathlib.Path) -> None:
    primary = ArchiveService(tmp_path / "p", {"src": 10, "out": 11},
                             args=("--min-insync", "2"))
    primary.start()
    replica = ArchiveService(tmp_path / "r", {}, args=("--replica-of", primary.address))
    replica.start()
    proc = None
    checkpoint = tmp_path / "ck"
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    try:
        push_events(primary.address, "src", events(EVENTS))
        with ArchiveClient(replica.address, timeout=5) as rc, \
                ArchiveClient(primary.address, timeout=5) as pc:
            stop = pc.stop_position("src")
            wait_for(lambda: rc.stop_position("src") == stop, 30, what="the replica")
        members = f"{primary.address},{replica.address}"
        log = tmp_path / "query.log"  # Spark logs much: a pipe nobody reads would block it
        with open(log, "w") as stderr:
            # 2 ms a row: a task of 200 rows takes 0.4 s however loaded, the window in which
            # the driver is caught mid-batch
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.spark.query_main", members, "src", "out",
                 str(checkpoint), "--slow", "0.002", "--per-trigger", str(PER_TRIGGER)],
                cwd=REPO, env={**os.environ, **spark_env()}, stdout=subprocess.PIPE,
                stderr=stderr, text=True, start_new_session=True)
        wait_for(lambda: bool(_batches(commits)), 300, interval=0.05,
                 what="the first committed batch")
        primary.stop(signal.SIGKILL)  # mid-query
        assert len(_batches(commits)) < EVENTS // PER_TRIGGER - 1, \
            "the query ran too far before the failover"
        with ArchiveClient(replica.address, timeout=10) as rc:
            assert rc.promote() == 2
            killed_in = _kill_mid_batch(proc, rc, "out", checkpoint, 300)
        assert killed_in is not None, \
            f"the query ended before it was caught mid-batch: {log.read_text()[-3000:]}"
    finally:
        if proc is not None:
            if proc.poll() is None:
                kill_group(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        primary.stop()
    try:
        assert killed_in > 0  # after the failover: the first batch committed before it
        assert killed_in not in _batches(commits)
        planned_end = (offsets / str(killed_in)).read_text()
        with ArchiveClient(replica.address) as rc:
            partial = rc.stop_position("out")
            recorded = [r.payload for r in rc.replay("out")]
        assert 0 < len(recorded) < EVENTS
        assert len(set(recorded)) == len(recorded)

        # restart from the checkpoint, here, on to the end: batch N again with its planned
        # range, then the rest in one batch (its 200-record partitions are planned as before)
        df = (spark.readStream.format("exon").option("archive", members)
              .option("recording", "src").option("maxRecordsPerTrigger", str(EVENTS))
              .option("maxRecordsPerPartition", "200").load())
        query = (df.select("payload").writeStream.format("exon")
                 .option("archive", members).option("recording", "out")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        assert query.exception() is None
        assert (offsets / str(killed_in)).read_text() == planned_end
        assert query.recentProgress[0]["batchId"] == killed_in
        end = json.loads(query.recentProgress[-1]["sources"][0]["endOffset"])
        with ArchiveClient(replica.address) as rc:
            assert end == {"src": rc.stop_position("src")}
            assert rc.stop_position("out") > partial
    finally:
        replica.stop()
    seqs = Counter(json.loads(r.payload)["seq"]
                   for r in Archive(str(tmp_path / "r")).replay("out"))
    assert set(seqs) == set(range(EVENTS))  # every event once: none lost, none twice
    assert set(seqs.values()) == {1}
