"""The native DATA fast path (exon.middleware.fastpath) over real nodes: what goes native,
what the core still does, and that both count in one place."""

from __future__ import annotations

import struct
import threading
import time

import pytest

import exon
from exon.core import LinkState
from exon.core.frames import encode_data
from tests.sockets.helpers import linked_push_pull


def _pair(make_node, credits: int = 8):  # type: ignore[no-untyped-def]
    return linked_push_pull(make_node, credits)


def _token(node, sock):  # type: ignore[no-untyped-def]
    tokens = [t for (tag, _peer), t in node._fast.by_link.items() if tag == sock.tag]
    assert len(tokens) == 1
    return tokens[0]


def test_established_links_are_attached_and_ledgers_share_counters(make_node) -> None:
    a, b, push, pull = _pair(make_node, credits=8)
    tok = _token(a, push)
    ledger = a._core._sockets[push.tag].links[tok.peer].ledger
    assert ledger.attached is not None
    for i in range(5):
        push.send(b"m%d" % i)
    rec = a._fast.record(tok)
    assert rec.sent == 5 == ledger.sent  # one copy: the native send moved the core's count
    assert a._core.credits(push.tag, tok.peer) == 3
    got = [pull.receive(timeout=5).payload for _ in range(5)]
    assert got == [b"m%d" % i for i in range(5)]
    rtok = _token(b, pull)
    assert b._fast.record(rtok).received == 5
    assert b._fast.record(rtok).delivered == 5


def test_credit_exhaustion_through_the_native_path(make_node) -> None:
    a, _b, push, pull = _pair(make_node, credits=4)
    for _ in range(4):
        push.send_nowait(b"x")
    with pytest.raises(exon.BackPressured):
        push.send_nowait(b"y")  # the native call found no credit, the core says why
    with pytest.raises(exon.Timeout):
        push.send(b"y", timeout=0.05)
    for _ in range(4):
        assert pull.receive(timeout=5).payload == b"x"
    # FLOW raised the native limit in place: sending works again without re-attaching
    push.send(b"z", timeout=5)
    assert pull.receive(timeout=5).payload == b"z"
    tok = _token(a, push)
    rec = a._fast.record(tok)
    assert rec.limit > 4
    assert rec.sent == 5


def test_flow_mirrors_the_limit_and_returns_cookies_once(make_node) -> None:
    a, _b, push, pull = _pair(make_node, credits=4)
    push.send(b"plain")
    push.send(b"with-cookie", cookie="c1")  # core path, same counters, same order
    push.send(b"plain-again")
    assert [pull.receive(timeout=5).payload for _ in range(3)] == [
        b"plain", b"with-cookie", b"plain-again"]
    item = push.receive(timeout=5)
    assert item == exon.Cookie("c1")
    tok = _token(a, push)
    ledger = a._core._sockets[push.tag].links[tok.peer].ledger
    assert ledger.confirmed >= 2
    assert ledger.sent == 3


def test_unlink_detaches_and_drains_without_loss(make_node) -> None:
    a, b, push, pull = _pair(make_node, credits=64)
    for i in range(40):
        push.send(struct.pack("<I", i))
    tok = _token(a, push)
    rtok = _token(b, pull)
    errors: list[BaseException] = []

    def unlink() -> None:
        try:
            push.unlink(f"{b.address}/1", timeout=5)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=unlink)
    t.start()
    got = [struct.unpack("<I", pull.receive(timeout=5).payload)[0] for _ in range(40)]
    t.join(10)
    assert not t.is_alive()
    assert not errors
    assert got == list(range(40))
    assert not tok.attached
    assert not rtok.attached
    assert not a._fast.by_link
    deadline = time.monotonic() + 5
    while b._core.links(pull.tag) and time.monotonic() < deadline:
        with pytest.raises(exon.Timeout):
            pull.receive(timeout=0.02)
    assert not b._fast.by_link


def test_relink_gets_a_new_entry_and_old_incarnation_frames_are_dropped(make_node) -> None:
    a, b, push, pull = _pair(make_node, credits=8)
    old = _token(a, push)
    old_inc = old.incarnation
    push.unlink(f"{b.address}/1", timeout=5)
    push.link(f"{b.address}/1", timeout=5)
    new = _token(a, push)
    assert new is not old
    assert new.incarnation != old_inc
    assert not old.attached
    push.send(b"new")
    assert pull.receive(timeout=5).payload == b"new"
    # a DATA of the old incarnation, written straight onto the publication: not delivered
    pub = a._transport.publications[b.address]
    stale_before = b._core.statistics().stale_dropped + b._core.statistics().not_linked_sent
    with a._lock:
        assert pub.offer(encode_data(push.tag, 1, old_inc, b"stale")) > 0
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.2)
    stats = b._core.statistics()
    assert stats.stale_dropped + stats.not_linked_sent > stale_before


