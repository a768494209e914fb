"""Fixtures of the chaos suite: a :class:`~tests.chaos.netns.Lab` per test, torn down even
when the test fails; the figures each test prints are collected for the run's summary."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.netns import Lab, missing_requirements, sweep_stale


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """Namespaces a, r (the relay) and b, built fresh; no node started, no fault set."""
    reason = missing_requirements()
    if reason:
        pytest.skip(reason)
    sweep_stale()
    built = Lab(tmp_path)
    try:
        built.build()
        yield built
    finally:
        built.close()


@pytest.fixture
def nft_lab(lab: Lab) -> Lab:
    """A lab whose tests need nftables (loss, duplication, partition)."""
    reason = missing_requirements(nft=True)
    if reason:
        pytest.skip(reason)
    return lab


_FIGURES: list[tuple[str, dict[str, object]]] = []


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> dict[str, object]:
    """A dict the test fills with its figures; printed in the run's summary."""
    found: dict[str, object] = {}
    _FIGURES.append((request.node.nodeid, found))
    return found


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    shown = [(name, found) for name, found in _FIGURES if found]
    if not shown:
        return
    terminalreporter.section("chaos figures")
    for name, found in shown:
        terminalreporter.write_line(name)
        for key, value in found.items():
            terminalreporter.write_line(f"    {key}: {value}")
