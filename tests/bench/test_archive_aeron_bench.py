"""``exon bench archive --vs aeron``: beside the real Aeron Archive (Java), or one line saying
why it cannot run (tiny counts: a smoke test, not a measurement)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exon.bench.peers import aeron_peer_unavailable_reason


def _bench(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
           timeout: float = 60) -> list[dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "archive", "--vs", "aeron",
         "--dir", str(tmp_path), *args],
        capture_output=True, text=True, timeout=timeout, check=True, env=env,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_without_java_one_line_says_why(tmp_path: Path) -> None:
    script = tmp_path / "aeron-peer.sh"  # found, but there is no java to run it with
    script.write_text("#!/bin/sh\nexit 1\n")
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, EXON_AERON_PEER=str(script), JAVA=str(tmp_path / "no-such-java"))
    lines = _bench(work, "--messages", "100", env=env)
    assert len(lines) == 1
    assert lines[0]["case"] == "archive_vs_aeron"
    assert lines[0]["exon"] is None
    assert lines[0]["ratio"] is None
    assert lines[0]["skipped"] == "java is not installed"
    assert list(work.iterdir()) == []  # nothing ran


@pytest.mark.slow
def test_beside_aeron_one_line_per_case(tmp_path: Path) -> None:
    reason = aeron_peer_unavailable_reason()
    if reason is not None:
        pytest.skip(f"the Aeron peer cannot run here: {reason}")
    # one round: two JVMs (several seconds each on a busy machine)
    lines = _bench(tmp_path, "--size", "64", "--messages", "20000", "--runs", "1",
                   timeout=300)
    assert [line["case"] for line in lines] == ["record_64", "replay_local_64"]
    for line in lines:
        assert {"case", "exon", "peer", "ratio", "peer_name", "note"} <= line.keys()
        assert "Aeron Archive" in str(line["peer_name"])
        runs = line["exon_runs"], line["peer_runs"], line["ratio_runs"]
        assert all(isinstance(r, list) and len(r) == 1 for r in runs)
        exon, peer = line["exon_runs"], line["peer_runs"]
        assert isinstance(exon, list)
        assert isinstance(peer, list)
        assert all(x > 0 for x in exon + peer)
        assert line["ratio_runs"] == pytest.approx(
            [e / p for e, p in zip(exon, peer, strict=True)], rel=1e-2, abs=1e-3)
        assert line["fsync"] == "none"
        assert line["aeron_file_sync_level"] == 0
        # CPU per message, both sides (Linux /proc), and their ratio
        assert line["exon_cpu_ns"] > 0
        assert line["peer_cpu_ns"] > 0
        assert line["cpu_ratio"] == pytest.approx(
            line["peer_cpu_ns"] / line["exon_cpu_ns"], rel=1e-2, abs=1e-3)
    # exon's record CPU by process: they add up to its total
    parts = lines[0]["exon_cpu_ns_parts"]
    assert isinstance(parts, dict)
    assert set(parts) == {"producer", "service", "bench_with_driver"}
    assert sum(parts.values()) == pytest.approx(lines[0]["exon_cpu_ns"], rel=1e-2, abs=1)
    assert list(tmp_path.iterdir()) == []  # the bench removed its files
