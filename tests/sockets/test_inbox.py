"""A socket's one inbox (exon.sockets.inbox) with real nodes: peers whose messages come on
the fast path and peers whose messages come through the core share one fair queue, each
message's delivery is counted once whichever way it came, and closing releases what is
queued. The queue's own rules against a reference model: tests/native/test_inbox.py."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

import exon
from exon.core import MessageReceived

N = 20


def _core_path_for(node: exon.Node, monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """Links of ``node`` with the peer node at ``address`` stay on the core's path (as
    when the link table is full): their DATA reaches the sockets as MessageReceived."""
    fast = node._fast
    attach = fast.attach

    def no_table_entry(tag: int, peer: Any, *args: Any, **kwargs: Any) -> Any:
        return None if peer.address == address else attach(tag, peer, *args, **kwargs)

    monkeypatch.setattr(fast, "attach", no_table_entry)


def _wait_queued(sock: Any, count: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while sock._queued() < count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert sock._queued() == count


def _pull_with_mixed_peers(make_node: Any, monkeypatch: pytest.MonkeyPatch,
                           credits: int = 64) -> tuple[exon.Node, Any, list[Any]]:
    """A PULL and three PUSH nodes linked to it; the first one's link is on the core's
    path at the PULL's node, the other two on the fast path."""
    b = make_node()
    senders = [make_node() for _ in range(3)]
    _core_path_for(b, monkeypatch, senders[0].address)
    pull = b.socket("pull", tag=1, credits=credits)
    pushes = [node.socket("push") for node in senders]
    for push in pushes:
        push.link(f"{b.address}/1", timeout=5)
    pull.wait_for_links(3, timeout=5)
    on_fast = {peer.address for (tag, peer) in b._fast.by_link if tag == pull.tag}
    assert on_fast == {senders[1].address, senders[2].address}
    return b, pull, pushes