def test_unknown_destination_tag_still_gets_socket_not_found(make_node) -> None:
    a, b, push, pull = _pair(make_node, credits=8)
    before = b._core.statistics().not_found_sent
    pub = a._transport.publications[b.address]
    with a._lock:
        assert pub.offer(encode_data(push.tag, 999, 1, b"who?")) > 0
    deadline = time.monotonic() + 5
    while b._core.statistics().not_found_sent == before and time.monotonic() < deadline:
        with pytest.raises(exon.Timeout):
            pull.receive(timeout=0.02)
    assert b._core.statistics().not_found_sent == before + 1


def test_data_beyond_credit_is_a_violation_not_a_fast_delivery(make_node) -> None:
    a, b, push, pull = _pair(make_node, credits=2)
    tok = _token(a, push)
    pub = a._transport.publications[b.address]
    with a._lock:
        for _ in range(3):  # ignore credits: write DATA frames straight to the log
            assert pub.offer(encode_data(push.tag, 1, tok.incarnation, b"flood")) > 0
    got = [pull.receive(timeout=5).payload for _ in range(2)]
    assert got == [b"flood", b"flood"]
    deadline = time.monotonic() + 5
    while b._core.statistics().credit_violations == 0 and time.monotonic() < deadline:
        with pytest.raises(exon.Timeout):
            pull.receive(timeout=0.02)
    assert b._core.statistics().credit_violations == 1
    assert b._core.link_state(pull.tag, _peer_of(b, pull)) is LinkState.IDLE or \
        not b._fast.by_link


def _peer_of(node, sock):  # type: ignore[no-untyped-def]
    links = node._core.links(sock.tag)
    return next(iter(links)) if links else ("", 0)


def test_req_rep_replies_go_through_the_chosen_link(make_node) -> None:
    a, b = make_node(), make_node()
    rep = b.socket("rep", tag=1)
    req = a.socket("req")
    req.link(f"{b.address}/1", timeout=5)
    for i in range(50):
        req.send(b"q%d" % i, timeout=5)
        msg = rep.receive(timeout=5)
        rep.send(msg.payload.upper(), timeout=5)
        assert req.receive(timeout=5).payload == b"Q%d" % i
    tok = _token(a, req)
    assert a._fast.record(tok).sent == 50
    assert b._fast.record(_token(b, rep)).sent == 50


def test_flow_without_cookies_is_applied_natively_and_with_cookies_by_the_core(make_node) -> None:
    a, _b, push, pull = _pair(make_node, credits=4)
    tok = _token(a, push)
    ledger = a._core._sockets[push.tag].links[tok.peer].ledger
    before = a._core.statistics().frames_received
    for _ in range(3):
        for _ in range(4):
            push.send(b"x", timeout=5)
        for _ in range(4):
            assert pull.receive(timeout=5).payload == b"x"
    push.send(b"y", timeout=5)  # needs the last FLOW's credit
    assert pull.receive(timeout=5).payload == b"y"
    # every FLOW was applied by the table: the core saw none of them
    assert a._core.statistics().frames_received == before
    rec = a._fast.record(tok)
    assert rec.sent == 13 == ledger.sent
    assert rec.limit >= 13
    assert rec.confirmed == ledger.confirmed >= 12
    assert rec.hold_flow == 0
    # a cookie pending holds FLOWs for the core, which returns it exactly once
    push.send(b"c", cookie="k", timeout=5)
    assert rec.hold_flow == 1
    assert pull.receive(timeout=5).payload == b"c"
    assert push.receive(timeout=5) == exon.Cookie("k")
    assert rec.hold_flow == 0
    assert a._core.statistics().frames_received > before
    with pytest.raises(exon.StateError):
        push.receive(timeout=0.05)  # exactly once: nothing else pending


def _wait_native(pull, count: int) -> None:  # type: ignore[no-untyped-def]
    """Poll until ``count`` messages sit in the native queue of ``pull``."""
    end = time.monotonic() + 5
    while time.monotonic() < end:
        with pull.node._lock:
            if len(pull._inbox.nq) >= count:
                return
            if pull.node._poll.role is None:
                pull.node._poll.role = threading.get_ident()
                try:
                    pull.node._poll.poll_once()
                finally:
                    pull.node._poll.role = None
        time.sleep(0.005)
    raise AssertionError(f"{count} messages never reached the native queue")


