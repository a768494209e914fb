"""The node's memory budget (``LinkSettings.memory_budget``): the receive windows of all
links share it, a new link is never starved, windows grow back as the budget frees, and a
socket whose messages could not fit is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from exon.core import LinkSettings, MessageReceived, PeerId
from exon.core.socket_core import SocketCore
from exon.errors import ConfigurationError
from tests.core.helpers import make_core, pump

SIZE = 1024  #: the PULL's max message size
BUDGET = 64 * SIZE  #: room for 64 messages in all


def pushes_to_pull(count: int, *, budget: int | None = BUDGET, credits: int = 1024,
                   deliver: bool = False) -> tuple[SocketCore, list[SocketCore]]:
    """One PULL core ("B", socket 2) and ``count`` PUSH cores linked to it one after the
    other, each sending until it has no credit; ``deliver``: B's application takes
    everything between the links (else nothing, a stalled receiver)."""
    b = make_core("B", memory_budget=budget)
    b.open_socket(2, "pull", initial_credits=credits, max_message_size=SIZE)
    pushes: list[SocketCore] = []
    for i in range(count):
        add_push(b, pushes, f"A{i}")
        fill(pushes, b)
        if deliver:
            take_all(b, pushes)
    return b, pushes


def add_push(b: SocketCore, pushes: list[SocketCore], name: str) -> SocketCore:
    """A PUSH core ``name`` linked to B's PULL (socket 2), added to ``pushes``."""
    a = make_core(name)
    a.open_socket(1, "push")
    a.link(1, PeerId("B", 2), now=0.0)
    pushes.append(a)
    pump([b, *pushes])
    return a


def fill(pushes: list[SocketCore], b: SocketCore) -> None:
    for a in pushes:
        while a.credits(1, PeerId("B", 2)) > 0:
            a.send(1, b"x" * SIZE, now=0.0)
    pump([b, *pushes])


def queued(b: SocketCore) -> list[MessageReceived]:
    return [e for e in b.events() if isinstance(e, MessageReceived)]


def take_all(b: SocketCore, pushes: list[SocketCore]) -> int:
    taken = 0
    for _ in range(1000):
        messages = queued(b)
        if not messages:
            return taken
        for m in messages:
            b.deliver(m, now=0.0)
        taken += len(messages)
        b.handle_timer(now=1.0)  # FLOW timers
        pump([b, *pushes], now=1.0)
    raise AssertionError("never drained")


def outstanding(b: SocketCore, pushes: list[SocketCore], backlog: int) -> int:
    """Messages B holds or may yet receive: what it holds, plus every sender's credit."""
    return backlog + sum(a.credits(1, PeerId("B", 2)) for a in pushes)


def test_one_link_starts_small_and_grows_to_the_budget_up_to_its_credits() -> None:
    b, _pushes = pushes_to_pull(1, budget=1024 * SIZE)
    assert len(queued(b)) == 512  # a new link's first window: half its share
    for budget, credits, window in [(BUDGET, 1024, 64), (512 * SIZE, 1024, 512),
                                    (None, 1024, 1024), (BUDGET, 16, 16)]:
        b, pushes = pushes_to_pull(1, budget=budget, credits=credits, deliver=True)
        fill(pushes, b)  # after its first FLOWs: the whole budget, or the socket's credits
        assert len(queued(b)) == window, (budget, credits)
        # the rule the archive service sizes its recorders' batches by
        assert LinkSettings(memory_budget=budget).window_share(credits, SIZE) == window


def test_links_arriving_at_a_stalled_receiver_stay_within_the_budget() -> None:
    """Each new link finds the budget taken by the first: it gets one credit (not starved),
    so B never holds more than the budget plus one message per link."""
    b = make_core("B", memory_budget=BUDGET)
    b.open_socket(2, "pull", max_message_size=SIZE)
    pushes: list[SocketCore] = []
    held = 0
    for i in range(10):
        add_push(b, pushes, f"A{i}")
        fill(pushes, b)
        held += len(queued(b))
        assert outstanding(b, pushes, held) <= BUDGET // SIZE + len(pushes)
        # the core's running bound (growth without walking the links) bounds the truth
        budget = b._budget
        assert budget.peak_bytes >= sum(budget.reserved(s, lk) for s, lk in budget.holders())
        assert all(a.link_state(1, PeerId("B", 2)).name == "ESTABLISHED" for a in pushes)
    assert held >= BUDGET // SIZE  # the budget is used, not just respected


