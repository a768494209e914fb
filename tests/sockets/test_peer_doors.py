"""The ROUTER's and DEALER's native doors (exon_fast_peers.c PeerRoutes / PeerSend /
PeerReceive, exon/sockets/routed.py): a routed link's sends and receives as one native call
each, everything else handed to the Python methods unchanged."""

from __future__ import annotations

import random
import time

import pytest

import exon
from exon.native import _fast

pytestmark = pytest.mark.skipif(_fast is None or not hasattr(_fast, "PeerSend"),
                                reason="built without the peer doors (exon.native._fast)")


def _linked(make_node, credits: int | None = None):  # type: ignore[no-untyped-def]
    a, b = make_node(), make_node()
    router = a.socket("router", tag=1)
    dealer = b.socket("dealer", tag=7) if credits is None else b.socket(
        "dealer", tag=7, credits=credits)
    dealer.link(f"{a.address}/1", timeout=5)
    return a, b, router, dealer


def test_router_and_dealer_round_trips_go_through_the_doors(make_node) -> None:
    a, b, router, dealer = _linked(make_node)
    assert type(router.send).__name__ == "PeerSend"
    assert type(router.receive).__name__ == "PeerReceive"
    assert type(dealer.send).__name__ == "PeerSend"
    assert type(dealer.receive).__name__ == "PeerReceive"
    dealer_before = b._lock.activity
    for i in range(10):
        dealer.send(b"q%d" % i, timeout=5)
    assert b._lock.activity - dealer_before == 10  # every send completed in the door
    msgs = [router.receive(timeout=5) for _ in range(10)]
    assert [m.payload for m in msgs] == [b"q%d" % i for i in range(10)]
    assert all(m.peer == exon.Peer.parse(f"{b.address}/7") for m in msgs)
    assert router._routes.link_of(msgs[0].peer) >= 0
    router_before = a._lock.activity
    for m in msgs:
        router.send(b"re:" + m.payload, peer=m.peer, timeout=5)
    assert a._lock.activity - router_before == 10  # the replies too
    replies = [dealer.receive(timeout=5) for _ in range(10)]
    assert [r.payload for r in replies] == [b"re:q%d" % i for i in range(10)]
    assert all(r.peer == exon.Peer.parse(f"{a.address}/1") for r in replies)
    assert all(type(r) is exon.Message for r in msgs + replies)


def test_what_the_router_door_cannot_do_goes_to_the_method(make_node) -> None:
    a, _b, router, dealer = _linked(make_node)
    dealer.send(b"q", timeout=5)
    peer = router.receive(timeout=5).peer
    before = a._lock.activity
    router.send(b"1", peer=str(peer), timeout=5)                      # a string: the method
    router.send(b"2", peer=exon.Peer.parse(str(peer)), timeout=5)     # an equal Peer built here
    router.send(bytearray(b"3"), peer=peer)                           # not bytes
    router.send(b"4", peer=peer, cookie="four")                       # a cookie
    assert a._lock.activity == before  # none of them completed in the door
    router.send(b"5", peer=peer)
    assert a._lock.activity == before + 1
    assert [dealer.receive(timeout=5).payload for _ in range(5)] == [b"1", b"2", b"3", b"4",
                                                                      b"5"]
    item = router.receive(timeout=5)
    assert isinstance(item, exon.Cookie)
    assert item.value == "four"
    with pytest.raises(exon.ConfigurationError, match="peer="):
        router.send(b"x")                       # no peer: the method's error
    with pytest.raises(exon.ConfigurationError):
        router.send(b"x", peer=peer, timeout=-1)  # a negative timeout: the method's
    with pytest.raises(TypeError):
        router.send(b"x", peer=peer, colour="red")


def test_router_door_unknown_and_unlinked_peers_raise_not_linked(make_node) -> None:
    a, b, router, dealer = _linked(make_node)
    other = make_node().socket("dealer", tag=8)
    other.link(f"{a.address}/1", timeout=5)
    other.send(b"from the other", timeout=5)
    dealer.send(b"hi", timeout=5)
    msgs = {m.payload: m for m in (router.receive(timeout=5) for _ in range(2))}
    msg = msgs[b"hi"]
    with pytest.raises(exon.SocketNotLinked):
        router.send(b"x", peer=exon.Peer.parse(f"{b.address}/12345"), timeout=1)  # never linked
    dealer.unlink(f"{a.address}/1", timeout=5)
    assert router._routes.link_of(msg.peer) == -1  # the route went with the link
    before = a._lock.activity
    with pytest.raises(exon.SocketNotLinked):
        router.send(b"x", peer=msg.peer, timeout=1)  # unlinked since: never sent elsewhere
    assert a._lock.activity == before
    router.send(b"still here", peer=msgs[b"from the other"].peer, timeout=5)
    assert other.receive(timeout=5).payload == b"still here"
    with pytest.raises(exon.Timeout):
        dealer.receive(timeout=0.1)
    # linked again (a new incarnation): routed again, the door sends
    dealer.link(f"{a.address}/1", timeout=5)
    dealer.send(b"back", timeout=5)
    msg = router.receive(timeout=5)
    assert msg.payload == b"back"
    before = a._lock.activity
    router.send(b"welcome", peer=msg.peer, timeout=5)
    assert a._lock.activity == before + 1
    assert dealer.receive(timeout=5).payload == b"welcome"


