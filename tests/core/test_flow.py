"""Credits, FLOW, cookies and UNLINK that loses nothing."""

from __future__ import annotations

import pytest

from exon.core.credits import CreditLedger
from exon.core.events import (
    CookieLost,
    CookieReturned,
    CreditAvailable,
    LinkClosed,
    MessageReceived,
    PeerId,
)
from exon.core.frames import ErrorCode, FrameType, decode_frame, encode_data, encode_flow
from exon.core.link_state import LinkState
from exon.errors import BackPressured, MessageTooLarge, StateError
from tests.core.helpers import link_pair, pump, transfer


def received(events: list[object]) -> list[MessageReceived]:
    return [e for e in events if isinstance(e, MessageReceived)]


def test_sender_spends_initial_credits_then_is_back_pressured() -> None:
    p = link_pair(credits_b=4)
    assert p.a.credits(1, p.peer_b) == 4
    for i in range(4):
        p.a.send(1, b"m%d" % i, now=0)
    assert p.a.credits(1, p.peer_b) == 0
    with pytest.raises(BackPressured):
        p.a.send(1, b"no", now=0)
    assert p.a.pick_destination(1) is None


def test_credit_comes_back_on_delivery_not_on_arrival_and_batched() -> None:
    p = link_pair(credits_b=8, grant_batch_fraction=0.5, flow_delay=1.0)
    for _ in range(8):
        p.a.send(1, b"x", now=0)
    transfer(p.a, p.b)
    msgs = received(p.b.events())
    assert len(msgs) == 8
    assert p.b.frames_to_send() == []  # arrival grants nothing
    for m in msgs[:3]:
        p.b.deliver(m, now=0)
    assert p.b.frames_to_send() == []  # below the batch of 4
    p.b.deliver(msgs[3], now=0)
    (flow,) = p.b.frames_to_send()
    f = decode_frame(flow[1])
    assert f.type is FrameType.FLOW
    assert (f.delivered, f.limit) == (4, 12)
    p.a.receive_frame("B", flow[1], now=0)
    assert p.a.credits(1, p.peer_b) == 4
    assert any(isinstance(e, CreditAvailable) for e in p.a.events())
    # the timer flushes a partial batch
    p.b.deliver(msgs[4], now=0.0)
    assert p.b.next_timer() == 1.0
    p.b.handle_timer(now=0.5)
    assert p.b.frames_to_send() == []
    p.b.handle_timer(now=1.0)
    (flow2,) = p.b.frames_to_send()
    assert decode_frame(flow2[1]).limit == 13


def test_flow_is_idempotent() -> None:
    led = CreditLedger(limit=10)
    for _ in range(10):
        led.spend()
    assert led.apply_flow(5, 15) == (5, 0)
    assert led.credit == 5
    assert led.apply_flow(5, 15)[0] == 0  # duplicate
    assert led.apply_flow(3, 13)[0] == 0  # late, older
    assert led.credit == 5
    assert led.confirmed == 5


def test_a_sender_that_ignores_credit_is_dropped_counted_and_closed() -> None:
    p = link_pair(credits_b=2)
    link = p.a._sockets[1].links[p.peer_b]
    inc = link.incarnation
    p.a.send(1, b"cookie-msg", cookie="k", now=0)
    transfer(p.a, p.b)
    for _ in range(3):  # forged: beyond credit
        p.b.receive_frame("A", encode_data(1, 2, inc, b"spam"), now=0)
    stats = p.b.statistics()
    assert stats.credit_violations == 1
    ev = p.b.events()
    assert len(received(ev)) == 2  # the real one and one forged within credit
    closed = [e for e in ev if isinstance(e, LinkClosed)]
    assert closed[0].error
    assert closed[0].reason == "ERROR:CREDIT_EXCEEDED"
    out = p.b.frames_to_send()
    codes = [decode_frame(d).error for _a, d in out]
    assert codes[0] == ErrorCode.CREDIT_EXCEEDED
    assert p.b.links(2) == {}
    # the sender learns: link broken, cookie lost
    for _a, d in out:
        p.a.receive_frame("B", d, now=0)
    ev_a = p.a.events()
    assert [type(e).__name__ for e in ev_a if type(e).__name__ != "ErrorReceived"] == [
        "CookieLost", "LinkClosed"]


