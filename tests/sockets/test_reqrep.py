"""REQ/REP over real nodes sharing one media driver (IPC)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import exon
from tests.sockets.helpers import send_as_the_peer_goes


def test_api_example_cookie_then_reply(make_node) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req", tag=2)
    req.link(f"{a.address}/1", timeout=5)
    req.send(b"ping", cookie={"id": 7}, timeout=5)
    msg = rep.receive(timeout=5)
    assert msg == exon.Message(b"ping", exon.Peer.parse(f"{b.address}/2"))
    rep.send(b"pong")
    assert req.receive(timeout=5) == exon.Cookie({"id": 7})
    reply = req.receive(timeout=5)
    assert isinstance(reply, exon.Message)
    assert reply.payload == b"pong"
    assert reply.peer == exon.Peer.parse(f"{a.address}/1")
    req.unlink(f"{a.address}/1", timeout=5)
    req.close()


def test_req_round_robin_over_reps(make_node) -> None:
    a, b = make_node(), make_node()
    reps = [a.socket("rep", tag=10 + i) for i in range(3)]
    req = b.socket("req")
    for i in range(3):
        req.link(f"{a.address}/{10 + i}", timeout=5)
    order = []
    for n in range(6):
        req.send(b"q%d" % n, timeout=5)
        # exactly one REP got it; find which
        deadline = time.monotonic() + 5
        found = False
        while not found and time.monotonic() < deadline:
            for i, rep in enumerate(reps):
                try:
                    m = rep.receive(timeout=0.01)
                except exon.Timeout:
                    continue
                order.append(i)
                rep.send(m.payload.upper())
                found = True
                break
        assert req.receive(timeout=5).payload == b"Q%d" % n
    assert sorted(order[:3]) == [0, 1, 2]
    assert order[3:] == order[:3]


def test_rep_answers_two_reqs_each_its_own(make_node) -> None:
    a, b, c = make_node(), make_node(), make_node()
    rep = a.socket("rep", tag=1)
    r1, r2 = b.socket("req"), c.socket("req")
    r1.link(f"{a.address}/1")
    r2.link(f"{a.address}/1")
    r1.send(b"from-1")
    r2.send(b"from-2")
    for _ in range(2):
        m = rep.receive(timeout=5)
        rep.send(b"answer-" + m.payload)
    assert r1.receive(timeout=5).payload == b"answer-from-1"
    assert r2.receive(timeout=5).payload == b"answer-from-2"


def test_rep_fair_queues_requesters(make_node) -> None:
    a = make_node()
    rep = a.socket("rep", tag=1)
    reqs = [make_node().socket("req") for _ in range(3)]
    for r in reqs:
        r.link(f"{a.address}/1")
    for r in reqs:
        r.send(b"x")
    seen = []
    for _ in range(3):
        m = rep.receive(timeout=5)
        seen.append(m.peer)
        rep.send(b"y")
    assert len(set(seen)) == 3
    for r in reqs:
        assert r.receive(timeout=5).payload == b"y"


def test_req_ignores_stale_reply_after_timeout(make_node) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req")
    req.link(f"{a.address}/1")
    req.send(b"first")
    with pytest.raises(exon.Timeout):
        req.receive(timeout=0.2)  # abandons the request: the REQ is not wedged
    assert rep.receive(timeout=5).payload == b"first"
    rep.send(b"late")
    req.send(b"second")
    assert rep.receive(timeout=5).payload == b"second"
    rep.send(b"fresh")
    assert req.receive(timeout=5).payload == b"fresh"
    assert req.stale_dropped == 1


def _receive_from_any(sockets, timeout: float):
    """(socket, message) of the first of ``sockets`` to receive one, or None at timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for sock in sockets:
            try:
                return sock, sock.receive(timeout=0.02)
            except exon.Timeout:
                continue
    return None


def test_req_takes_reply_only_from_the_peer_asked(make_node) -> None:
    a, b = make_node(), make_node()
    rep1, rep2 = a.socket("rep", tag=1), a.socket("rep", tag=2)
    req = b.socket("req")
    req.link(f"{a.address}/1")
    req.send(b"one")
    assert rep1.receive(timeout=5).payload == b"one"
    with pytest.raises(exon.Timeout):
        req.receive(timeout=0.1)  # abandon; rep1 will answer late
    req.link(f"{a.address}/2")
    rep1.send(b"stale")
    req.send(b"two")
    # "two" went to rep1 or rep2 (round-robin): wait on both until it shows up, bounded by
    # a deadline rather than a fixed per-socket window (slow machines take longer)
    asked = _receive_from_any((rep1, rep2), timeout=10)
    assert asked is not None, "the request reached neither REP"
    rep, m = asked
    assert m.payload == b"two"
    rep.send(b"good")
    assert req.receive(timeout=5).payload == b"good"
    assert req.stale_dropped == 1


def test_wrong_order_raises_state_error_saying_what_is_expected(make_node) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req")
    with pytest.raises(exon.StateError, match="send"):
        req.receive(timeout=1)
    with pytest.raises(exon.StateError, match="receive"):
        rep.send(b"nothing asked")
    req.link(f"{a.address}/1")
    req.send(b"a")
    with pytest.raises(exon.StateError, match="receive"):
        req.send(b"b")
    rep.receive(timeout=5)
    with pytest.raises(exon.StateError, match="send"):
        rep.receive(timeout=1)
    rep.send(b"ok")
    assert req.receive(timeout=5).payload == b"ok"