def test_router_door_no_credit_blocks_and_times_out_in_the_method(make_node) -> None:
    _a, _b, router, dealer = _linked(make_node, credits=2)
    dealer.send(b"q", timeout=5)
    peer = router.receive(timeout=5).peer
    router.send(b"1", peer=peer, timeout=5)
    router.send(b"2", peer=peer, timeout=5)
    with pytest.raises(exon.Timeout):
        router.send(b"3", peer=peer, timeout=0.05)
    assert [dealer.receive(timeout=5).payload for _ in range(2)] == [b"1", b"2"]
    router.send(b"3", peer=peer, timeout=5)  # credit came back
    assert dealer.receive(timeout=5).payload == b"3"


def test_req_peers_of_a_router_are_never_routed(make_node) -> None:
    a, _b, router, dealer = _linked(make_node)
    req = make_node().socket("req", tag=20)
    req.link(f"{a.address}/1", timeout=5)
    dealer.send(b"d1", timeout=5)
    req.send(b"r1", timeout=5)
    dealer.send(b"d2", timeout=5)
    msgs = [router.receive(timeout=5) for _ in range(3)]
    by_payload = {m.payload: m for m in msgs}
    assert set(by_payload) == {b"d1", b"r1", b"d2"}  # the REQ's envelope stripped
    assert [m.payload for m in msgs if m.payload != b"r1"] == [b"d1", b"d2"]  # per-peer order
    req_peer = by_payload[b"r1"].peer
    assert router._routes.link_of(req_peer) == -1
    assert router._routes.link_of(by_payload[b"d1"].peer) >= 0
    before = a._lock.activity
    router.send(b"answer", peer=req_peer, timeout=5)  # the method adds the envelope
    assert a._lock.activity == before
    assert req.receive(timeout=5).payload == b"answer"
    with pytest.raises(exon.StateError):
        router.send(b"unasked", peer=req_peer, timeout=1)


def test_dealer_door_stays_off_round_robin_while_a_rep_is_linked(make_node) -> None:
    a, b = make_node(), make_node()
    rep, router = a.socket("rep", tag=1), a.socket("router", tag=2)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/2", timeout=5)
    assert dealer._routes.round_robin == 1
    dealer.link(f"{a.address}/1", timeout=5)
    assert dealer._routes.round_robin == 0  # a REP needs the envelope
    before = b._lock.activity
    for n in range(4):
        dealer.send(b"%d" % n, timeout=5)
    assert b._lock.activity == before  # every send took the method (framing)
    got = []
    for _ in range(2):
        m = rep.receive(timeout=5)
        got.append(m.payload)
        rep.send(b"rep" + m.payload)
        m = router.receive(timeout=5)
        got.append(m.payload)
        router.send(b"router" + m.payload, peer=m.peer, timeout=5)
    assert sorted(got) == [b"0", b"1", b"2", b"3"]
    payloads = sorted(dealer.receive(timeout=5).payload for _ in range(4))
    assert len([p for p in payloads if p.startswith(b"rep")]) == 2  # envelope stripped
    dealer.unlink(f"{a.address}/1", timeout=5)
    assert dealer._routes.round_robin == 1
    before = b._lock.activity
    dealer.send(b"door", timeout=5)
    assert b._lock.activity == before + 1
    assert router.receive(timeout=5).payload == b"door"


def test_dealer_door_leaves_a_peer_keyword_and_cookies_to_the_method(make_node) -> None:
    _a, _b, router, dealer = _linked(make_node)
    with pytest.raises(TypeError):
        dealer.send(b"x", peer=exon.Peer.parse("127.0.0.1:1/1"))  # a DEALER has no peer=
    dealer.send(b"with cookie", cookie="c", timeout=5)
    msg = router.receive(timeout=5)
    assert msg.payload == b"with cookie"
    router.send(b"reply", peer=msg.peer, timeout=5)
    # both the cookie and the reply wait on the dealer (its dispatcher polls): receive
    # takes the method while a cookie is pending, and the cookie comes first
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with dealer._lock:
            if dealer._inbox.cookies and dealer._queued() > 0:
                break
        time.sleep(0.005)
    else:
        raise AssertionError("the cookie and the reply did not both arrive")
    items = [dealer.receive(timeout=5) for _ in range(2)]
    assert isinstance(items[0], exon.Cookie)
    assert items[0].value == "c"
    assert isinstance(items[1], exon.Message)
    assert items[1].payload == b"reply"


