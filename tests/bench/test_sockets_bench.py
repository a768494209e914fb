"""``exon bench sockets`` runs end to end on both transports (tiny counts: a smoke test,
not a measurement; exon alone, the peer's behaviour is not what this is about)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize(("transport", "suffix"), [("ipc", ""), ("udp", "_udp")])
def test_bench_sockets_prints_one_json_line_per_case(transport: str, suffix: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--no-zmq", "--size", "64",
         "--messages", "3000", "--round-trips", "200", "--transport", transport],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [line["case"] for line in lines] == [
        f"push_pull_64B{suffix}", f"req_rep_64B_p50{suffix}", f"req_rep_64B_p99{suffix}"]
    for line in lines:
        assert line["exon"] > 0
        assert line["peer"] is None
        assert line["ratio"] is None
    assert lines[1]["exon"] <= lines[2]["exon"]  # p50 <= p99
