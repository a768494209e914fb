"""NodeTransport's INVOKER calls: the poll right after a wait that ended on data does not run
the embedded driver's duty cycles again (the wait ran them a moment before)."""

from __future__ import annotations

from typing import Any

import pytest

from exon.middleware import node_transport
from exon.middleware.node_transport import NodeTransport


class _FakeLib:
    """The two native calls involved, with the wait's result chosen by the test."""

    EXON_E_TIMEOUT = -110

    def __init__(self) -> None:
        self.wait_rc = 1
        self.invokes = 0

    def exon_invoker_wait(self, *_args: Any) -> int:
        return self.wait_rc

    def exon_driver_invoke(self, _driver: Any) -> int:
        self.invokes += 1
        return 1


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[NodeTransport, _FakeLib]:
    lib = _FakeLib()
    monkeypatch.setattr(node_transport, "lib", lib)
    transport = object.__new__(NodeTransport)  # only the attributes wait/invoke read
    transport._bridged = True
    transport._invoker = object()
    transport._image_array = None
    transport._images = []
    transport._doorbell = object()
    return transport, lib


@pytest.mark.parametrize("rc", [1, 0, _FakeLib.EXON_E_TIMEOUT])
def test_the_poll_after_any_wait_runs_its_duty_cycles(
        fake: tuple[NodeTransport, _FakeLib], rc: int) -> None:
    """Data (1), a ring (0) or a timeout: the poll's own cycles send what the caller
    offered since the wait (skipping them after data left a FLOW unsent: asyncio senders
    waited 20 s for credit, tests/sockets/test_aio_many_waiters.py)."""
    transport, lib = fake
    lib.wait_rc = rc
    transport.wait(0.01)
    assert transport.invoke() == 1
    assert lib.invokes == 1


def test_not_invoker_nothing_runs(fake: tuple[NodeTransport, _FakeLib]) -> None:
    transport, lib = fake
    transport._bridged = False
    assert transport.invoke() == 0
    assert lib.invokes == 0
