"""DEALER/ROUTER over real nodes sharing one media driver (IPC), ZeroMQ-style behaviour:
many requests in flight, replies routed by peer, interop with REQ and REP, bad input."""

from __future__ import annotations

import threading
import time

import pytest

import exon
from exon.core import LinkSettings
from tests.sockets.helpers import (
    assert_refused_as_incompatible,
    offers_find_peers_gone,
    send_as_the_peer_goes,
)


def _serve(router, count: int, errors: list[BaseException], transform=bytes.upper) -> None:
    """Answer ``count`` requests on ``router`` (a thread body)."""
    try:
        for _ in range(count):
            msg = router.receive(timeout=10)
            router.send(transform(msg.payload), peer=msg.peer, timeout=10)
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def _wait_queued(sock, count: int, timeout: float = 5.0) -> None:
    """Until ``count`` messages wait in ``sock``'s queues (the node's dispatcher polls)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sock._lock:
            if sock._queued() >= count:
                return
        time.sleep(0.01)
    raise AssertionError(f"{count} messages did not arrive in {timeout}s")


def test_router_receive_names_the_sender_and_send_answers_it(make_node) -> None:
    a, b, c = make_node(), make_node(), make_node()
    router = a.socket("router", tag=1)
    d1, d2 = b.socket("dealer", tag=5), c.socket("dealer", tag=6)
    d1.link(f"{a.address}/1", timeout=5)
    d2.link(f"{a.address}/1", timeout=5)
    d1.send(b"from-1", timeout=5)
    d2.send(b"from-2", timeout=5)
    got = {}
    for _ in range(2):
        msg = router.receive(timeout=5)
        got[msg.payload] = msg.peer
    assert got == {b"from-1": exon.Peer.parse(f"{b.address}/5"),
                   b"from-2": exon.Peer.parse(f"{c.address}/6")}
    router.send(b"to-2", peer=got[b"from-2"], timeout=5)
    router.send(b"to-1", peer=str(got[b"from-1"]), timeout=5)  # "HOST:PORT/TAG" works too
    assert d1.receive(timeout=5) == exon.Message(b"to-1", exon.Peer.parse(f"{a.address}/1"))
    assert d2.receive(timeout=5) == exon.Message(b"to-2", exon.Peer.parse(f"{a.address}/1"))


def test_dealer_round_robins_and_fair_queues(make_node) -> None:
    a, b = make_node(), make_node()
    routers = [a.socket("router", tag=10 + i) for i in range(3)]
    dealer = b.socket("dealer")
    for i in range(3):
        dealer.link(f"{a.address}/{10 + i}", timeout=5)
    for n in range(9):
        dealer.send(b"%d" % n, timeout=5)
    per_router = []
    for router in routers:
        msgs = [router.receive(timeout=5) for _ in range(3)]
        per_router.append([int(m.payload) for m in msgs])
        with pytest.raises(exon.Timeout):
            router.receive(timeout=0.05)  # exactly a third each
        for m in msgs:
            router.send(b"r" + m.payload, peer=m.peer, timeout=5)
    # round-robin: each router got every third request, in order
    assert sorted(x for lst in per_router for x in lst) == list(range(9))
    for lst in per_router:
        assert lst == sorted(lst)
        assert lst[1] - lst[0] == 3
        assert lst[2] - lst[1] == 3
    _wait_queued(dealer, 9)
    replies = [dealer.receive(timeout=5) for _ in range(9)]
    # fair-queued: the first three replies come from three different routers
    assert len({m.peer for m in replies[:3]}) == 3
    assert sorted(m.payload for m in replies) == sorted(b"r%d" % n for n in range(9))


def test_thousand_requests_in_flight_every_reply_matched(make_node) -> None:
    # credit alone bounds each link (no memory budget): 500 requests each way stay in
    # flight, so the round-robin splits them evenly and the replies queue in full
    unbounded = LinkSettings(memory_budget=None)
    a, b = make_node(settings=unbounded), make_node(settings=unbounded)
    routers = [a.socket("router", tag=1), a.socket("router", tag=2)]
    dealer = b.socket("dealer", credits=2048)
    for r in routers:
        dealer.link(f"{a.address}/{r.tag}", timeout=5)
    failures: list[BaseException] = []
    threads = [threading.Thread(target=_serve, args=(r, 500, failures, lambda p: b"ok:" + p))
               for r in routers]
    for t in threads:
        t.start()
    sent = {b"%06d" % i for i in range(1000)}
    for request in sorted(sent):  # all 1,000 before reading any reply
        dealer.send(request, timeout=10)
    replies = [dealer.receive(timeout=10) for _ in range(1000)]
    for t in threads:
        t.join(timeout=20)
    assert not failures
    assert {m.payload for m in replies} == {b"ok:" + r for r in sent}
    assert len(replies) == 1000
    by_router = {m.peer.tag for m in replies}
    assert by_router == {1, 2}
    with pytest.raises(exon.Timeout):
        dealer.receive(timeout=0.05)


def test_dealer_cookies_come_back(make_node) -> None:
    a, b = make_node(), make_node()
    router = a.socket("router", tag=1)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/1", timeout=5)
    for i in range(3):
        dealer.send(b"q%d" % i, cookie=i, timeout=5)
    msgs = [router.receive(timeout=5) for _ in range(3)]
    router.send(b"done", peer=msgs[0].peer, cookie="reply", timeout=5)
    items = [dealer.receive(timeout=5) for _ in range(4)]
    assert sorted(i.value for i in items if isinstance(i, exon.Cookie)) == [0, 1, 2]
    assert [i.payload for i in items if isinstance(i, exon.Message)] == [b"done"]
    assert router.receive(timeout=5) == exon.Cookie("reply")


def test_req_to_router(make_node) -> None:
    a = make_node()
    router = a.socket("router", tag=1)
    reqs = [make_node().socket("req", tag=20 + i) for i in range(3)]
    for r in reqs:
        r.link(f"{a.address}/1", timeout=5)
    for i, r in enumerate(reqs):
        r.send(b"ask-%d" % i, timeout=5)
    msgs = [router.receive(timeout=5) for _ in range(3)]
    assert sorted(m.payload for m in msgs) == [b"ask-0", b"ask-1", b"ask-2"]  # no envelope
    for m in reversed(msgs):  # any order across peers
        router.send(b"re:" + m.payload, peer=m.peer, timeout=5)
    for i, r in enumerate(reqs):
        reply = r.receive(timeout=5)
        assert reply.payload == b"re:ask-%d" % i
        assert reply.peer == exon.Peer.parse(f"{a.address}/1")
        assert r.stale_dropped == 0
    # a second round on the same links
    reqs[0].send(b"again", timeout=5)
    m = router.receive(timeout=5)
    router.send(b"yes", peer=m.peer, timeout=5)
    assert reqs[0].receive(timeout=5).payload == b"yes"


def test_router_answers_an_abandoned_req_request_in_order(make_node) -> None:
    a, b = make_node(), make_node()
    router = a.socket("router", tag=1)
    req = b.socket("req")
    req.link(f"{a.address}/1", timeout=5)
    req.send(b"first", timeout=5)
    with pytest.raises(exon.Timeout):
        req.receive(timeout=0.1)  # abandoned
    req.send(b"second", timeout=5)
    first, second = router.receive(timeout=5), router.receive(timeout=5)
    router.send(b"late", peer=first.peer, timeout=5)
    router.send(b"fresh", peer=second.peer, timeout=5)
    assert req.receive(timeout=5).payload == b"fresh"
    assert req.stale_dropped == 1
    with pytest.raises(exon.StateError, match="no request waiting"):
        router.send(b"unasked", peer=second.peer, timeout=5)


def test_dealer_to_rep(make_node) -> None:
    a, b = make_node(), make_node()
    reps = [a.socket("rep", tag=1), a.socket("rep", tag=2)]
    dealer = b.socket("dealer")
    for r in reps:
        dealer.link(f"{a.address}/{r.tag}", timeout=5)
    for n in range(6):  # six in flight over two REPs
        dealer.send(b"n%d" % n, timeout=5)
    seen = []
    for rep in reps:
        for _ in range(3):
            m = rep.receive(timeout=5)
            assert m.peer == exon.Peer.parse(f"{b.address}/{dealer.tag}")
            seen.append(m.payload)
            rep.send(m.payload + b"!")
    assert sorted(seen) == [b"n%d" % n for n in range(6)]
    replies = [dealer.receive(timeout=5) for _ in range(6)]
    assert sorted(r.payload for r in replies) == sorted(s + b"!" for s in seen)
    assert {r.peer.tag for r in replies} == {1, 2}
    assert dealer.malformed_dropped == 0


def test_dealer_with_a_rep_and_a_router(make_node) -> None:
    a, b = make_node(), make_node()
    rep, router = a.socket("rep", tag=1), a.socket("router", tag=2)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/1", timeout=5)
    dealer.link(f"{a.address}/2", timeout=5)
    for n in range(4):
        dealer.send(b"%d" % n, timeout=5)
    for _ in range(2):
        m = rep.receive(timeout=5)
        rep.send(b"rep" + m.payload)
        m = router.receive(timeout=5)
        router.send(b"router" + m.payload, peer=m.peer, timeout=5)
    payloads = sorted(dealer.receive(timeout=5).payload for _ in range(4))
    assert len([p for p in payloads if p.startswith(b"rep")]) == 2
    assert len([p for p in payloads if p.startswith(b"router")]) == 2
    assert {p.lstrip(b"reputo") for p in payloads} == {b"0", b"1", b"2", b"3"}


def test_router_send_to_unknown_or_unlinked_peer_raises(make_node) -> None:
    a, b = make_node(), make_node()
    router = a.socket("router", tag=1)
    dealer = b.socket("dealer", tag=9)
    with pytest.raises(exon.SocketNotLinked):
        router.send(b"x", peer=f"{b.address}/9", timeout=1)  # never linked
    dealer.link(f"{a.address}/1", timeout=5)
    dealer.send(b"hi", timeout=5)
    msg = router.receive(timeout=5)
    dealer.unlink(f"{a.address}/1", timeout=5)
    with pytest.raises(exon.SocketNotLinked):
        router.send(b"x", peer=msg.peer, timeout=1)  # unlinked since
    with pytest.raises(exon.SocketNotLinked):
        router.send_nowait(b"x", peer=f"{b.address}/12345")


def test_router_send_without_peer_or_with_a_bad_one(make_node) -> None:
    a = make_node()
    router = a.socket("router", tag=1)
    with pytest.raises(exon.ConfigurationError, match="peer="):
        router.send(b"x")
    with pytest.raises(exon.ConfigurationError):
        router.send(b"x", peer="not-a-peer")
    with pytest.raises(exon.ConfigurationError):
        router.send_nowait(b"x")


def test_router_send_blocks_on_credit_then_times_out(make_node) -> None:
    a, b = make_node(), make_node()
    router = a.socket("router", tag=1)
    dealer = b.socket("dealer", credits=2)
    dealer.link(f"{a.address}/1", timeout=5)
    dealer.send(b"q", timeout=5)
    peer = router.receive(timeout=5).peer
    router.send(b"1", peer=peer, timeout=5)
    router.send(b"2", peer=peer, timeout=5)
    with pytest.raises(exon.BackPressured):
        router.send_nowait(b"3", peer=peer)
    started = time.monotonic()
    with pytest.raises(exon.Timeout):
        router.send(b"3", peer=peer, timeout=0.2)
    assert time.monotonic() - started < 5
    assert dealer.receive(timeout=5).payload == b"1"  # credit comes back (batched FLOW)
    assert dealer.receive(timeout=5).payload == b"2"
    router.send(b"3", peer=peer, timeout=5)
    assert dealer.receive(timeout=5).payload == b"3"


def test_dealer_without_links_times_out_and_nowait_backpressures(make_node) -> None:
    dealer = make_node().socket("dealer")
    with pytest.raises(exon.Timeout):
        dealer.send(b"x", timeout=0.1)
    with pytest.raises(exon.BackPressured):
        dealer.send_nowait(b"x")
    with pytest.raises(exon.Timeout):
        dealer.receive(timeout=0.05)


@pytest.mark.parametrize(("left", "right"), [
    ("router", "pull"), ("router", "push"), ("router", "rep"), ("router", "router"),
    ("dealer", "req"), ("dealer", "pull"), ("dealer", "dealer"), ("req", "dealer"),
    ("push", "router"),
])
def test_incompatible_pairs_are_refused_permanently(make_node, left: str, right: str) -> None:
    assert_refused_as_incompatible(make_node, left, right)


def test_reply_from_rep_shorter_than_envelope_is_counted(make_node) -> None:
    """A DEALER linked with a REP strips the envelope; a reply too short is dropped."""
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/1", timeout=5)
    dealer.send(b"x", timeout=5)
    rep.receive(timeout=5)
    rep._replying = (rep._replying[0], b"")  # a broken REP: no envelope in its reply
    rep.send(b"abc")
    with pytest.raises(exon.Timeout):
        dealer.receive(timeout=0.2)
    assert dealer.malformed_dropped == 1


def test_router_socket_types_exported() -> None:
    assert exon.DealerSocket.type == "dealer"
    assert exon.RouterSocket.type == "router"
    from exon.sockets import DealerSocket, RouterSocket

    assert DealerSocket is exon.DealerSocket
    assert RouterSocket is exon.RouterSocket


def test_a_router_forgets_closed_peers_past_its_bound(make_node) -> None:
    a = make_node()
    router = a.socket("router", tag=40)
    router._PEER_TYPES_MAX = 2  # a small bound for the test (the class default is 4096)
    first = make_node().socket("req")
    first.link(f"{a.address}/40", timeout=5)
    second = make_node().socket("dealer")
    second.link(f"{a.address}/40", timeout=5)
    first.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the REQ's link is gone at the router
        with router._lock:
            if len(router._core.links(router.tag)) == 1:
                break
        time.sleep(0.01)
    third = make_node().socket("dealer")
    third.link(f"{a.address}/40", timeout=5)
    router.wait_for_links(2, timeout=5)
    with router._lock:
        kinds = sorted(router._peer_types.values())
    assert kinds == ["dealer", "dealer"]  # the closed REQ was forgotten, the live ones kept


@pytest.mark.parametrize("peer_type", ["router", "rep"])
def test_dealer_link_breaking_inside_the_send_fails_the_receive(make_node, monkeypatch,
                                                               peer_type) -> None:
    """The send that finds the peer's node gone breaks the only link before it returns:
    the receive waiting for the reply raises BrokenLink at once (once), not a Timeout."""
    a, b = make_node(), make_node()
    a.socket(peer_type, tag=1)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/1", timeout=5)
    send_as_the_peer_goes(b, dealer, "c", monkeypatch)
    started = time.monotonic()
    with pytest.raises(exon.BrokenLink):
        dealer.receive(timeout=5)
    assert time.monotonic() - started < 2
    with pytest.raises(exon.Timeout):  # reported once: the next receive waits
        dealer.receive(timeout=0.2)


def test_router_reply_whose_link_breaks_inside_the_send_loses_its_cookie(make_node,
                                                                          monkeypatch) -> None:
    a, b = make_node(), make_node()
    router = a.socket("router", tag=1)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/1", timeout=5)
    dealer.send(b"hello?", timeout=5)
    request = router.receive(timeout=5)
    with monkeypatch.context() as patch:
        offers_find_peers_gone(a, patch)
        router.send(b"answer", peer=request.peer, cookie="r", timeout=5)
    assert router.receive(timeout=5) == exon.CookieLost("r")
    with pytest.raises(exon.SocketNotLinked):  # the peer is gone: no silent drop next
        router.send(b"again", peer=request.peer, timeout=1)
