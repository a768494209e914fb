"""A streaming query across a failover of a replicated archive (docs/protocol.md 3.7): it
reads with ``archive=PRIMARY,REPLICA`` and writes through the exactly-once sink; the
primary is killed with SIGKILL after the first batch committed and the replica promoted.
The query runs on to the end, and the output recording on the new primary holds every
event exactly once."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
from collections import Counter

import pytest

from exon.archive import Archive, ArchiveClient
from exon.spark.session import spark_env
from tests.spark.helpers import REPO, ArchiveService, events, push_events, wait_for

EVENTS = 2400


@pytest.mark.slow
def test_a_streaming_query_keeps_running_across_a_failover(tmp_path: pathlib.Path) -> None:
    primary = ArchiveService(tmp_path / "p", {"src": 10, "out": 11},
                             args=("--min-insync", "2"))
    primary.start()
    replica = ArchiveService(tmp_path / "r", {}, args=("--replica-of", primary.address))
    replica.start()
    proc = None
    try:
        push_events(primary.address, "src", events(EVENTS))
        with ArchiveClient(replica.address, timeout=5) as rc, \
                ArchiveClient(primary.address, timeout=5) as pc:
            stop = pc.stop_position("src")
            wait_for(lambda: rc.stop_position("src") == stop, 30, what="the replica")
        members = f"{primary.address},{replica.address}"
        commits = tmp_path / "ck" / "commits"
        log = tmp_path / "query.log"  # Spark logs much: a pipe nobody reads would block it
        with open(log, "w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.spark.query_main", members, "src", "out",
                 str(tmp_path / "ck"), "--slow", "0.002"],
                cwd=REPO, env={**os.environ, **spark_env()}, stdout=subprocess.PIPE,
                stderr=stderr, text=True, start_new_session=True)
        wait_for(lambda: commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir()),
                 240, what="the first committed batch")
        primary.stop(signal.SIGKILL)  # mid-query
        committed = [p for p in commits.iterdir() if p.name.isdigit()]
        assert len(committed) < EVENTS // 400, "the query ended before the failover"
        with ArchiveClient(replica.address, timeout=10) as rc:
            assert rc.promote() == 2
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, log.read_text()[-3000:]
        assert "finished" in out
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        replica.stop()
        primary.stop()
    seqs = Counter(json.loads(r.payload)["seq"]
                   for r in Archive(str(tmp_path / "r")).replay("out"))
    assert set(seqs) == set(range(EVENTS))
    assert set(seqs.values()) == {1}