def test_message_larger_than_the_peer_accepts_is_refused_at_send() -> None:
    p = link_pair()
    p.b._sockets[2].max_message_size = 10
    with pytest.raises(MessageTooLarge):
        p.a.send(1, b"x" * (p.a._sockets[1].links[p.peer_b].peer_meta.max_message_size + 1),
                 now=0)


def test_cookies_come_back_exactly_once_after_delivery() -> None:
    p = link_pair(credits_b=16, flow_delay=0.0)
    for i in range(10):
        p.a.send(1, b"m", cookie={"id": i}, now=0)
    p.a.send(1, b"no cookie", now=0)
    transfer(p.a, p.b)
    msgs = received(p.b.events())
    for m in msgs[:6]:
        p.b.deliver(m, now=0)
    transfer(p.b, p.a)
    cookies = [e.cookie["id"] for e in p.a.events() if isinstance(e, CookieReturned)]
    assert cookies == list(range(6))
    # a duplicated FLOW returns nothing again
    p.a.receive_frame("B", encode_flow(2, 1, p.b._sockets[2].links[p.peer_a].incarnation, 6, 22),
                      now=0)
    assert [e for e in p.a.events() if isinstance(e, CookieReturned)] == []
    for m in msgs[6:]:
        p.b.deliver(m, now=0)
    transfer(p.b, p.a)
    cookies = [e.cookie["id"] for e in p.a.events() if isinstance(e, CookieReturned)]
    assert cookies == [6, 7, 8, 9]
    assert p.a.pending_cookies(1, p.peer_b) == 0


def test_unlink_loses_nothing() -> None:
    p = link_pair(credits_b=16, flow_delay=1.0)
    for i in range(5):
        p.a.send(1, b"%d" % i, cookie=i, now=0)
    p.a.unlink(1, p.peer_b, now=0)
    assert p.a.link_state(1, p.peer_b) is LinkState.UNLINKING
    with pytest.raises(Exception, match="not linked"):
        p.a.send(1, b"late", destination=p.peer_b, now=0)
    pump([p.a, p.b])
    msgs = received(p.b.events())
    assert [m.payload for m in msgs] == [b"0", b"1", b"2", b"3", b"4"]
    assert p.b.link_state(2, p.peer_a) is LinkState.UNLINKING
    for m in msgs:
        p.b.deliver(m, now=0.1)
    pump([p.a, p.b], 0.1)  # the last delivery flushes FLOW at once
    ea, eb = p.a.events(), p.b.events()
    assert sorted(e.cookie for e in ea if isinstance(e, CookieReturned)) == [0, 1, 2, 3, 4]
    assert [e.reason for e in ea if isinstance(e, LinkClosed)] == ["UNLINKED"]
    assert [e.reason for e in eb if isinstance(e, LinkClosed)] == ["UNLINKED"]
    assert p.a.links(1) == {}
    assert p.b.links(2) == {}


def test_unlink_timeout_reports_unconfirmed_cookies_lost() -> None:
    p = link_pair(unlink_timeout=2.0)
    p.a.send(1, b"x", cookie="never", now=0)
    p.a.unlink(1, p.peer_b, now=0)
    pump([p.a, p.b])
    p.b.events()  # B's app never takes the message
    p.a.handle_timer(now=2.0)
    ev = p.a.events()
    assert [type(e) for e in ev] == [CookieLost, LinkClosed]
    assert ev[1].reason == "TIMEOUT"


def test_round_robin_skips_links_without_credit() -> None:
    from exon.core.events import PeerId
    from tests.core.helpers import make_core

    a = make_core("A")
    a.open_socket(1, "push")
    pulls = [make_core(n) for n in ("P", "Q", "R")]
    for core in pulls:
        core.open_socket(5, "pull", initial_credits=2 if core.reply_address == "Q" else 10)
        a.link(1, PeerId(core.reply_address, 5), now=0)
    pump([a, *pulls])
    order = [a.send(1, b"x", now=0).address for _ in range(8)]
    assert order[:6] == ["P", "Q", "R", "P", "Q", "R"]
    assert order[6:] == ["P", "R"]  # Q is out of credit