def test_plain_socket_queues_natively_and_fair_queues_over_links(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=16)
    assert pull._inbox.nq is not None
    p1, p2 = a.socket("push"), a.socket("push")
    p1.link(f"{b.address}/1", timeout=5)
    p2.link(f"{b.address}/1", timeout=5)
    pull.wait_for_links(2, timeout=5)
    for i in range(6):
        p1.send(b"a%d" % i, timeout=5)
    for i in range(6):
        p2.send(b"b%d" % i, timeout=5)
    _wait_native(pull, 12)
    got = [pull.receive(timeout=5) for _ in range(12)]
    payloads = [m.payload for m in got]
    # round-robin over the two links, each link in order
    assert [p for p in payloads if p[:1] == b"a"] == [b"a%d" % i for i in range(6)]
    assert [p for p in payloads if p[:1] == b"b"] == [b"b%d" % i for i in range(6)]
    assert {payloads[0][:1], payloads[1][:1]} == {b"a", b"b"}
    assert all(isinstance(m, exon.Message) for m in got)
    assert {m.peer for m in got} == {exon.Peer.parse(f"{a.address}/{p1.tag}"),
                                     exon.Peer.parse(f"{a.address}/{p2.tag}")}
    # deliveries were counted natively and credit came back: sending goes on
    for i in range(20):
        p1.send(b"c%d" % i, timeout=5)
        assert pull.receive(timeout=5).payload == b"c%d" % i


def test_unlink_drains_the_native_queue_in_order(make_node) -> None:
    _a, b, push, pull = _pair(make_node, credits=16)
    for i in range(8):
        push.send(b"m%d" % i, timeout=5)
    _wait_native(pull, 8)
    assert pull.receive(timeout=5).payload == b"m0"
    done = threading.Event()
    t = threading.Thread(target=lambda: (push.unlink(f"{b.address}/1", timeout=5), done.set()))
    t.start()
    try:
        got = [pull.receive(timeout=5).payload for _ in range(7)]
    finally:
        t.join(10)
    assert got == [b"m%d" % i for i in range(1, 8)]
    assert done.is_set()
    assert len(pull._inbox.nq) == 0
    assert not b._fast.by_link


def test_a_core_path_message_queues_behind_the_native_ones(make_node) -> None:
    from exon.core import MessageReceived

    _a, b, push, pull = _pair(make_node, credits=16)
    for i in range(4):
        push.send(b"m%d" % i, timeout=5)
    _wait_native(pull, 4)
    tok = _token(b, pull)
    with b._lock:  # a core-path message of the same link (as after a slow frame)
        b._fast.record(tok).received += 1  # counted by the core, as _do_receive_data does
        pull._on_message(MessageReceived(tag=pull.tag, peer=tok.peer, payload=b"late",
                                         incarnation=tok.incarnation))
        assert len(pull._inbox.nq) == 5  # one inbox: behind the fast ones, in the link's lane
    push.send(b"after", timeout=5)
    got = [pull.receive(timeout=5).payload for _ in range(6)]
    assert got == [b"m0", b"m1", b"m2", b"m3", b"late", b"after"]


def test_due_flows_are_sent_natively_and_the_timer_still_covers_a_partial_batch(
        make_node) -> None:
    a, b, push, pull = _pair(make_node, credits=8)  # a FLOW per delivery
    rtok = _token(b, pull)
    rec = b._fast.record(rtok)
    assert rec.capacity == 8
    sent_before = b._core.statistics().frames_sent
    for i in range(40):
        push.send(b"m%d" % i, timeout=5)
        assert pull.receive(timeout=5).payload == b"m%d" % i
    assert rec.delivered == 40
    assert rec.advertised >= 40  # FLOWs moved the advertised limit...
    # ...without the core sending them (the timer FLOWs, if any, are few)
    assert b._core.statistics().frames_sent - sent_before < 10
    ptok = _token(a, push)
    assert a._fast.record(ptok).limit >= 40


def test_partial_batch_is_flowed_by_the_core_timer(make_node) -> None:
    a, b, push, pull = _pair(make_node, credits=64)  # batch 8
    for i in range(3):
        push.send(b"m%d" % i, timeout=5)
    for i in range(3):
        assert pull.receive(timeout=5).payload == b"m%d" % i
    rec = b._fast.record(_token(b, pull))
    # 3 < batch: the core's FLOW timer (flow_delay) sends it
    end = time.monotonic() + 5
    while rec.flowed_delivered < 3 and time.monotonic() < end:
        with pytest.raises(exon.Timeout):
            pull.receive(timeout=0.01)
    assert rec.flowed_delivered == 3
    ptok = _token(a, push)
    end = time.monotonic() + 5
    while a._fast.record(ptok).confirmed < 3 and time.monotonic() < end:
        with pytest.raises(exon.StateError):
            push.receive(timeout=0.01)  # no cookie pending: raises at once
        time.sleep(0.01)
    assert a._fast.record(ptok).limit == 3 + 64
