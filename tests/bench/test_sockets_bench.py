"""``exon bench sockets`` runs end to end on both transports (tiny counts: a smoke test,
not a measurement; exon alone, the peer's behaviour is not what this is about)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _bench(*args: str) -> list[dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-m", "exon.cli", "bench", "sockets", "--no-zmq", "--size", "64",
         "--messages", "3000", "--round-trips", "200", *args],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.parametrize(("transport", "processes"), [("ipc", False), ("ipc", True)])
def test_bench_sockets_ipc_prints_one_json_line_per_case(transport: str, processes: bool) -> None:
    lines = _bench("--transport", transport, *(["--processes"] if processes else []))
    assert [line["case"] for line in lines] == [
        "push_pull_64B", "req_rep_64B_p50", "req_rep_64B_p99"]
    for line in lines:
        assert line["exon"] > 0
        assert line["peer"] is None
        assert line["ratio"] is None
        assert line["processes"] is processes
    assert lines[1]["exon"] <= lines[2]["exon"]  # p50 <= p99


def test_bench_sockets_udp_reports_the_floor() -> None:
    lines = _bench("--transport", "udp")
    assert [line["case"] for line in lines] == [
        "push_pull_64B_udp", "req_rep_64B_p50_udp", "req_rep_64B_p99_udp",
        "req_rep_64B_p50_udp_floor", "req_rep_64B_p99_udp_floor"]
    by_case = {line["case"]: line for line in lines}
    for line in lines[:3]:
        assert line["exon"] > 0
        assert line["peer"] is None
        assert line["ratio"] is None
    for p in (50, 99):
        floor = by_case[f"req_rep_64B_p{p}_udp_floor"]
        assert floor["peer_name"] == "udp-floor"
        # the same exon figure, measured against the bare ping-pong of this run
        assert floor["exon"] == by_case[f"req_rep_64B_p{p}_udp"]["exon"]
        assert floor["peer"] > 0
        assert floor["ratio"] == pytest.approx(floor["peer"] / floor["exon"], rel=0.01, abs=0.001)
    assert lines[1]["exon"] <= lines[2]["exon"]  # p50 <= p99


def test_udp_floor_counts_every_round_trip() -> None:
    from exon.bench.sockets import udp_floor

    lat = udp_floor(64, 500)
    assert len(lat.samples_us) == 500
    assert all(s > 0 for s in lat.samples_us)


def test_udp_floor_rejects_bad_arguments() -> None:
    from exon import errors
    from exon.native.bench_loops import check, ffi, lib

    rtt = ffi.new("int64_t[]", 1)
    with pytest.raises(errors.ExonError):
        check(lib.exon_bench_udp_floor(0, 1, 10**9, rtt))


def test_a_large_size_sends_fewer_messages() -> None:
    from exon.bench.sockets import LARGE_RUN_BYTES, messages_for

    assert messages_for(64, 200_000) == 200_000
    assert messages_for(1024, 200_000) == 200_000
    assert messages_for(64 * 1024, 200_000) == LARGE_RUN_BYTES // (64 * 1024) == 16_384
    assert messages_for(1024 * 1024, 200_000) == 1024
    assert messages_for(1 << 29, 200_000) == 100  # never fewer than 100...
    assert messages_for(1 << 20, 10) == 10  # ...unless fewer were asked for
    with pytest.raises(ValueError, match="positive"):
        messages_for(0, 10)


def test_the_default_sizes_include_large_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    import exon.bench.sockets as sockets_bench
    from exon.cli import main

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(sockets_bench, "run_sockets_bench", lambda **kw: calls.append(kw))
    result = CliRunner().invoke(main, ["bench", "sockets", "--no-zmq"])
    assert result.exit_code == 0, result.output
    assert calls[0]["sizes"] == (64, 1024, 64 * 1024, 1024 * 1024)
    result = CliRunner().invoke(main, ["bench", "sockets", "--size", "0"])
    assert result.exit_code != 0
    assert "--size" in result.output


def test_bench_sockets_send_many_prints_both_sides_per_size() -> None:
    lines = _bench("--send-many", "100", "--runs", "1")
    assert [line["case"] for line in lines] == [
        "push_pull_64B_send_many", "push_64B_send_many_sender",
        "push_64B_send_many_sender_cpu", "push_64B_send_many_burst"]
    for line in lines:
        assert line["exon"] > 0
        assert line["peer"] > 0
        assert line["peer_name"] == "send-per-message"
        assert line["batch"] == 100
        assert len(line["send_many_runs"]) == len(line["per_message_runs"]) == 1
