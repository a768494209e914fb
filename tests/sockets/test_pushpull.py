"""PUSH/PULL over real nodes sharing one media driver (IPC)."""

from __future__ import annotations

import threading
import time

import pytest

import exon
from tests.sockets.helpers import send_as_the_peer_goes, send_nowait_while_received


def test_push_round_robin_over_n_pulls(make_node) -> None:
    a, b = make_node(), make_node()
    pulls = [b.socket("pull", tag=20 + i) for i in range(3)]
    push = a.socket("push")
    for i in range(3):
        push.link(f"{b.address}/{20 + i}")
    for n in range(6):
        push.send(b"%d" % n, timeout=5)
    got = [[int(p.receive(timeout=5).payload) for _ in range(2)] for p in pulls]
    for first, second in got:
        assert second == first + 3
    assert sorted(g[0] for g in got) == [0, 1, 2]
    for p in pulls:
        with pytest.raises(exon.Timeout):
            p.receive(timeout=0.05)


def test_pull_fair_queues_pushers(make_node) -> None:
    a = make_node()
    pull = a.socket("pull", tag=1)
    pushes = [make_node().socket("push") for _ in range(3)]
    for p in pushes:
        p.link(f"{a.address}/1")
    for p in pushes:
        for n in range(2):
            p.send(b"%d" % n)
    deadline = time.monotonic() + 5
    while pull._queued() < 6 and time.monotonic() < deadline:  # let everything arrive first
        time.sleep(0.01)
    got = [pull.receive(timeout=5) for _ in range(6)]
    assert len({m.peer for m in got[:3]}) == 3
    assert [m.payload for m in got[:3]] == [b"0"] * 3
    assert [m.payload for m in got[3:]] == [b"1"] * 3


def test_push_skips_links_without_credit(make_node) -> None:
    a, b = make_node(), make_node()
    slow = b.socket("pull", tag=1, credits=2)
    fast = b.socket("pull", tag=2, credits=64)
    push = a.socket("push")
    push.link(f"{b.address}/1")
    push.link(f"{b.address}/2")
    for n in range(10):
        push.send(b"%d" % n, timeout=5)  # never blocks: the fast PULL has credit
    slow_got = [slow.receive(timeout=5) for _ in range(2)]
    fast_got = [fast.receive(timeout=5) for _ in range(8)]
    assert len(slow_got) == 2
    assert len(fast_got) == 8


def test_send_blocks_without_credit_and_nowait_raises(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=3)
    push = a.socket("push")
    with pytest.raises(exon.Timeout, match="no peer was linked"):
        push.send(b"no peer yet", timeout=0.1)
    push.link(f"{b.address}/1")
    for _ in range(3):
        push.send_nowait(b"x")
    with pytest.raises(exon.BackPressured):
        push.send_nowait(b"y")
    with pytest.raises(exon.Timeout, match="no linked peer had credit"):
        push.send(b"y", timeout=0.1)
    assert pull.receive(timeout=5).payload == b"x"
    push.send(b"z", timeout=5)  # credit came back once the PULL's application took one
    assert [pull.receive(timeout=5).payload for _ in range(3)] == [b"x", b"x", b"z"]
    pull.close()  # unlinks: the timeout says the link is gone, not that credit is short
    deadline = time.monotonic() + 5
    while push.peers and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(exon.Timeout, match="no peer was linked"):
        push.send(b"after", timeout=0.1)


def test_push_cannot_receive_and_pull_cannot_send(make_node) -> None:
    a = make_node()
    push, pull = a.socket("push"), a.socket("pull")
    with pytest.raises(exon.StateError):
        push.receive(timeout=0.1)
    with pytest.raises(exon.StateError):
        pull.send(b"x")


def test_simultaneous_links_make_one_link(make_node) -> None:
    a, b = make_node(), make_node()
    push = a.socket("push", tag=1)
    pull = b.socket("pull", tag=2)
    errors: list[BaseException] = []

    def run(fn) -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    t1 = threading.Thread(target=run, args=(lambda: push.link(f"{b.address}/2", timeout=5),))
    t2 = threading.Thread(target=run, args=(lambda: pull.link(f"{a.address}/1", timeout=5),))
    t1.start()
    t2.start()
    t1.join(10)
    t2.join(10)
    assert not errors
    assert len(push.peers) == 1
    assert len(pull.peers) == 1
    push.send(b"once")
    assert pull.receive(timeout=5).payload == b"once"
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.05)


def test_unlink_loses_nothing(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    push = a.socket("push")
    push.link(f"{b.address}/1")
    for n in range(100):
        push.send(b"%d" % n, timeout=5)
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(push.unlink(f"{b.address}/1", timeout=10)))
    t.start()
    got = [int(pull.receive(timeout=5).payload) for _ in range(100)]
    t.join(10)
    assert got == list(range(100))
    assert done == [None]
    assert push.peers == []


