"""``exon bench archive`` runs end to end on both transports (tiny counts: a smoke test,
not a measurement; the figures themselves are not what this is about)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exon.bench.host import free_page_reporting


@pytest.mark.parametrize("transport", ["ipc", "udp"])
def test_bench_archive_prints_one_json_line_per_case(transport: str, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "archive", "--size", "64",
         "--messages", "2000", "--transport", transport, "--dir", str(tmp_path), "--runs", "2"],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [line["case"] for line in lines] == [
        "record_64", "record_vs_pushpull_64", "record_idle_producers_64", "replay_local_64",
        "replay_remote_64"]  # a size of its own: test_bench_archive_without_64_...
    for line in lines:
        assert {"case", "unit", "exon", "peer", "peer_name", "ratio", "note"} <= line.keys()
        assert line["exon"] > 0
        assert line["peer"] > 0
        # the ratio is printed to 3 decimals
        assert line["ratio"] == pytest.approx(line["exon"] / line["peer"], rel=1e-2, abs=1e-3)
        assert line["transport"] == transport
        assert line["messages"] == 2000
    by_case = {line["case"]: line for line in lines}
    size = 64
    record = by_case[f"record_{size}"]
    assert record["unit"] == "msgs/s"
    assert record["goal"] == 0.5
    assert record["mb_s"] == pytest.approx(record["exon"] * size / 1e6, rel=1e-2)
    # the file system's ceiling for the recording's own bytes (headers make it more)
    assert record["recorded_bytes"] > 2000 * size
    assert record["fs_ceiling"] > 0
    # this machine's memory balloon, as exon.bench.host reads it (None: no balloon)
    assert record["free_page_reporting"] == free_page_reporting()
    assert by_case[f"record_vs_pushpull_{size}"]["free_page_reporting"] == \
        record["free_page_reporting"]
    assert len(record["fs_ceiling_runs"]) == 2
    pushpull = by_case[f"record_vs_pushpull_{size}"]
    assert pushpull["goal"] == 0.8
    # the ratio of a recorder costing only the file system's ceiling, per round
    assert pushpull["fs_ceiling_ratio_runs"] == pytest.approx(
        [f / p for f, p in zip(record["fs_ceiling_runs"], pushpull["peer_runs"],
                               strict=True)], rel=1e-2, abs=1e-3)
    assert pushpull["writer_ceiling"] > 0
    assert len(pushpull["writer_ceiling_ratio_runs"]) == 2
    assert by_case[f"record_vs_pushpull_{size}"]["exon"] == record["exon"]
    for case in (f"record_{size}", f"record_vs_pushpull_{size}"):
        line = by_case[case]
        # two rounds: the medians of their figures, and each round's own ratio
        assert line["runs"] == 2
        assert len(line["exon_runs"]) == len(line["peer_runs"]) == 2
        assert min(line["exon_runs"]) * 0.999 <= line["exon"] <= max(line["exon_runs"]) * 1.001
        assert line["ratio_runs"] == pytest.approx(
            [e / p for e, p in zip(line["exon_runs"], line["peer_runs"], strict=True)],
            rel=1e-2, abs=1e-3)
    idle = by_case["record_idle_producers_64"]
    assert idle["idle_producers"] == 4
    assert idle["runs"] == 2
    # its peer: the record case's own rounds
    assert idle["peer_runs"] == by_case["record_64"]["exon_runs"]
    local = by_case["replay_local_64"]
    assert local["unit"] == "records/s"
    assert local["records"] == 2000
    assert local["peer_lines"] > 0
    assert local["exon_reused_archive"] > 0
    assert local["exon"] == max(local["exon_runs"])  # the best pass
    assert by_case["replay_remote_64"]["peer"] == local["exon"]  # ratio = remote / local
    assert list(tmp_path.iterdir()) == []  # the bench removed its files


def test_bench_archive_without_64_still_replays_a_64_byte_recording(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "archive", "--size", "128",
         "--messages", "500", "--dir", str(tmp_path), "--runs", "1"],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout
    cases = [json.loads(line)["case"] for line in out.splitlines() if line.startswith("{")]
    assert cases == ["record_128", "record_vs_pushpull_128", "record_idle_producers_128",
                     "replay_local_64", "replay_remote_64"]
