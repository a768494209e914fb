"""The soak in CI: 20 s (EXON_CHAOS_SOAK_SECONDS) of push/pull and req/rep under changing
faults; RSS, file descriptors and threads of both nodes stay flat after the warm-up
(tests/chaos/soak.py; tools/soak.py runs the same for 30 minutes)."""

from __future__ import annotations

import os

import pytest

from tests.chaos.netns import Lab
from tests.chaos.soak import run_soak

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SECONDS = float(os.environ.get("EXON_CHAOS_SOAK_SECONDS", "20"))


def test_soak(nft_lab: Lab, figures: dict[str, object]) -> None:
    report = run_soak(nft_lab, SECONDS, seed=13, log=print)
    figures.update(report.summary())
    assert report.rounds >= 5
    assert report.partitions >= 1
    assert report.messages == report.rounds * 8000
