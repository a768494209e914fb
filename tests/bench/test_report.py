"""Benchmark lines: one JSON object per case, and ``ratio > 1`` always means exon is better."""

from __future__ import annotations

import json

import pytest

from exon.bench.report import emit, ratio


def test_ratio_is_oriented_so_that_above_one_means_exon_is_better() -> None:
    assert ratio(2.0, 1.0, higher_is_better=True) == 2.0  # twice the messages/s
    assert ratio(25.0, 50.0, higher_is_better=False) == 2.0  # half the latency
    assert ratio(1.0, 2.0, higher_is_better=True) == 0.5


@pytest.mark.parametrize(("exon", "peer"), [(0.0, 1.0), (1.0, 0.0), (float("nan"), 1.0)])
def test_ratio_is_none_when_a_figure_is_missing_or_meaningless(exon: float, peer: float) -> None:
    assert ratio(exon, peer, higher_is_better=True) is None


def test_emit_prints_one_json_line_with_the_required_fields(capsys) -> None:
    line = emit("case-x", exon=30.0, peer=60.0, peer_name="pyzmq", unit="us",
                higher_is_better=False, size=64)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1
    parsed = json.loads(printed[0])
    assert parsed == line
    assert {"case", "exon", "peer", "ratio", "unit"} <= parsed.keys()
    assert parsed["ratio"] == 2.0
    assert parsed["size"] == 64


def test_emit_without_a_peer_has_no_ratio(capsys) -> None:
    line = emit("alone", exon=5.0, peer=None, peer_name="aeron", unit="msgs/s",
                higher_is_better=True, peer_note="java is not installed")
    assert line["ratio"] is None
    assert json.loads(capsys.readouterr().out)["peer_note"] == "java is not installed"
