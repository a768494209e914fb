"""``exon bench sockets --links K`` runs end to end (tiny counts: a smoke test of the case's
shape, not a measurement)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_bench_links_prints_each_count_beside_one_link() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--links", "1", "--links", "7",
         "--messages", "3000"],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [line["case"] for line in lines] == ["links_1_64", "links_7_64"]
    one, seven = lines
    assert one["exon"] == one["peer"] == seven["peer"] > 0
    assert seven["exon"] > 0
    assert seven["ratio"] == pytest.approx(seven["exon"] / seven["peer"], abs=0.002)