def test_deliver_many_counts_a_batch_with_one_flow() -> None:
    p = link_pair(credits_b=8, grant_batch_fraction=0.5, flow_delay=1.0)
    for i in range(8):
        p.a.send(1, b"m%d" % i, cookie=i, now=0)
    transfer(p.a, p.b)
    msgs = received(p.b.events())
    inc = msgs[0].incarnation
    p.b.deliver_many(2, p.peer_a, inc, 3, now=0)
    assert p.b.frames_to_send() == []  # 3 < the batch of 4: the FLOW timer is armed
    p.b.deliver_many(2, p.peer_a, inc, 5, now=0)
    (flow,) = p.b.frames_to_send()  # one FLOW for the 5
    f = decode_frame(flow[1])
    assert (f.delivered, f.limit) == (8, 16)
    p.a.receive_frame("B", flow[1], now=0)
    assert [e.cookie for e in p.a.events() if isinstance(e, CookieReturned)] == list(range(8))
    with pytest.raises(StateError):
        p.b.deliver_many(2, p.peer_a, inc, 1, now=0)  # more than received
    p.b.deliver_many(2, p.peer_a, inc + 1, 1, now=0)  # another incarnation: ignored
    assert p.b.frames_to_send() == []


def test_abort_drops_one_link_and_the_peer_hears_of_it_on_its_next_frame() -> None:
    p = link_pair(credits_b=8)
    p.b.open_socket(3, "pull")
    p.a.link(1, PeerId("B", 3), now=0)
    pump([p.a, p.b])
    p.a.events()
    p.b.events()
    p.a.send(1, b"held", cookie="c", destination=p.peer_b, now=0)
    transfer(p.a, p.b)
    inc = received(p.b.events())[0].incarnation
    p.b.abort(2, p.peer_a, now=0, incarnation=inc + 1)  # another incarnation: nothing
    assert p.b.link_state(2, p.peer_a) is LinkState.ESTABLISHED
    p.b.close_socket(2, now=0)  # UNLINK queued for A
    p.b.abort(2, p.peer_a, now=0, incarnation=inc)
    closed = [e for e in p.b.events() if isinstance(e, LinkClosed)]
    assert [(e.reason, e.error) for e in closed] == [("CLOSED", True)]
    assert not p.b.has_socket(2)  # its last link is gone: the closing socket is forgotten
    pump([p.a, p.b])  # A answers the UNLINK, B has no such socket: ERROR, A's link breaks
    events = p.a.events()
    assert [e.cookie for e in events if isinstance(e, CookieLost)] == ["c"]
    assert p.a.link_state(1, p.peer_b) is LinkState.IDLE
    assert p.a.link_state(1, PeerId("B", 3)) is LinkState.ESTABLISHED  # the other link stays


def test_a_cookie_on_the_last_sent_message_comes_back_once_all_before_it_arrived() -> None:
    p = link_pair(credits_b=8, grant_batch_fraction=0.1)
    with pytest.raises(StateError):  # nothing sent yet on the link
        p.a.cookie_on_last_sent(1, p.peer_b, "early")
    for i in range(3):
        p.a.send(1, b"m%d" % i, now=0)  # no cookie, as the native path sends
    assert p.a.sent_counts(1) == {p.peer_b: 3}
    p.a.cookie_on_last_sent(1, p.peer_b, "batch")
    assert p.a.pending_cookies(1, p.peer_b) == 1
    transfer(p.a, p.b)
    msgs = received(p.b.events())
    for m in msgs[:2]:
        p.b.deliver(m, now=0)
    pump([p.a, p.b])
    assert not [e for e in p.a.events() if isinstance(e, CookieReturned)]
    p.b.deliver(msgs[2], now=0)
    p.b.handle_timer(now=10)
    pump([p.a, p.b], now=10)
    returned = [e.cookie for e in p.a.events() if isinstance(e, CookieReturned)]
    assert returned == ["batch"]
    # attached to a message confirmed already: back at once
    p.a.cookie_on_last_sent(1, p.peer_b, "late")
    assert [e.cookie for e in p.a.events() if isinstance(e, CookieReturned)] == ["late"]
