"""LinkTimers: one heap, each link's deadlines on its record, stale entries skipped."""

from __future__ import annotations

from exon.core.events import PeerId
from exon.core.link_state import LinkState, LinkStateMachine
from exon.core.records import LinkRecord
from exon.core.timers import LinkTimers


def _link(tag: int = 1) -> LinkRecord:
    link = LinkRecord(tag=tag, peer=PeerId("127.0.0.1:1", 2), machine=LinkStateMachine())
    link.stored = True
    return link


def test_due_timers_come_out_earliest_first_and_only_when_due() -> None:
    timers = LinkTimers()
    a, b = _link(1), _link(2)
    timers.arm(a, "retry", 2.0)
    timers.arm(b, "flow", 1.0)
    assert timers.next() == 1.0
    assert timers.pop_due(0.5) is None
    assert timers.pop_due(1.5) == ("flow", b)
    assert timers.pop_due(1.5) is None
    assert timers.pop_due(3.0) == ("retry", a)
    assert timers.next() is None


def test_re_arming_replaces_the_old_deadline() -> None:
    timers = LinkTimers()
    link = _link()
    timers.arm(link, "unlink", 1.0)
    timers.arm(link, "unlink", 5.0)
    assert link.deadline == 5.0
    assert timers.next() == 5.0  # the entry for 1.0 is stale: dropped on the way
    assert timers.pop_due(4.0) is None
    assert timers.pop_due(5.0) == ("unlink", link)


def test_cleared_forgotten_and_answered_timers_never_fire() -> None:
    timers = LinkTimers()
    flow, gone, resend = _link(1), _link(2), _link(3)
    timers.arm(flow, "flow", 1.0)
    LinkTimers.clear_flow(flow)
    timers.arm(gone, "retry", 1.0)
    gone.stored = False  # the core forgot the link
    resend.machine.state = LinkState.LINK_SENT
    timers.arm(resend, "resend", 1.0)
    resend.machine.state = LinkState.ESTABLISHED  # answered meanwhile
    assert len(timers) == 3
    assert timers.pop_due(10.0) is None
    assert timers.next() is None
    assert len(timers) == 0
