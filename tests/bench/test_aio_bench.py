"""``exon bench sockets --asyncio`` runs end to end (tiny counts: the shape of the case, not
a measurement)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest


def test_bench_asyncio_prints_p50_and_p99_beside_zmq_asyncio() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--asyncio", "--round-trips",
         "200", "--runs", "3"],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [line["case"] for line in lines] == ["asyncio_req_rep_64B_p50",
                                                "asyncio_req_rep_64B_p99"]
    p50, p99 = lines
    assert 0 < p50["exon"] <= p99["exon"]
    assert 0 < p50["peer"] <= p99["peer"]
    assert p50["peer_name"].startswith("zmq.asyncio")
    for line in lines:  # three interleaved rounds: the medians and each round's figures
        assert line["runs"] == 3
        assert len(line["exon_runs"]) == len(line["peer_runs"]) == len(line["ratio_runs"]) == 3
        assert line["exon"] == pytest.approx(statistics.median(line["exon_runs"]), abs=0.01)
        assert line["peer"] == pytest.approx(statistics.median(line["peer_runs"]), abs=0.01)