def test_windows_converge_to_fair_shares_as_the_receiver_drains() -> None:
    b, pushes = pushes_to_pull(8)
    for _ in range(4):  # B's application drains; its FLOWs grow the windows to the shares
        assert take_all(b, pushes) > 0
        fill(pushes, b)
    per_link: dict[str, int] = {}
    for m in queued(b):
        per_link[m.peer.address] = per_link.get(m.peer.address, 0) + 1
    # every link ends at its share, 64 / 8; none is starved, none holds the rest
    assert per_link == {f"A{i}": 8 for i in range(8)}


def test_the_share_of_a_closed_link_goes_to_the_others() -> None:
    b, pushes = pushes_to_pull(4, deliver=True)
    pushes[0].unlink(1, PeerId("B", 2), now=1.0)
    pump([b, *pushes], now=1.0)
    take_all(b, pushes)
    for _ in range(3):  # each grows at its next FLOWs
        fill(pushes[1:], b)
        take_all(b, pushes)
    fill(pushes[1:], b)
    counts: dict[str, int] = {}
    for m in queued(b):
        counts[m.peer.address] = counts.get(m.peer.address, 0) + 1
    assert counts == {"A1": 21, "A2": 21, "A3": 21}  # 64 // 3 each
    budget = b._budget
    assert budget.peak_bytes >= sum(budget.reserved(s, lk) for s, lk in budget.holders())
    for a in pushes[1:]:
        a.unlink(1, PeerId("B", 2), now=2.0)
    for now in (2.0, 3.0, 4.0, 10.0):  # drained, confirmed, closed
        take_all(b, pushes)
        for core in (b, *pushes):
            core.handle_timer(now=now)
        pump([b, *pushes], now=now)
    assert b.links(2) == {}
    assert (b._budget.peak_bytes, b._budget.peak_links) == (0, 0)  # every link gone: nothing held


def test_a_socket_whose_messages_exceed_the_budget_is_refused() -> None:
    b = make_core("B", memory_budget=BUDGET)
    with pytest.raises(ConfigurationError, match="memory_budget"):
        b.open_socket(2, "pull", max_message_size=BUDGET + 1)
    b.open_socket(3, "push", max_message_size=BUDGET + 1, budgeted=False)  # receives nothing
    c = make_core("C", memory_budget=1 << 20, max_message_size=2 << 20)
    with pytest.raises(ConfigurationError, match="memory_budget"):
        c.open_socket(2, "pull")  # the settings' default size does not fit either
    with pytest.raises(ValidationError, match="memory_budget"):
        make_core("D", memory_budget=100)  # below 1 KiB


@pytest.mark.parametrize(("start_credits", "first", "busy_window"), [
    (4, [4, 4, 21, 4, 4], BUDGET // SIZE // 5),  # 4 each but the third (its whole share,
                                                # 21, left half free); busy: its share
    (None, [64, 1, 1, 1, 1], 1),  # the node's rule: the first idle link holds the budget
])
def test_start_credits_keep_idle_links_from_taking_the_budget(
        start_credits: int | None, first: list[int], busy_window: int) -> None:
    """Credit once granted cannot be taken back: links that never send keep their first
    windows reserved. Under the node's rule (half a share, at least 256) four idle links
    leave a fifth 1 credit, which it cannot grow; with ``start_credits`` they hold little,
    and the busy fifth grows to its share at its first FLOW."""
    b = make_core("B", memory_budget=BUDGET)
    b.open_socket(2, "pull", max_message_size=SIZE, start_credits=start_credits)
    pushes: list[SocketCore] = []
    for i in range(5):
        add_push(b, pushes, f"A{i}")
    assert [a.credits(1, PeerId("B", 2)) for a in pushes] == first
    busy = pushes[-1]
    fill([busy], b)
    take_all(b, pushes)  # B's application takes them: its FLOW grows the busy window
    fill([busy], b)
    assert len(queued(b)) == busy_window
    assert outstanding(b, pushes, len(queued(b))) <= BUDGET // SIZE + len(pushes)


def test_start_credits_below_one_are_refused() -> None:
    b = make_core("B", memory_budget=BUDGET)
    for bad in (0, -1, 2.5):
        with pytest.raises(ConfigurationError, match="start_credits"):
            b.open_socket(3, "pull", start_credits=bad)
