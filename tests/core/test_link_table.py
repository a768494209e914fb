"""Every (state, input) pair of the link table: on the bare machine, and through the core."""

from __future__ import annotations

import itertools

import pytest

from exon.core import frames as F
from exon.core.events import PeerId
from exon.core.link_state import (
    FRAME_INPUTS,
    TABLE,
    LinkInput,
    LinkState,
    LinkStateMachine,
    Transition,
    Verdict,
    table_markdown,
)
from exon.errors import StateError
from tests.core.helpers import make_core, pump, transfer

PAIRS = list(itertools.product(LinkState, LinkInput))


def possible_next(t: Transition) -> set[LinkState]:
    return {t.next} if isinstance(t.next, LinkState) else set(t.next.values())


@pytest.mark.parametrize(("state", "event"), PAIRS)
def test_every_pair_is_a_transition_or_a_state_error(state: LinkState, event: LinkInput) -> None:
    machine = LinkStateMachine(state)
    if (state, event) in TABLE:
        t = machine.lookup(event)
        verdicts = [None] if isinstance(t.next, LinkState) else list(t.next)
        for verdict in verdicts:
            m = LinkStateMachine(state)
            assert m.commit(t, verdict) in possible_next(t)
    else:
        with pytest.raises(StateError, match=event.value):
            machine.lookup(event)
        assert machine.state is state


def test_every_frame_is_handled_in_every_state() -> None:
    missing = [(s, i) for s in LinkState for i in FRAME_INPUTS if (s, i) not in TABLE]
    assert missing == []


def test_only_unlinking_can_drain_and_retry_wait_alone_fires_link() -> None:
    assert [s for s in LinkState if (s, LinkInput.DRAINED) in TABLE] == [LinkState.UNLINKING]
    assert TABLE[(LinkState.RETRY_WAIT, LinkInput.TIMER)].next is LinkState.LINK_SENT


def test_verdict_maps_name_real_verdicts() -> None:
    for t in TABLE.values():
        if not isinstance(t.next, LinkState):
            assert set(t.next) <= set(Verdict)


def test_markdown_lists_every_entry() -> None:
    md = table_markdown()
    assert len(md.splitlines()) == len(TABLE) + 2
    for state in LinkState:
        assert f"| {state.value} |" in md


# ---- through the core: bring A's link to each state, then feed each frame from B ---------

A_PEER = PeerId("A", 1)
B_PEER = PeerId("B", 2)


def _in_state(state: LinkState):  # type: ignore[no-untyped-def]
    a, b, c = make_core("A"), make_core("B"), make_core("C")
    a.open_socket(1, "push")
    b.open_socket(2, "pull", max_links=1 if state is LinkState.RETRY_WAIT else None)
    binc = 777
    if state is LinkState.LINK_SENT:
        a.link(1, B_PEER, now=0)
        a.frames_to_send()
    elif state is LinkState.GOT_DECISION:
        a.link(1, B_PEER, now=0)
        b.link(2, A_PEER, now=0)
        transfer(a, b)
        _link_frame, ack = b.frames_to_send()
        a.receive_frame("B", ack[1], now=0)
        binc = b._sockets[2].links[A_PEER].incarnation
    elif state is LinkState.DECIDED:
        b.link(2, A_PEER, now=0)
        transfer(b, a)
        a.frames_to_send()
        binc = b._sockets[2].links[A_PEER].incarnation
    elif state in (LinkState.ESTABLISHED, LinkState.UNLINKING):
        a.link(1, B_PEER, now=0)
        pump([a, b])
        binc = b._sockets[2].links[A_PEER].incarnation
        if state is LinkState.UNLINKING:
            a.unlink(1, B_PEER, now=0)
            a.frames_to_send()
    elif state is LinkState.RETRY_WAIT:
        c.open_socket(3, "push")
        c.link(3, B_PEER, now=0)
        pump([b, c])
        a.link(1, B_PEER, now=0)
        pump([a, b, c])
    assert a.link_state(1, B_PEER) is state
    a.events()
    link = a._sockets[1].links.get(B_PEER)
    return a, (link.incarnation if link else 0), binc


def _frame(event: LinkInput, ainc: int, binc: int, echo: bytes = b"") -> bytes:
    meta = F.LinkMetadata(socket_type="pull", credits=10, max_message_size=100, node_id="node-B",
                          reply_address="B", nonce=b"n" * 16)
    return {
        LinkInput.LINK: lambda: F.encode_link(2, 1, binc, meta),
        LinkInput.LINKACK_META: lambda: F.encode_linkack(2, 1, binc, F.Decision.ACCEPTED, meta,
                                                         answers=ainc, echo=echo),
        LinkInput.LINKACK: lambda: F.encode_linkack(2, 1, binc, F.Decision.ACCEPTED,
                                                    answers=ainc, echo=echo),
        LinkInput.DATA: lambda: F.encode_data(2, 1, binc, b"d"),
        LinkInput.FLOW: lambda: F.encode_flow(2, 1, binc, 0, 500),
        LinkInput.UNLINK: lambda: F.encode_unlink(2, 1, binc, 0),
        LinkInput.ERROR: lambda: F.encode_error(2, 1, ainc, F.ErrorCode.SOCKET_NOT_LINKED),
    }[event]()


@pytest.mark.parametrize(("state", "event"), list(itertools.product(LinkState, FRAME_INPUTS)))
def test_core_handles_every_state_frame_pair(state: LinkState, event: LinkInput) -> None:
    a, ainc, binc = _in_state(state)
    link = a._sockets[1].links.get(B_PEER)
    echo = link.token if link is not None else b""  # (DECIDED: A answered B's LINK, 2.6.1)
    a.receive_frame("B", _frame(event, ainc, binc, echo), now=0.0)
    after = a.link_state(1, B_PEER)
    allowed = possible_next(TABLE[(state, event)])
    if LinkState.UNLINKING in allowed:
        allowed |= {LinkState.IDLE}  # nothing to drain: UNLINKING ends at once
    assert after in allowed, (state, event, after)
    a.frames_to_send()
    a.handle_timer(now=1000.0)  # nothing blows up afterwards either


def test_the_wire_spec_embeds_the_current_table() -> None:
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
    assert table_markdown() in doc.read_text()
