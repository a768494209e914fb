"""PULL batches: receive_many (delivered at once) and receive_held + confirm (delivery
counted at confirm: credit and cookies wait for it)."""

from __future__ import annotations

import threading
import time
from array import array
from typing import Any

import pytest

import exon
from exon.core import LinkSettings
from exon.core.frames import encode_data
from tests.sockets.helpers import linked_push_pull


def _queued(pull: Any) -> int:
    """Messages waiting in the PULL's inbox."""
    return int(pull._queued())


def _wait_queued(pull: Any, count: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while _queued(pull) < count and time.monotonic() < end:
        time.sleep(0.002)
    assert _queued(pull) == count


def _no_item(sock: Any, wait: float = 0.3) -> None:
    """Nothing (no cookie) arrives on ``sock`` within ``wait`` seconds."""
    with pytest.raises(exon.Timeout):
        sock.receive(timeout=wait)


def _hold_exactly(pull: Any, count: int, max_messages: int = 1024,
                  timeout: float = 5.0) -> list[Any]:
    """receive_held until ``count`` messages are held: the batches, in take order."""
    batches, held = [], 0
    end = time.monotonic() + timeout
    while held < count:
        batch = pull.receive_held(min(max_messages, count - held),
                                  timeout=max(0.01, end - time.monotonic()))
        batches.append(batch)
        held += len(batch)
    assert held == count
    return batches


def _token(node: Any, sock: Any) -> Any:
    tokens = [t for (tag, _peer), t in node._fast.by_link.items() if tag == sock.tag]
    assert len(tokens) == 1
    return tokens[0]


def _two_pushes(make_node: Any, credits: int) -> tuple[Any, Any, Any, Any]:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=credits)
    p1, p2 = a.socket("push"), a.socket("push")
    p1.link(f"{b.address}/1", timeout=5)
    p2.link(f"{b.address}/1", timeout=5)
    pull.wait_for_links(2, timeout=5)
    return b, pull, p1, p2


# ==== order and fairness ====================================================================


@pytest.mark.parametrize("hold", [False, True])
def test_each_producers_order_is_kept_across_batches(make_node, hold: bool) -> None:
    _b, pull, p1, p2 = _two_pushes(make_node, credits=64)
    n = 1500

    def produce(push: Any, name: bytes) -> None:
        for i in range(n):
            push.send(b"%s:%d" % (name, i), timeout=10)

    threads = [threading.Thread(target=produce, args=(p, nm)) for p, nm in
               ((p1, b"a"), (p2, b"b"))]
    for t in threads:
        t.start()
    got: dict[bytes, list[int]] = {b"a": [], b"b": []}
    end = time.monotonic() + 30
    while sum(map(len, got.values())) < 2 * n and time.monotonic() < end:
        if hold:
            batch = pull.receive_held(50, timeout=10)
            messages = batch.messages
            pull.confirm(batch)
        else:
            messages = pull.receive_many(50, timeout=10)
        assert 1 <= len(messages) <= 50
        for m in messages:
            name, _, i = m.payload.partition(b":")
            got[name].append(int(i))
    for t in threads:
        t.join(10)
    assert got == {b"a": list(range(n)), b"b": list(range(n))}


def test_a_held_batch_as_payloads_and_runs_is_the_same_batch(make_node) -> None:
    _b, pull, p1, p2 = _two_pushes(make_node, credits=8)
    for i in range(6):
        p1.send(b"a%d" % i, timeout=5)
    for i in range(3):
        p2.send(b"b%d" % i, timeout=5)
    _wait_queued(pull, 9)
    batch = pull.receive_held(9, timeout=5)
    assert len(batch) == 9
    # taken natively as payloads and runs: the messages are built from them on demand
    a = exon.Peer.parse(f"{p1.node.address}/{p1.tag}")
    b = exon.Peer.parse(f"{p2.node.address}/{p2.tag}")
    payloads, runs = list(batch.payloads), list(batch.runs)
    assert sum(count for _, count in runs) == 9
    assert all(runs[k][0] != runs[k + 1][0] for k in range(len(runs) - 1))
    senders = [peer for peer, count in runs for _ in range(count)]
    messages = batch.messages
    assert [(m.payload, m.peer) for m in messages] == list(zip(payloads, senders, strict=True))
    assert {m.peer for m in messages} == {a, b}
    assert [m.payload for m in messages if m.peer == a] == [b"a%d" % i for i in range(6)]
    # the other way round: a batch made of messages gives the same payloads and runs
    again = exon.HeldBatch(messages, [], None)
    assert (again.payloads, again.runs) == (payloads, runs)
    with pytest.raises(TypeError):
        exon.HeldBatch(None, [], None, payloads=payloads)
    pull.confirm(batch)
    assert _queued(pull) == 0


