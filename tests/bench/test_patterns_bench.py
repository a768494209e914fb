"""``exon bench sockets --patterns`` runs end to end (tiny counts: the shape of the cases,
not a measurement)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_patterns_prints_fanout_and_dealer_router_beside_pyzmq() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--patterns", "--messages",
         "3000", "--round-trips", "2000"],
        capture_output=True, text=True, timeout=300, check=True,
        env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [line["case"] for line in lines] == ["pub_sub_fanout4_64B",
                                                "dealer_router_64inflight_64B"]
    fanout, dealer = lines
    assert fanout["exon"] > 0
    assert fanout["peer"] > 0
    assert fanout["exon_dropped"] == 0  # "block": every subscriber got every message
    assert fanout["subscribers"] == 4
    assert fanout["ipc_term_length"] == 2 * 1024 * 1024  # the driver's default
    assert dealer["exon"] > 0
    assert dealer["peer"] > 0
    assert dealer["in_flight"] == 64


def test_bench_patterns_takes_the_ipc_term_length_and_reports_it() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--patterns", "--messages",
         "2000", "--round-trips", "1000", "--no-zmq", "--ipc-term-length", "1048576"],
        capture_output=True, text=True, timeout=300, check=True,
        env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT,
    ).stdout
    fanout = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert fanout["ipc_term_length"] == 1048576
    assert fanout["exon_dropped"] == 0


def test_bench_ipc_term_length_is_for_patterns_only() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--ipc-term-length", "1048576"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT,
    )
    assert done.returncode == 2
    assert "--patterns only" in done.stderr