def test_close_delivers_the_tail(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    push = a.socket("push")
    push.link(f"{b.address}/1")
    got: list[bytes] = []

    def consume() -> None:
        for _ in range(300):
            got.append(pull.receive(timeout=10).payload)

    t = threading.Thread(target=consume)
    t.start()
    for n in range(300):
        push.send(b"%d" % n, timeout=10)
    push.close(timeout=10)  # returns once the PULL's application has every message
    assert len(got) == 300
    t.join(10)
    assert got == [b"%d" % n for n in range(300)]


def test_cookies_returned_exactly_once(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    push = a.socket("push", cookie_ratio=4)
    push.link(f"{b.address}/1")
    for n in range(50):
        push.send(b"m", cookie=("c", n), timeout=5)
    for _ in range(50):
        pull.receive(timeout=5)
    cookies = [push.receive(timeout=5) for _ in range(50)]
    assert all(isinstance(c, exon.Cookie) for c in cookies)
    assert sorted(c.value[1] for c in cookies) == list(range(50))
    with pytest.raises(exon.StateError):
        push.receive(timeout=0.2)  # nothing outstanding any more


def test_eight_senders_two_receivers_exactly_once(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    push = a.socket("push")
    push.link(f"{b.address}/1")
    per_thread = 400
    received: list[list[bytes]] = [[], []]
    stop = threading.Event()
    failures: list[BaseException] = []

    def sender(i: int) -> None:
        try:
            for n in range(per_thread):
                push.send(b"%d:%d" % (i, n), timeout=10)
        except BaseException as exc:
            failures.append(exc)

    def receiver(j: int) -> None:
        try:
            while not stop.is_set():
                try:
                    received[j].append(pull.receive(timeout=0.1).payload)
                except exon.Timeout:
                    continue
        except BaseException as exc:
            failures.append(exc)

    receivers = [threading.Thread(target=receiver, args=(j,)) for j in range(2)]
    senders = [threading.Thread(target=sender, args=(i,)) for i in range(8)]
    for t in receivers + senders:
        t.start()
    for t in senders:
        t.join(30)
    deadline = time.monotonic() + 20
    while sum(map(len, received)) < 8 * per_thread and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    for t in receivers:
        t.join(5)
    assert not failures
    everything = received[0] + received[1]
    assert len(everything) == 8 * per_thread
    assert set(everything) == {b"%d:%d" % (i, n) for i in range(8) for n in range(per_thread)}
    # per sender, order is kept within each receiver's share
    for share in received:
        for i in range(8):
            mine = [int(m.split(b":")[1]) for m in share if m.startswith(b"%d:" % i)]
            assert mine == sorted(mine)


def test_default_node(monkeypatch) -> None:
    from exon.middleware.default_node import close_default_node

    close_default_node()
    try:
        pull = exon.Socket(type="pull")
        push = exon.Socket(type="push")
        assert pull.node is push.node is exon.default_node()
        push.link(f"{pull.node.address}/{pull.tag}")
        push.send(b"via the default node")
        assert pull.receive(timeout=5).payload == b"via the default node"
    finally:
        close_default_node()


def test_send_nowait_in_a_loop_gets_credit_back(make_node) -> None:
    # a sender that only ever calls send_nowait (and sleeps when back-pressured) must see
    # the credit the receiver gives back: the FLOWs wait on its node's transport, which
    # nothing else may be polling while the sender keeps the node busy
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=4)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=5)
    sent, got = send_nowait_while_received(push, pull, 40)
    assert sent == 40  # ten times the PULL's window: credit came back again and again
    assert got == [b"m%d" % i for i in range(40)]


def test_a_cookie_whose_link_breaks_inside_the_send_comes_back_lost(make_node,
                                                                    monkeypatch) -> None:
    a, b = make_node(), make_node()
    b.socket("pull", tag=1)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=5)
    send_as_the_peer_goes(a, push, 1, monkeypatch)
    assert push.peers == []


def test_close_with_messages_not_taken_does_not_wait_and_their_cookies_are_lost(
        make_node) -> None:
    """A PULL closed with messages in its inbox never takes them: its close drops their
    link at once (it waited the 5 s unlink timeout for a delivery that could not come), and
    their sender gets CookieLost for each, the taken one's cookie before."""
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=8)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=5)
    for i in range(3):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    assert pull.receive(timeout=5).payload == b"m0"
    deadline = time.monotonic() + 5
    while pull._queued() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    pull.close(timeout=5)
    assert time.monotonic() - started < 1.5
    got = [push.receive(timeout=2.5) for _ in range(3)]
    assert got == [exon.Cookie(0), exon.CookieLost(1), exon.CookieLost(2)]
    assert time.monotonic() - started < 3.5  # well before the unlink timeout