def test_a_held_batch_as_one_buffer_is_the_same_batch(make_node) -> None:
    _b, pull, p1, p2 = _two_pushes(make_node, credits=64)
    sizes = [0, 1, 7, 64, 300, 4000, 2, 0, 1024]
    sent_a = [bytes([65 + i]) * n for i, n in enumerate(sizes)]
    sent_b = [bytes([97 + i]) * (n // 3) for i, n in enumerate(sizes[:5])]
    for m in sent_a:
        p1.send(m, timeout=5)
    for m in sent_b:
        p2.send(m, timeout=5)
    _wait_queued(pull, len(sent_a) + len(sent_b))
    batch = pull.receive_held(64, timeout=5)
    n = len(sent_a) + len(sent_b)
    assert len(batch) == n
    # taken natively as one buffer cut by offsets: no payload list until asked for
    assert batch._payloads is None
    assert batch._messages is None
    offsets = batch.offsets
    assert (offsets.format, len(offsets), offsets[0], offsets[-1]) == ("Q", n + 1, 0,
                                                                       len(batch.buffer))
    assert isinstance(batch.buffer, bytes)
    cut = [batch.buffer[offsets[i]:offsets[i + 1]] for i in range(n)]
    assert batch.payloads == cut
    a = exon.Peer.parse(f"{p1.node.address}/{p1.tag}")
    senders = [peer for peer, count in batch.runs for _ in range(count)]
    assert [p for p, s in zip(cut, senders, strict=True) if s == a] == sent_a
    assert [p for p, s in zip(cut, senders, strict=True) if s != a] == sent_b
    assert [(m.payload, m.peer) for m in batch.messages] == list(zip(cut, senders, strict=True))
    # a batch made of messages builds the same buffer and offsets
    again = exon.HeldBatch(batch.messages, [], None)
    assert again.buffer == batch.buffer
    assert again.offsets.tolist() == offsets.tolist()
    with pytest.raises(TypeError):
        exon.HeldBatch(None, [], None, buffer=b"ab", runs=[])
    with pytest.raises(ValueError, match="offsets"):
        exon.HeldBatch(None, [], None, buffer=b"ab", runs=[],
                       offsets=memoryview(array("Q", [0, 1])))
    pull.confirm(batch)
    assert _queued(pull) == 0


def test_a_socket_queueing_raw_still_receives_one_by_one(make_node) -> None:
    """After receive_held the socket's native queue keeps its payloads raw (no object per
    message); receive(), receive_many() and a receive_held mixing both kinds see the same
    messages in the same order."""
    _a, _b, push, pull = linked_push_pull(make_node, credits=256)
    push.send(b"first", timeout=5)
    pull.confirm(_hold_exactly(pull, 1)[0])
    nq = pull._inbox.nq
    assert nq.raw == 1
    for i in range(40):
        push.send(b"m%d" % i * (i % 5), timeout=5)
    _wait_queued(pull, 40)
    assert nq.raw_count == 40
    assert nq.queued_bytes() == sum(len(b"m%d" % i * (i % 5)) for i in range(40))
    got = [pull.receive(timeout=5).payload for _ in range(3)]  # raw payloads made bytes
    assert nq.raw_count == 0
    got += [m.payload for m in pull.receive_many(7, timeout=5)]
    _wait_queued(pull, 30)
    for i in range(40, 50):
        push.send(b"m%d" % i * (i % 5), timeout=5)
    _wait_queued(pull, 40)
    assert 0 < nq.raw_count < 40  # bytes objects first, raw ones behind them
    batch = pull.receive_held(100, timeout=5)
    got += batch.payloads
    pull.confirm(batch)
    assert got == [b"m%d" % i * (i % 5) for i in range(50)]
    assert (nq.raw_count, _queued(pull)) == (0, 0)


@pytest.mark.parametrize("hold", [False, True])
def test_batches_are_fair_queued_over_two_pushes(make_node, hold: bool) -> None:
    _b, pull, p1, p2 = _two_pushes(make_node, credits=8)
    for i in range(8):
        p1.send(b"a%d" % i, timeout=5)
        p2.send(b"b%d" % i, timeout=5)
    _wait_queued(pull, 16)
    if hold:
        batch = pull.receive_held(16, timeout=5)
        messages = batch.messages
        pull.confirm(batch)
    else:
        messages = pull.receive_many(16, timeout=5)
    assert len(messages) == 16
    peers = [m.peer for m in messages]
    assert {peers[0], peers[1]} == {exon.Peer.parse(f"{p1.node.address}/{p1.tag}"),
                                    exon.Peer.parse(f"{p2.node.address}/{p2.tag}")}
    assert all(peers[k] != peers[k + 1] for k in range(15))  # round robin: a b a b ...
    firsts = [m.payload[:1] for m in messages]
    for name in (b"a", b"b"):
        assert [m.payload for m in messages if m.payload[:1] == name] == [
            name + b"%d" % i for i in range(8)]
    assert firsts.count(b"a") == firsts.count(b"b") == 8


def test_max_messages_bounds_a_batch(make_node) -> None:
    _a, _b, push, pull = linked_push_pull(make_node, credits=64)
    for i in range(10):
        push.send(b"m%d" % i, timeout=5)
    _wait_queued(pull, 10)
    first = pull.receive_held(4, timeout=5)
    second = pull.receive_held(100, timeout=5)
    assert [m.payload for m in first] == [b"m%d" % i for i in range(4)]
    assert [m.payload for m in second] == [b"m%d" % i for i in range(4, 10)]
    assert len(first) == 4
    assert list(first) == first.messages
    pull.confirm(first)
    pull.confirm(second)
    with pytest.raises(exon.ConfigurationError):
        pull.receive_many(0, timeout=0.01)


def test_core_path_and_fast_messages_in_one_held_batch(make_node) -> None:
    """One inbox: a core-path message of a link queues behind the link's fast ones and
    before the later ones; a held batch holds both kinds in that order, and confirm
    counts each once (the fast ones on the link, the core-path one through the core)."""
    from exon.core import MessageReceived

    _a, b, push, pull = linked_push_pull(make_node, credits=64)
    for i in range(5):
        push.send(b"m%d" % i, timeout=5)
    _wait_queued(pull, 5)
    tok = _token(b, pull)
    record = b._fast.record(tok)
    with b._lock:  # a core-path message of the same link (as after a slow frame)
        record.received += 1  # counted by the core, as _do_receive_data does
        pull._on_message(MessageReceived(tag=pull.tag, peer=tok.peer, payload=b"core",
                                         incarnation=tok.incarnation))
    for i in range(5, 8):
        push.send(b"m%d" % i, timeout=5)
    _wait_queued(pull, 9)
    batch = pull.receive_held(100, timeout=5)
    assert [m.payload for m in batch] == [
        b"m0", b"m1", b"m2", b"m3", b"m4", b"core", b"m5", b"m6", b"m7"]
    assert record.delivered == 0  # held: nothing counted yet
    pull.confirm(batch)
    assert record.delivered == 9
    pull.confirm(batch)  # idempotent: nothing counted twice
    assert record.delivered == 9


# ==== credit ================================================================================


def test_held_messages_keep_their_credit_until_confirmed(make_node) -> None:
    _a, _b, push, pull = linked_push_pull(make_node, credits=8)
    for i in range(8):
        push.send_nowait(b"m%d" % i)
    batches = _hold_exactly(pull, 8)
    # nothing confirmed: no FLOW comes back, the PUSH stays without credit
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        with pytest.raises(exon.BackPressured):
            push.send_nowait(b"too many")
        time.sleep(0.02)
    with pytest.raises(exon.Timeout):
        pull.receive_held(timeout=0.05)  # and nothing more arrived
    for batch in batches:
        pull.confirm(batch)
    push.send(b"after", timeout=5)  # credit came back
    for i in range(7):
        push.send_nowait(b"more%d" % i)
    got = _hold_exactly(pull, 8)
    assert [m.payload for batch in got for m in batch] == [b"after"] + [
        b"more%d" % i for i in range(7)]


# ==== cookies ===============================================================================


def test_cookie_comes_back_only_after_confirm(make_node) -> None:
    _a, _b, push, pull = linked_push_pull(make_node, credits=64)
    push.send(b"durable?", cookie="k1", timeout=5)
    push.send(b"durable too?", cookie="k2", timeout=5)
    batch = _hold_exactly(pull, 2)
    _no_item(push, 0.5)  # longer than the FLOW delay: no FLOW went out
    for b in batch:
        pull.confirm(b)
    assert {push.receive(timeout=5), push.receive(timeout=5)} == {exon.Cookie("k1"),
                                                                  exon.Cookie("k2")}


def test_receive_many_delivers_at_once(make_node) -> None:
    _a, _b, push, pull = linked_push_pull(make_node, credits=64)
    for i in range(3):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    _wait_queued(pull, 3)
    assert [m.payload for m in pull.receive_many(10, timeout=5)] == [b"m0", b"m1", b"m2"]
    assert {push.receive(timeout=5) for _ in range(3)} == {exon.Cookie(i) for i in range(3)}


def test_confirm_is_idempotent(make_node) -> None:
    _a, b, push, pull = linked_push_pull(make_node, credits=64)
    for i in range(10):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    _wait_queued(pull, 10)
    batch = pull.receive_held(4, timeout=5)
    assert len(batch) == 4
    pull.confirm(batch)
    pull.confirm(batch)  # does nothing: 6 more are received, a second count would fit
    rec = b._fast.record(_token(b, pull))
    assert rec.received == 10
    assert rec.delivered == 4
    assert {push.receive(timeout=5) for _ in range(4)} == {exon.Cookie(i) for i in range(4)}
    _no_item(push)


def test_batches_are_confirmed_in_take_order(make_node) -> None:
    _a, b, push, pull = linked_push_pull(make_node, credits=64)
    for i in range(6):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    _wait_queued(pull, 6)
    first = pull.receive_held(3, timeout=5)
    second = pull.receive_held(3, timeout=5)
    with pytest.raises(exon.StateError, match="order"):
        pull.confirm(second)
    _no_item(push)  # the refused confirm counted nothing
    assert b._fast.record(_token(b, pull)).delivered == 0
    pull.confirm(first)
    assert {push.receive(timeout=5) for _ in range(3)} == {exon.Cookie(i) for i in range(3)}
    pull.confirm(second)
    assert {push.receive(timeout=5) for _ in range(3)} == {exon.Cookie(i) for i in range(3, 6)}


def test_a_batch_of_another_socket_is_refused(make_node) -> None:
    _a, b, push, pull = linked_push_pull(make_node, credits=8)
    other = b.socket("pull")
    push.send(b"m", timeout=5)
    batch = pull.receive_held(timeout=5)
    with pytest.raises(exon.StateError):
        other.confirm(batch)
    pull.confirm(batch)


# ==== mixing ================================================================================


def test_receiving_otherwise_while_a_batch_is_held_is_refused(make_node) -> None:
    _a, _b, push, pull = linked_push_pull(make_node, credits=64)
    for i in range(4):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    _wait_queued(pull, 4)
    batch = pull.receive_held(1, timeout=5)
    for call in (lambda: pull.receive(timeout=1), pull.receive_nowait,
                 lambda: pull.receive_many(10, timeout=1)):
        with pytest.raises(exon.StateError, match="receive_held"):
            call()
    _no_item(push)  # none of them counted a delivery
    second = pull.receive_held(10, timeout=5)  # more held batches are fine
    assert [m.payload for m in second] == [b"m1", b"m2", b"m3"]
    pull.confirm(batch)
    pull.confirm(second)
    assert {push.receive(timeout=5) for _ in range(4)} == {exon.Cookie(i) for i in range(4)}
    push.send(b"plain", timeout=5)
    assert pull.receive(timeout=5).payload == b"plain"  # allowed again (the native door too)


# ==== links closing, the socket closing =====================================================


def test_link_lost_with_held_messages_then_confirm_is_ignored(make_node) -> None:
    settings = LinkSettings(unlink_timeout=0.3)
    a, b = make_node(settings=settings), make_node(settings=settings)
    pull = b.socket("pull", tag=1, credits=16)
    push = a.socket("push")
    peer = f"{b.address}/1"
    push.link(peer, timeout=5)
    pull.wait_for_links(1, timeout=5)
    for i in range(3):
        push.send(b"old%d" % i, cookie=("old", i), timeout=5)
    old = _hold_exactly(pull, 3)
    # the PUSH unlinks; the held messages cannot drain: its unlink timeout drops the link
    push.unlink(peer, timeout=5)
    lost = {push.receive(timeout=5) for _ in range(3)}
    assert lost == {exon.CookieLost(("old", i)) for i in range(3)}
    # a new link incarnation with messages received but not taken: the stale confirm
    # must not count them
    push.link(peer, timeout=5)
    for i in range(2):
        push.send(b"new%d" % i, cookie=("new", i), timeout=5)
    _wait_queued(pull, 2)
    for batch in old:
        pull.confirm(batch)  # no error: those links are gone
    _no_item(push)
    new = pull.receive_held(timeout=5)
    assert [m.payload for m in new] == [b"new0", b"new1"]
    pull.confirm(new)
    assert {push.receive(timeout=5) for _ in range(2)} == {exon.Cookie(("new", i))
                                                           for i in range(2)}


def test_a_push_unlinking_waits_for_the_confirm_and_gets_its_cookies(make_node) -> None:
    """The link detaches from the native table while unlinking: confirm counts through the
    core then, and the unlink completes cleanly."""
    _a, _b, push, pull = linked_push_pull(make_node, credits=16)
    for i in range(5):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    batches = _hold_exactly(pull, 5)
    confirmer = threading.Timer(0.3, lambda: [pull.confirm(bt) for bt in batches])
    confirmer.start()
    started = time.monotonic()
    push.close(timeout=5)
    assert 0.2 < time.monotonic() - started < 4  # waited for the confirm, not the timeout
    confirmer.join(5)
    assert pull.peers == []


def test_close_with_a_held_batch_does_not_wait_and_loses_its_cookies(make_node) -> None:
    b, pull, p1, p2 = _two_pushes(make_node, credits=16)
    p2.send(b"taken", cookie="p2", timeout=5)
    assert [m.payload for m in pull.receive_many(timeout=5)] == [b"taken"]
    assert p2.receive(timeout=5) == exon.Cookie("p2")
    p1.send(b"held", cookie="p1", timeout=5)
    batch = pull.receive_held(timeout=5)
    assert [m.payload for m in batch] == [b"held"]
    started = time.monotonic()
    pull.close(timeout=5)
    assert time.monotonic() - started < 1.5
    # the link with the held message was dropped: its sender hears of it at once
    # (well before the 5 s unlink timeout)
    assert p1.receive(timeout=2) == exon.CookieLost("p1")
    assert time.monotonic() - started < 2.5
    pull.confirm(batch)  # a no-op now
    with pytest.raises(exon.ClosedError):
        pull.receive_held(timeout=0.1)
    # the other link closed gracefully (no error on the PUSH's side)
    end = time.monotonic() + 5
    while p2.peers and time.monotonic() < end:
        time.sleep(0.01)
    assert p2.peers == []
    peer = p2._peer_id(f"{b.address}/1")
    assert peer not in p2._broken
    assert peer in p1._broken


def test_reject_drops_the_batch_links_and_the_socket_goes_on(make_node) -> None:
    """A batch that could not be kept safe is rejected: its link is dropped at once (its
    sender gets CookieLost, not a cookie), a later batch confirms, and the other link and
    the socket go on."""
    b, pull, p1, p2 = _two_pushes(make_node, credits=16)
    p1.send(b"unsafe", cookie="p1", timeout=5)
    rejected = pull.receive_held(timeout=5)
    assert [m.payload for m in rejected] == [b"unsafe"]
    p2.send(b"safe", cookie="p2", timeout=5)
    later = pull.receive_held(timeout=5)
    assert [m.payload for m in later] == [b"safe"]
    started = time.monotonic()
    pull.reject(rejected)
    assert p1.receive(timeout=2) == exon.CookieLost("p1")
    assert time.monotonic() - started < 2.5  # well before any unlink timeout
    pull.confirm(later)  # no longer held back by the rejected batch
    assert p2.receive(timeout=5) == exon.Cookie("p2")
    pull.reject(rejected)  # settled: a no-op
    pull.confirm(rejected)  # so is this
    assert [p.tag for p in pull.peers] == [p2.tag]  # the other link went on
    # the dropped sender may link again and is received as before
    p1.link(f"{b.address}/1", timeout=5)
    p1.send(b"again", cookie="p1b", timeout=5)
    again = pull.receive_held(timeout=5)
    assert [m.payload for m in again] == [b"again"]
    pull.confirm(again)
    assert p1.receive(timeout=5) == exon.Cookie("p1b")


def test_reject_refuses_a_batch_of_another_socket(make_node) -> None:
    _a, _b, push, pull = linked_push_pull(make_node, credits=64)
    other = _b.socket("pull", tag=9)
    push.send(b"m", timeout=5)
    batch = pull.receive_held(timeout=5)
    with pytest.raises(exon.StateError, match="not taken by this socket"):
        other.reject(batch)
    pull.confirm(batch)


def test_close_wakes_a_receive_held_waiting_in_another_thread(make_node) -> None:
    _a, _b, _push, pull = linked_push_pull(make_node, credits=8)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            pull.receive_held(timeout=10)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.1)
    started = time.monotonic()
    pull.close(timeout=5)
    t.join(5)
    assert not t.is_alive()
    assert time.monotonic() - started < 2
    assert len(errors) == 1
    assert isinstance(errors[0], exon.ClosedError)


def test_timeout_when_nothing_arrives(make_node) -> None:
    _a, _b, _push, pull = linked_push_pull(make_node, credits=8)
    for call in (pull.receive_many, pull.receive_held):
        started = time.monotonic()
        with pytest.raises(exon.Timeout):
            call(timeout=0.2)
        assert 0.15 < time.monotonic() - started < 2


def test_closed_socket_raises_closed(make_node) -> None:
    _a, _b, _push, pull = linked_push_pull(make_node, credits=8)
    pull.close(timeout=5)
    for call in (pull.receive_many, pull.receive_held):
        with pytest.raises(exon.ClosedError):
            call(timeout=0.1)


def test_link_broken_with_held_messages(make_node) -> None:
    """A link breaks (here: the PULL closes it on a credit violation, ERROR to the PUSH)
    while messages are held: the PUSH gets CookieLost, confirm() ignores them, and a
    receive_held() waiting meanwhile raises BrokenLink."""
    a, b, push, pull = linked_push_pull(make_node, credits=2)
    for i in range(2):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    held = _hold_exactly(pull, 2)
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            pull.receive_held(timeout=10)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.1)
    pub = a._transport.publications[b.address]
    with a._lock:  # a DATA beyond the credit, written straight onto the log
        assert pub.offer(encode_data(push.tag, 1, _token(a, push).incarnation, b"x")) > 0
    t.join(10)
    assert not t.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], exon.BrokenLink)
    assert {push.receive(timeout=5) for _ in range(2)} == {exon.CookieLost(i) for i in range(2)}
    for batch in held:
        pull.confirm(batch)  # no error: the link is gone
    assert pull.peers == []