def test_core_path_and_fast_peers_share_one_fair_queue_and_each_delivery_counts_once(
        make_node: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    b, pull, pushes = _pull_with_mixed_peers(make_node, monkeypatch)
    for i in range(N):
        for k, push in enumerate(pushes):
            push.send(b"%d:%d" % (k, i), cookie=(k, i), timeout=5)
    _wait_queued(pull, 3 * N)  # everything queued before anything is taken
    assert b.statistics().queued_bytes == sum(len(b"%d:%d" % (k, i))
                                              for k in range(3) for i in range(N))
    got = [pull.receive(timeout=5).payload for _ in range(3 * N)]
    sender = [int(p.split(b":")[0]) for p in got]
    for j in range(N):  # round-robin: one of each sender in turn
        assert sorted(sender[3 * j:3 * j + 3]) == [0, 1, 2], sender
    for k in range(3):  # each sender's order
        assert [int(p.split(b":")[1]) for p in got if p.startswith(b"%d:" % k)] == \
            list(range(N))
    assert b.statistics().queued_bytes == 0
    # each delivery counted once: every cookie comes back, once
    for k, push in enumerate(pushes):
        cookies = sorted(push.receive(timeout=5).value for _ in range(N))
        assert cookies == [(k, i) for i in range(N)]
        with pytest.raises(exon.StateError):  # none pending: every cookie came back
            push.receive(timeout=0.2)
    with b._lock:
        links = b._core._sockets[pull.tag].links
        for link in links.values():
            assert link.ledger.received == N
            assert link.ledger.delivered == N


def test_batches_take_core_path_and_fast_messages_from_the_one_queue(
        make_node: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _b, pull, pushes = _pull_with_mixed_peers(make_node, monkeypatch)
    for i in range(4):
        for k, push in enumerate(pushes):
            push.send(b"%d:%d" % (k, i), cookie=(k, i), timeout=5)
    _wait_queued(pull, 12)
    many = [m.payload for m in pull.receive_many(6, timeout=5)]
    held = pull.receive_held(100, timeout=5)
    taken = many + list(held.payloads)
    sender = [int(p.split(b":")[0]) for p in taken]
    assert sorted(sender[:3]) == [0, 1, 2]
    assert sender == sender[:3] * 4  # round-robin across both batches
    for k in range(3):
        assert [p for p in taken if p.startswith(b"%d:" % k)] == [
            b"%d:%d" % (k, i) for i in range(4)]

    def cookies(push: Any) -> list[Any]:
        got = [push.receive(timeout=5).value for _ in range(2)]
        with pytest.raises((exon.Timeout, exon.StateError)):  # no more, for now
            push.receive(timeout=0.2)
        return got

    # receive_many counted its six (two per sender), whichever way they came; the held
    # ones count at confirm, once
    assert [sorted(cookies(push)) for push in pushes] == [[(k, 0), (k, 1)] for k in range(3)]
    pull.confirm(held)
    assert [sorted(cookies(push)) for push in pushes] == [[(k, 2), (k, 3)] for k in range(3)]


def test_closing_a_socket_releases_its_queued_core_path_messages(
        make_node: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    b, pull, pushes = _pull_with_mixed_peers(make_node, monkeypatch)
    for k, push in enumerate(pushes):
        push.send(b"queued-%d" % k, timeout=5)
    _wait_queued(pull, 3)
    peer = next(p for p in pull._inbox.lanes if p.address == pushes[0].node.address)
    payload = b"".join([b"held-by-the-inbox-", b"%d" % id(pull)])  # one object of ours
    with b._lock:
        incarnation = b._core._sockets[pull.tag].links[peer].incarnation
        pull._on_message(MessageReceived(tag=pull.tag, peer=peer, payload=payload,
                                         incarnation=incarnation))
    queued_refs = sys.getrefcount(payload)
    assert pull._queued() == 4
    pull.close(timeout=0.5)
    assert sys.getrefcount(payload) == queued_refs - 1  # the inbox let it go
    assert b.statistics().queued_bytes == 0


def test_a_peers_lane_goes_once_its_link_closed_and_its_messages_were_taken(
        make_node: Any) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    for i in range(12):
        push = a.socket("push")
        push.link(f"{b.address}/1", timeout=5)
        push.send(b"%d" % i, timeout=5)
        assert pull.receive(timeout=5).payload == b"%d" % i
        push.close(timeout=5)
    deadline = time.monotonic() + 5
    while pull._inbox.lanes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pull._inbox.lanes == {}


@pytest.mark.parametrize("take", ["receive", "receive_many", "receive_held"])
def test_a_lane_that_still_held_messages_when_its_link_closed_goes_with_the_last_of_them(
        make_node: Any, take: str) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    steady = a.socket("push")
    steady.link(f"{b.address}/1", timeout=5)
    pull.wait_for_links(1, timeout=5)
    with b._lock:
        before = (len(pull._inbox.lanes), pull._inbox.nq.open_lanes)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=5)
    for i in range(3):
        push.send(b"%d" % i, timeout=5)
    _wait_queued(pull, 3)
    push.close(timeout=0)  # the link closes with its three messages still in the inbox
    deadline = time.monotonic() + 5

    def links() -> int:
        with b._lock:
            return len(b._core.links(pull.tag))

    while links() > 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert links() == 1  # gone at the PULL's end too (LinkClosed handled)
    with b._lock:
        assert (len(pull._inbox.lanes), pull._inbox.nq.open_lanes) == (before[0] + 1, before[1] + 1)
    if take == "receive":
        got = [pull.receive(timeout=5).payload for _ in range(3)]
    elif take == "receive_many":
        got = [m.payload for m in pull.receive_many(10, timeout=5)]
    else:
        held = pull.receive_held(10, timeout=5)
        got = list(held.payloads)
        with b._lock:  # taken, not yet counted: the lane stays until confirm
            assert len(pull._inbox.lanes) == before[0] + 1
        pull.confirm(held)
    assert got == [b"0", b"1", b"2"]
    with b._lock:
        assert (len(pull._inbox.lanes), pull._inbox.nq.open_lanes) == before
