"""``exon bench transport`` runs end to end (tiny sizes: a smoke test, not a measurement)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from exon.bench.transport import native_ipc_throughput


@pytest.mark.parametrize("size", [32, 1024])
def test_native_ipc_loop_under_a_driver_keeps_flowing(size: int) -> None:
    # Two runs back to back: a loop that corrupts the log or stalls the limit makes the
    # second one deliver nothing.
    assert native_ipc_throughput(size, 0.2) > 0
    assert native_ipc_throughput(size, 0.2) > 0


def test_bench_transport_prints_one_json_line_per_case() -> None:
    # exon alone (``--vs none``): the peers' own behaviour is not what this test is about.
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "transport", "--vs", "none", "--size", "32",
         "--seconds", "0.2", "--messages", "20000"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert {line["case"] for line in lines} == {"native-ipc-throughput-32B",
                                                 "python-ipc-throughput-64B"}
    for line in lines:
        assert line["exon"] > 0
        assert line["peer"] is None
        assert line["ratio"] is None
        assert line["peer_note"] == "not requested"