def test_closed_router_and_dealer_doors_raise_closed(make_node) -> None:
    _a, _b, router, dealer = _linked(make_node)
    dealer.send(b"q", timeout=5)
    msg = router.receive(timeout=5)
    sends = (router.send, dealer.send)
    receives = (router.receive, dealer.receive)
    router.close(timeout=5)
    dealer.close(timeout=5)
    with pytest.raises(exon.ClosedError):
        sends[0](b"late", peer=msg.peer)
    with pytest.raises(exon.ClosedError):
        sends[1](b"late")
    for receive in receives:
        with pytest.raises(exon.ClosedError):
            receive(timeout=1)
    with pytest.raises(exon.ClosedError):
        router.send(b"late", peer=msg.peer)


def test_peer_doors_kept_past_the_node_close_raise_closed(make_node) -> None:
    a, b, router, dealer = _linked(make_node)
    dealer.send(b"q", timeout=5)
    msg = router.receive(timeout=5)
    send, receive, dsend = router.send, router.receive, dealer.send
    a.close()
    b.close()
    with pytest.raises(exon.ClosedError):
        send(b"after", peer=msg.peer)
    with pytest.raises(exon.ClosedError):
        receive(timeout=1)
    with pytest.raises(exon.ClosedError):
        dsend(b"after")


def test_a_subclass_overriding_send_or_receive_keeps_its_own(make_node, monkeypatch) -> None:
    from exon.sockets.router import RouterSocket
    from exon.sockets.socket import Socket

    # a subclass registers itself as the "router" type: the registry is restored afterwards
    monkeypatch.setitem(Socket._types, "router", RouterSocket)
    calls: list[str] = []

    class CountingRouter(RouterSocket):
        def send(self, data, **kwargs):  # type: ignore[no-untyped-def, override]
            calls.append("send")
            super().send(data, **kwargs)

        def receive(self, timeout=None):  # type: ignore[no-untyped-def, override]
            calls.append("receive")
            return super().receive(timeout)

    a, b = make_node(), make_node()
    router = CountingRouter(tag=1, node=a)
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/1", timeout=5)
    dealer.send(b"x", timeout=5)
    msg = router.receive(timeout=5)
    router.send(b"y", peer=msg.peer, timeout=5)
    assert dealer.receive(timeout=5).payload == b"y"
    assert calls == ["receive", "send"]


def test_peer_routes_match_a_dict_model() -> None:
    """PeerRoutes' address table (linear probing, backward-shift deletion, growth) against
    a dict, over random set/drop of a few hundred peers on a few hundred links."""
    rng = random.Random(12)
    capacity = 256
    routes = _fast.PeerRoutes(capacity)
    peers = [object() for _ in range(400)]
    link_of: dict[int, int] = {}  # id(peer) -> link
    peer_on: dict[int, object] = {}  # link -> peer
    for _ in range(5000):
        link = rng.randrange(capacity)
        if rng.random() < 0.6:
            peer = rng.choice(peers)
            routes.set(link, peer)
            old = peer_on.pop(link, None)
            if old is not None:
                del link_of[id(old)]
            if id(peer) in link_of:
                del peer_on[link_of[id(peer)]]
            link_of[id(peer)] = link
            peer_on[link] = peer
        else:
            routes.drop(link)
            old = peer_on.pop(link, None)
            if old is not None:
                del link_of[id(old)]
        assert len(routes) == len(link_of)
    for peer in peers:
        assert routes.link_of(peer) == link_of.get(id(peer), -1)
    with pytest.raises(IndexError):
        routes.set(capacity, peers[0])
    with pytest.raises(IndexError):
        routes.drop(-1)
    with pytest.raises(TypeError):
        routes.set(0, None)


def test_router_door_messages_are_left_to_reference_counting(make_node) -> None:
    """A (payload, Peer) Message is in no cycle: the receive door leaves it untracked by the
    cycle collector, as the PULL's door does, so a stream sets off no collections."""
    import gc

    a, _b, router, dealer = _linked(make_node)
    dealer.send(b"first", timeout=5)
    assert router.receive(timeout=5).payload == b"first"
    dealer.send(b"q", timeout=5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # queued natively (the node's dispatcher polls)
        with router._lock:
            if len(router._inbox.nq):
                break
        time.sleep(0.005)
    else:
        raise AssertionError("the message did not arrive")
    before = a._lock.activity
    msg = router.receive(timeout=5)
    assert a._lock.activity == before + 1  # popped by the door
    assert msg.payload == b"q"
    assert not gc.is_tracked(msg)