# ==== over UDP ==============================================================================

SMALL = {
    "ipc_term_buffer_length": 1024 * 1024,
    "term_buffer_length": 1024 * 1024,
    "image_liveness_timeout_ns": 1_000_000_000,
}


@pytest.mark.net
def test_held_batches_over_udp() -> None:
    nodes = [exon.Node("127.0.0.1:0", driver_options=SMALL) for _ in range(2)]
    try:
        a, b = nodes
        assert a.udp_enabled
        assert b.udp_enabled
        pull = b.socket("pull", tag=1, credits=32)
        push = a.socket("push")
        push.link(f"{b.address}/1", timeout=10)
        pull.wait_for_links(1, timeout=10)
        n = 400

        def produce() -> None:
            for i in range(n):
                push.send(b"m%d" % i, cookie=i if i % 50 == 0 else None, timeout=10)

        t = threading.Thread(target=produce)
        t.start()
        got: list[bytes] = []
        end = time.monotonic() + 30
        while len(got) < n and time.monotonic() < end:
            batch = pull.receive_held(16, timeout=10)
            got += [m.payload for m in batch]
            pull.confirm(batch)
        t.join(10)
        assert got == [b"m%d" % i for i in range(n)]
        cookies = {push.receive(timeout=5) for _ in range(n // 50)}
        assert cookies == {exon.Cookie(i) for i in range(0, n, 50)}
        # and a held one stays pending until confirmed, over UDP too
        push.send(b"last", cookie="last", timeout=5)
        batch = pull.receive_held(timeout=5)
        _no_item(push, 0.3)
        pull.confirm(batch)
        assert push.receive(timeout=5) == exon.Cookie("last")
    finally:
        for node in reversed(nodes):
            node.close(timeout=2.0)
