"""The exactly-once archive sink's writes (exon.spark.sink.record_rows) across a failover
of a replicated archive: a batch retried at the new primary is recorded once, because the
dedup marks were replicated (docs/protocol.md 3.6, 3.7). No Spark needed: this is the
function each sink task runs."""

from __future__ import annotations

import time
from collections import Counter

import pytest

import exon
from exon.archive import Archive, ArchiveError, ArchiveService
from exon.archive.client import ArchiveClient
from exon.spark.sink import record_rows


def keys_of(directory: str) -> Counter[tuple[int, int]]:
    """(batch, seq) of every keyed record, counted."""
    out: Counter[tuple[int, int]] = Counter()
    for rec in Archive(directory).replay("orders"):
        out[(int.from_bytes(rec.payload[:8], "little"), int.from_bytes(rec.payload[8:16],
                                                                       "little"))] += 1
    return out


def rows(batch: int, n: int) -> list[bytes]:
    return [batch.to_bytes(8, "little") + seq.to_bytes(8, "little") for seq in range(n)]


def wait_until(cond, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_batch_retried_at_the_new_primary_is_recorded_once(tmp_path) -> None:
    pdir, rdir = str(tmp_path / "p"), str(tmp_path / "r")
    primary = ArchiveService(pdir, ingest={"orders": 10}, min_insync=2).start()
    replica = ArchiveService(rdir, replica_of=primary.address, min_insync=1).start()
    node = exon.Node(endpoint="127.0.0.1:0")
    client = ArchiveClient(f"{primary.address},{replica.address}", node=node, timeout=3.0)
    try:
        assert record_rows(client, "orders", "q", 0, 0, rows(0, 100), timeout=10) == 100
        assert record_rows(client, "orders", "q", 1, 0, rows(1, 100), timeout=10) == 100
        # batch 2: half of it reaches both members, then the primary dies, the task
        # fails (its other half never went) and Spark runs the batch again
        writer = client.keyed_writer("orders", "q")
        for seq, payload in enumerate(rows(2, 50)):
            writer.send(2, 0, seq, payload)
        wait_until(lambda: replica.archive.writer("orders").dedup.get(("q", 0)) == (2, 49))
        primary.close()
        try:
            writer.flush(timeout=2.0)  # confirmed by both before the death, or not
        except (ArchiveError, exon.Timeout):
            pass
        writer.close()
        replica.promote()
        # Spark retries batch 1 (its commit was lost, say) and batch 2, whole
        assert record_rows(client, "orders", "q", 1, 0, rows(1, 100), timeout=10) == 100
        assert record_rows(client, "orders", "q", 2, 0, rows(2, 100), timeout=10) == 100
        assert client.address == replica.address
    finally:
        client.close()
        replica.close()
        primary.close()
        node.close()
    counted = keys_of(rdir)
    assert set(counted) == {(b, s) for b in range(3) for s in range(100)}
    assert set(counted.values()) == {1}  # every row once