def test_incompatible_types_refused_permanently(make_node) -> None:
    a, b = make_node(), make_node()
    a.socket("push", tag=1)
    req = b.socket("req")
    with pytest.raises(exon.LinkRefused) as info:
        req.link(f"{a.address}/1", timeout=5)
    assert info.value.reason == "INCOMPATIBLE"
    assert info.value.permanent
    assert req.peers == []


def test_link_to_missing_socket_raises_socket_not_found(make_node) -> None:
    a, b = make_node(), make_node()
    req = b.socket("req")
    with pytest.raises(exon.SocketNotFound):
        req.link(f"{a.address}/99", timeout=0.5)


def test_link_limit_then_retry_succeeds_when_a_slot_frees(make_node) -> None:
    import threading

    a, b, c = make_node(), make_node(), make_node()
    rep = a.socket("rep", tag=1, max_links=1)
    r1, r2 = b.socket("req"), c.socket("req")
    r1.link(f"{a.address}/1")
    result: list[object] = []

    def second() -> None:
        try:
            r2.link(f"{a.address}/1", timeout=8)
            result.append("linked")
        except Exception as exc:
            result.append(exc)

    t = threading.Thread(target=second)
    t.start()
    t.join(0.4)
    assert not result  # refused for now (LINK_LIMIT), retrying
    r1.unlink(f"{a.address}/1", timeout=5)
    t.join(10)
    assert result == ["linked"]
    r2.send(b"hi")
    assert rep.receive(timeout=5).payload == b"hi"
    assert a.statistics().refusals_sent >= 1


def _a_reply_too_large(make_node: Any) -> tuple[Any, Any]:
    """A REP and its REQ (which takes at most 1 KiB): the REP took b"q" and its 2 KiB
    reply was refused (MessageTooLarge)."""
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req", max_message_size=1024)
    req.link(f"{a.address}/1", timeout=5)
    req.send(b"q", timeout=5)
    assert rep.receive(timeout=5).payload == b"q"
    with pytest.raises(exon.MessageTooLarge):
        rep.send(b"x" * 2048, timeout=5)
    return rep, req


def test_a_reply_too_large_for_the_requester_leaves_the_request_to_answer(make_node) -> None:
    """Nothing went out: the REP still owes the answer, and a smaller one reaches the REQ."""
    rep, req = _a_reply_too_large(make_node)
    with pytest.raises(exon.StateError, match="send"):
        rep.receive(timeout=1)
    rep.send(b"short", timeout=5)
    assert req.receive(timeout=5).payload == b"short"
    req.send(b"next", timeout=5)
    assert rep.receive(timeout=5).payload == b"next"


def test_rep_reset_gives_the_request_up(make_node) -> None:
    rep, req = _a_reply_too_large(make_node)
    rep.reset()  # the REP cannot answer: it takes the next request instead
    req.reset()
    req.send(b"second", timeout=5)
    assert rep.receive(timeout=5).payload == b"second"
    rep.send(b"answer", timeout=5)
    assert req.receive(timeout=5).payload == b"answer"
    assert req.stale_dropped == 0  # nothing was sent for the request given up


def test_a_rep_send_failing_otherwise_gives_the_request_up(make_node, monkeypatch) -> None:
    """A failure that may have sent part of the reply (here: any unexpected error) must not
    leave the REP owing it: every later receive() would raise StateError."""
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req")
    req.link(f"{a.address}/1", timeout=5)
    req.send(b"first", timeout=5)
    assert rep.receive(timeout=5).payload == b"first"

    def broken(*args: object) -> None:
        raise RuntimeError("a bug below the REP")

    with monkeypatch.context() as patch:
        patch.setattr(rep, "_send_locked", broken)
        with pytest.raises(RuntimeError):
            rep.send(b"reply", timeout=5)
    req.reset()
    req.send(b"second", timeout=5)
    assert rep.receive(timeout=5).payload == b"second"
    rep.send(b"answer", timeout=5)
    assert req.receive(timeout=5).payload == b"answer"


def test_a_link_breaking_inside_the_send_breaks_the_pending_request(make_node,
                                                                     monkeypatch) -> None:
    """The send that finds the REP's node gone (NOT_CONNECTED) breaks the link before it
    returns: the request must be pending by then, and receive raise BrokenLink at once."""
    a, b = make_node(), make_node()
    a.socket("rep", tag=1)
    req = b.socket("req")
    req.link(f"{a.address}/1", timeout=5)
    send_as_the_peer_goes(b, req, "c", monkeypatch)
    started = time.monotonic()
    with pytest.raises(exon.BrokenLink, match="pending request"):
        req.receive(timeout=5)
    assert time.monotonic() - started < 2


def test_a_rep_closed_with_the_request_untaken_fails_the_waiting_req_at_once(
        make_node) -> None:
    """The request waits in the REP's inbox when the REP closes: the close does not wait
    for it to be taken (it never will be), and the REQ waiting for the reply hears that
    its link broke then, not after the 5 s unlink timeout."""
    a, b = make_node(), make_node()
    rep = b.socket("rep", tag=1)
    req = a.socket("req")
    req.link(f"{b.address}/1", timeout=5)
    req.send(b"question", timeout=5)
    deadline = time.monotonic() + 5
    while rep._queued() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    rep.close(timeout=5)
    assert time.monotonic() - started < 1.5
    with pytest.raises(exon.BrokenLink):
        req.receive(timeout=4)
    assert time.monotonic() - started < 3
