"""The LinkAccelerator hook: attach on ESTABLISHED, detach on leaving it, counters shared
with the accelerator's record (the Node's native link table in production)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from exon.core import LinkState, PeerId
from exon.core.credits import CreditLedger
from tests.core import test_stateful
from tests.core.helpers import make_core, pump


class FakeAccelerator:
    """Holds each attached ledger's counters in a plain record, like the C table."""

    def __init__(self) -> None:
        self.live: dict[int, SimpleNamespace] = {}
        self.attaches = 0
        self.detaches = 0

    def attach(self, tag: int, peer: PeerId, incarnation: int, peer_incarnation: int,
               ledger: CreditLedger, peer_max_size: int, max_size: int) -> Any:
        rec = SimpleNamespace(tag=tag, peer=peer, incarnation=incarnation)
        ledger.attach(rec)
        self.attaches += 1
        self.live[id(rec)] = rec
        return rec

    def detach(self, token: Any) -> None:
        assert id(token) in self.live, "detached twice or never attached"
        del self.live[id(token)]
        self.detaches += 1

    def set_window(self, token: Any, capacity: int, batch: int) -> None:
        assert id(token) in self.live, "a window set on a link not attached"
        token.window = (capacity, batch)


def test_ledger_attach_moves_counters_and_detach_copies_them_back() -> None:
    led = CreditLedger(limit=4, capacity=8)
    led.spend()
    rec = SimpleNamespace()
    led.attach(rec)
    assert (rec.limit, rec.sent, rec.advertised) == (4, 1, 8)
    rec.sent += 2  # the native side sends
    assert led.credit == 1
    led.apply_flow(delivered=3, limit=10)
    assert rec.limit == 10
    assert led.confirmed == 3
    led.detach()
    rec.sent = 999  # no longer read
    assert (led.limit, led.sent) == (10, 3)


def test_links_attach_when_established_and_detach_when_unlinking() -> None:
    acc_a, acc_b = FakeAccelerator(), FakeAccelerator()
    a, b = make_core("A"), make_core("B")
    a.accelerator, b.accelerator = acc_a, acc_b
    a.open_socket(1, "push")
    b.open_socket(2, "pull", initial_credits=4)
    a.link(1, PeerId("B", 2), now=0.0)
    pump([a, b])
    assert a.link_state(1, PeerId("B", 2)) is LinkState.ESTABLISHED
    assert len(acc_a.live) == 1
    assert len(acc_b.live) == 1
    rec = next(iter(acc_a.live.values()))
    a.send(1, b"x", now=0.0)
    assert rec.sent == 1  # the core's own send spends the shared count
    a.unlink(1, PeerId("B", 2), now=0.0)
    assert acc_a.live == {}  # UNLINKING: no native sends any more
    pump([a, b])
    for ev in b.events():
        if type(ev).__name__ == "MessageReceived":
            b.deliver(ev, now=0.0)
    pump([a, b])
    b.handle_timer(now=1.0)
    pump([a, b], now=1.0)
    assert acc_b.live == {}
    assert acc_a.detaches == acc_a.attaches == 1


class AcceleratedLinkMachine(test_stateful.LinkMachine):
    """The stateful machine with both cores' counters living in accelerator records."""

    def __init__(self) -> None:
        super().__init__()
        self.acc_a, self.acc_b = FakeAccelerator(), FakeAccelerator()
        self.a.accelerator = self.acc_a
        self.b.accelerator = self.acc_b

    def teardown(self) -> None:
        super().teardown()
        assert self.acc_a.live == {}
        assert self.acc_a.attaches == self.acc_a.detaches


AcceleratedLinkMachine.TestCase.settings = test_stateful.LinkMachine.TestCase.settings
TestAcceleratedLinkMachine = AcceleratedLinkMachine.TestCase
