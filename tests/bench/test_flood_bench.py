"""``exon bench sockets --flood`` runs end to end (short phases: a smoke test of the JSON
line, not a measurement)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_sockets_flood_prints_the_gap_and_the_ratio() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--flood",
         "--flood-seconds", "0.5"],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [line["case"] for line in lines] == ["push_pull_64B_flood"]
    line = lines[0]
    assert line["exon"] > 0
    assert line["peer"] > 0
    assert line["ratio"] > 0
    assert line["peer_name"] == "no-flood"
    assert 0 < line["longest_gap_s"] < 10
    assert 0 < line["longest_gap_no_flood_s"] < 10
    assert line["flood_rate"] > 0
    assert line["malformed_dropped_natively"] > 0
