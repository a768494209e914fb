"""REQ/REP receive() while blocked: what ends the wait, and what must not.

The blocked wait asks the socket's blocked-error hook (REQ: the pending request's link
closed; any socket: every link broke) once when it starts and again only after a link of
the socket closed (``Socket._closes``), not on every wake-up.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import exon


def _in_thread(call: Any) -> tuple[threading.Thread, list[object]]:
    """Run ``call()`` in a thread; its result or ExonError lands in the list."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except exon.ExonError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_pending_link_closed_before_receive_raises_broken_link_at_once(make_node) -> None:
    """The link with the asked REP closed before receive() began: the first look of the
    wait reports it (no LinkClosed comes during the wait to prompt a second one)."""
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req", tag=2)
    req.link(f"{a.address}/1", timeout=5)
    req.send(b"question", timeout=5)
    assert rep.receive(timeout=5).payload == b"question"
    rep.unlink(f"{b.address}/2", timeout=5)
    deadline = time.monotonic() + 5
    while req.peers and time.monotonic() < deadline:  # the REQ's side closed too
        time.sleep(0.01)
    started = time.monotonic()
    with pytest.raises(exon.BrokenLink):
        req.receive(timeout=5)
    assert time.monotonic() - started < 2


def test_another_link_closing_does_not_end_the_wait(make_node) -> None:
    """A link other than the pending request's closes while the REQ waits: the hook is
    asked again and finds nothing; the reply still arrives."""
    a, b = make_node(), make_node()
    rep1, rep2 = a.socket("rep", tag=1), a.socket("rep", tag=2)
    req = b.socket("req", tag=3)
    req.link(f"{a.address}/1", timeout=5)
    req.send(b"to one", timeout=5)  # round-robin: rep1 is the only link yet
    req.link(f"{a.address}/2", timeout=5)
    assert rep1.receive(timeout=5).payload == b"to one"
    thread, outcome = _in_thread(lambda: req.receive(timeout=10))
    time.sleep(0.05)
    rep2.unlink(f"{b.address}/3", timeout=5)  # the other link closes meanwhile
    time.sleep(0.05)
    assert not outcome  # still waiting for rep1
    rep1.send(b"answer", timeout=5)
    thread.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], exon.Message)
    assert outcome[0].payload == b"answer"


@pytest.mark.parametrize("kind", ["req", "rep"])
def test_close_while_blocked_in_receive_raises_closed(make_node, kind: str) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req", tag=2)
    req.link(f"{a.address}/1", timeout=5)
    if kind == "req":
        req.send(b"never answered", timeout=5)
        assert rep.receive(timeout=5).payload == b"never answered"
        waiting = req
    else:
        waiting = rep
    thread, outcome = _in_thread(lambda: waiting.receive(timeout=10))
    time.sleep(0.05)
    assert not outcome
    started = time.monotonic()
    waiting.close(timeout=2)
    thread.join(5)
    assert len(outcome) == 1
    assert isinstance(outcome[0], (exon.ClosedError, exon.BrokenLink)), outcome
    assert time.monotonic() - started < 5


def test_after_the_asked_rep_broke_the_next_request_goes_to_the_other(make_node) -> None:
    """The REP holding the request drops its link: the REQ's wait ends in BrokenLink, it
    is not wedged, and its next request is answered by the REP still linked."""
    a, b = make_node(), make_node()
    rep1, rep2 = a.socket("rep", tag=1), a.socket("rep", tag=2)
    req = b.socket("req", tag=3)
    req.link(f"{a.address}/1", timeout=5)
    req.link(f"{a.address}/2", timeout=5)
    req.send(b"first", timeout=5)
    got = None
    deadline = time.monotonic() + 5
    while got is None and time.monotonic() < deadline:
        for rep in (rep1, rep2):
            try:
                got = (rep, rep.receive(timeout=0.02))
                break
            except exon.Timeout:
                continue
    assert got is not None
    asked, msg = got
    assert msg.payload == b"first"
    other = rep2 if asked is rep1 else rep1
    thread, outcome = _in_thread(lambda: req.receive(timeout=10))
    asked.unlink(f"{b.address}/3", timeout=5)
    thread.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], exon.BrokenLink)
    with pytest.raises(exon.StateError):  # the request is gone: send is the next call
        req.receive(timeout=0.1)
    req.send(b"second", timeout=5)
    assert other.receive(timeout=5).payload == b"second"
    other.send(b"from the other", timeout=5)
    assert req.receive(timeout=5).payload == b"from the other"
    assert req.stale_dropped == 0


def test_a_reply_larger_than_a_frame_arrives_whole_while_blocked(make_node) -> None:
    """A fragmented reply (many times the MTU) arrives while the REQ waits: whole, once."""
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req", tag=2)
    req.link(f"{a.address}/1", timeout=5)
    big = bytes(range(256)) * 1200  # 300 KiB
    for round_trip in range(3):
        req.send(b"%d" % round_trip, timeout=5)
        thread, outcome = _in_thread(lambda: req.receive(timeout=10))
        assert rep.receive(timeout=5).payload == b"%d" % round_trip
        rep.send(big + b"%d" % round_trip, timeout=5)
        thread.join(10)
        assert len(outcome) == 1
        assert isinstance(outcome[0], exon.Message)
        assert outcome[0].payload == big + b"%d" % round_trip
