"""PUB/SUB over real nodes sharing one media driver (IPC): ZeroMQ-style behaviour, filtering
at the publisher, the "block" and "drop" policies for a slow subscriber, bad input."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

import exon
from exon.core import PeerId
from tests.sockets.helpers import assert_refused_as_incompatible, send_nowait_while_received


def _pub_sub(make_node, *prefixes: bytes, overflow: str = "block", credits: int | None = None):
    a, b = make_node(), make_node()
    pub = a.socket("pub", tag=1, overflow=overflow)
    sub = b.socket("sub", **({} if credits is None else {"credits": credits}))
    for p in prefixes:
        sub.subscribe(p)
    sub.link(f"{a.address}/1", timeout=5)
    return a, b, pub, sub


def _drain(sub, count: int, timeout: float = 10.0) -> list:
    return [sub.receive(timeout=timeout) for _ in range(count)]


def test_prefix_filter_applies_at_the_publisher(make_node) -> None:
    a, _b, pub, sub = _pub_sub(make_node, b"a")
    for m in (b"apple", b"banana", b"avocado", b"", b"b"):
        pub.send(m, timeout=5)
    got = _drain(sub, 2)
    assert [m.payload for m in got] == [b"apple", b"avocado"]
    assert all(m.peer == exon.Peer.parse(f"{a.address}/1") for m in got)
    with pytest.raises(exon.Timeout):
        sub.receive(timeout=0.1)
    stats = pub.statistics()
    assert stats.published == 5
    assert stats.sent == 2  # the three others never left the publisher
    assert stats.dropped == 0
    assert sub.filtered == 0


def test_fan_out_to_several_subscribers(make_node) -> None:
    a = make_node()
    pub = a.socket("pub", tag=1)
    subs = []
    for prefix in (b"", b"x", b"y", b"x"):
        sub = make_node().socket("sub")
        sub.subscribe(prefix)
        sub.link(f"{a.address}/1", timeout=5)
        subs.append(sub)
    pub.wait_for_links(4, timeout=5)
    messages = [b"x1", b"y1", b"z1", b"x2"]
    for m in messages:
        pub.send(m, timeout=5)
    assert [m.payload for m in _drain(subs[0], 4)] == messages
    assert [m.payload for m in _drain(subs[1], 2)] == [b"x1", b"x2"]
    assert [m.payload for m in _drain(subs[2], 1)] == [b"y1"]
    assert [m.payload for m in _drain(subs[3], 2)] == [b"x1", b"x2"]
    assert pub.statistics().sent == 9
    assert pub.statistics().subscribers == 4


def test_subscribe_after_link_and_unsubscribe(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node)
    pub.send(b"nobody wants this", timeout=5)
    sub.subscribe(b"t")  # returns once the PUB applied it
    pub.send(b"topic", timeout=5)
    assert sub.receive(timeout=5).payload == b"topic"
    sub.subscribe(b"t")  # counted: two subscribes need two unsubscribes
    sub.unsubscribe(b"t")
    pub.send(b"still", timeout=5)
    pub.send(b"ti", timeout=5)
    assert sub.receive(timeout=5).payload == b"ti"
    sub.unsubscribe(b"t")
    assert sub.subscriptions == []
    pub.send(b"gone", timeout=5)
    with pytest.raises(exon.Timeout):
        sub.receive(timeout=0.1)
    assert pub.statistics().sent == 2
    with pytest.raises(exon.StateError, match="not subscribed"):
        sub.unsubscribe(b"t")


def test_a_new_pub_learns_the_prefixes(make_node) -> None:
    a, b = make_node(), make_node()
    pubs = [a.socket("pub", tag=1), b.socket("pub", tag=2)]
    sub = make_node().socket("sub")
    sub.subscribe(b"k")
    sub.subscribe(b"")
    sub.link(f"{a.address}/1", timeout=5)
    sub.link(f"{b.address}/2", timeout=5)
    sub.unsubscribe(b"")  # applied by both PUBs before it returns
    for pub in pubs:
        pub.send(b"k-%d" % pub.tag, timeout=5)
        pub.send(b"other", timeout=5)
    got = sorted(m.payload for m in _drain(sub, 2))
    assert got == [b"k-1", b"k-2"]
    with pytest.raises(exon.Timeout):
        sub.receive(timeout=0.1)


def test_subscriber_leaving_is_forgotten(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"")
    pub.send(b"one", timeout=5)
    assert sub.receive(timeout=5).payload == b"one"
    sub.close()
    deadline = time.monotonic() + 5
    while pub.statistics().subscribers and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pub.statistics().subscribers == 0
    pub.send(b"to nobody", timeout=1)  # goes nowhere, does not block
    assert pub.statistics().sent == 1


def test_slow_subscriber_under_block_loses_nothing(make_node) -> None:
    a = make_node()
    pub = a.socket("pub", tag=1)  # overflow="block" is the default
    slow, fast = make_node().socket("sub", credits=4), make_node().socket("sub", credits=4)
    for sub in (slow, fast):
        sub.subscribe(b"")
        sub.link(f"{a.address}/1", timeout=5)
    total = 300
    failures: list[BaseException] = []

    def publish() -> None:
        try:
            for i in range(total):
                pub.send(b"%d" % i, timeout=20)
        except BaseException as exc:
            failures.append(exc)

    got_fast: list[bytes] = []

    def read_fast() -> None:
        try:
            got_fast.extend(m.payload for m in _drain(fast, total, 20))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=publish), threading.Thread(target=read_fast)]
    for t in threads:
        t.start()
    got_slow = []
    for i in range(total):
        if i % 50 == 0:
            time.sleep(0.05)  # the slow one: the publisher waits for it
        got_slow.append(slow.receive(timeout=20).payload)
    for t in threads:
        t.join(timeout=30)
    assert not failures
    expected = [b"%d" % i for i in range(total)]
    assert got_slow == expected
    assert got_fast == expected
    stats = pub.statistics()
    assert stats.dropped == 0
    assert stats.sent == 2 * total


def test_block_send_nowait_and_timeout_send_to_none(make_node) -> None:
    a = make_node()
    pub = a.socket("pub", tag=1)
    stuck, other = make_node().socket("sub", credits=2), make_node().socket("sub")
    for sub in (stuck, other):
        sub.subscribe(b"")
        sub.link(f"{a.address}/1", timeout=5)
    pub.send(b"1", timeout=5)
    pub.send(b"2", timeout=5)  # `stuck` is out of credit now
    with pytest.raises(exon.BackPressured):
        pub.send_nowait(b"3")
    with pytest.raises(exon.Timeout):
        pub.send(b"3", timeout=0.2)
    assert [m.payload for m in _drain(other, 2)] == [b"1", b"2"]
    with pytest.raises(exon.Timeout):
        other.receive(timeout=0.1)  # the timed-out message went to no one
    assert [m.payload for m in _drain(stuck, 2)] == [b"1", b"2"]
    pub.send(b"3", timeout=5)  # credit came back
    assert stuck.receive(timeout=5).payload == b"3"
    assert other.receive(timeout=5).payload == b"3"


def test_block_send_nowait_in_a_loop_gets_credit_back(make_node) -> None:
    # as for PUSH: a publisher that only calls send_nowait must see the credit its
    # subscriber gives back (the FLOWs wait on its node's transport)
    _a, _b, pub, sub = _pub_sub(make_node, b"", credits=4)
    sent, got = send_nowait_while_received(pub, sub, 40)
    assert sent == 40
    assert got == [b"m%d" % i for i in range(40)]


def test_a_departing_subscriber_does_not_hold_a_blocked_publisher(make_node) -> None:
    a = make_node()
    pub = a.socket("pub", tag=1)
    stuck, good = make_node().socket("sub", credits=1), make_node().socket("sub")
    for sub in (stuck, good):
        sub.subscribe(b"")
        sub.link(f"{a.address}/1", timeout=5)
    pub.send(b"1", timeout=5)  # `stuck` never reads: no credit from now on
    failures: list[BaseException] = []

    def publish() -> None:
        try:
            pub.send(b"2", timeout=3)
        except BaseException as exc:
            failures.append(exc)

    sender = threading.Thread(target=publish)
    sender.start()
    assert good.receive(timeout=5).payload == b"1"
    with pytest.raises(exon.Timeout):
        good.receive(timeout=0.3)  # "2" waits for `stuck` (policy "block")
    # `stuck` leaves with "1" never taken: its close drops that link at once, and the PUB
    # waits for it no more
    started = time.monotonic()
    stuck.close(timeout=10)
    assert time.monotonic() - started < 2
    sender.join(timeout=10)
    assert not sender.is_alive()
    assert not failures
    assert good.receive(timeout=5).payload == b"2"
    with pytest.raises(exon.ClosedError):
        stuck.receive(timeout=0.1)


def _replay(items: list) -> tuple[int, int, int]:
    """Check a SUB's stream of "i" messages and Dropped notices against the sequence sent:
    every notice sits exactly at its gap. (messages, dropped, position reached)."""
    position = messages = dropped = 0
    for item in items:
        if isinstance(item, exon.Dropped):
            assert item.count > 0
            position += item.count
            dropped += item.count
        else:
            assert int(item.payload) == position
            position += 1
            messages += 1
    return messages, dropped, position


def test_slow_subscriber_under_drop_counts_every_gap(make_node) -> None:
    a = make_node()
    pub = a.socket("pub", tag=1, overflow="drop")
    slow, fast = make_node().socket("sub", credits=8), make_node().socket("sub")
    for sub in (slow, fast):
        sub.subscribe(b"")
        sub.link(f"{a.address}/1", timeout=5)
    total = 500
    items: list = []
    for i in range(total):
        pub.send(b"%d" % i, timeout=0)  # never waits under "drop"
        if i % 100 == 99:  # the slow subscriber reads a little now and then
            while True:
                try:
                    items.append(slow.receive_nowait())
                except exon.Timeout:
                    break
    # the last gap's notice waits for credit: read (credit flows back), then flush
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            items.append(slow.receive(timeout=0.2))
        except exon.Timeout:
            if not any(s.pending for s in pub._subs.values()):
                break
            with contextlib.suppress(exon.Timeout):
                pub.flush(timeout=0.5)
    messages, dropped, position = _replay(items)
    assert position == total  # delivered + counted drops == sent
    assert dropped > 0
    assert messages + dropped == total
    stats = pub.statistics()
    slow_peer = exon.Peer.parse(f"{slow.node.address}/{slow.tag}")
    assert stats.dropped_by_peer == {slow_peer: dropped}
    assert stats.dropped == dropped
    # the fast subscriber lost nothing meanwhile
    assert [m.payload for m in _drain(fast, total)] == [b"%d" % i for i in range(total)]


def test_drop_notice_comes_before_the_next_message(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"", overflow="drop", credits=2)
    for i in range(5):  # 0 and 1 go, 2..4 are dropped
        pub.send(b"%d" % i)
    assert [m.payload for m in _drain(sub, 2)] == [b"0", b"1"]
    # credit comes back (one FLOW for the two): the notice goes before message 5
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and pub._credit(*next(iter(pub._subs.items()))) < 2:
        time.sleep(0.01)
    pub.send(b"5")
    assert sub.receive(timeout=5) == exon.Dropped(3, exon.Peer.parse(f"{_a.address}/1"))
    assert sub.receive(timeout=5).payload == b"5"
    assert pub.statistics().dropped == 3


def test_close_flushes_pending_drop_notices(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"", overflow="drop", credits=2)
    for i in range(6):
        pub.send(b"%d" % i)
    closer = threading.Thread(target=pub.close, kwargs={"timeout": 10})
    closer.start()
    items = []
    while True:
        try:
            items.append(sub.receive(timeout=5))
        except (exon.Timeout, exon.BrokenLink):
            break
        if sum(i.count if isinstance(i, exon.Dropped) else 1 for i in items) >= 6:
            break
    closer.join(timeout=15)
    assert _replay(items) == (2, 4, 6)


# ---- bad input -------------------------------------------------------------------------------


def test_bad_calls_raise_typed_errors(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"")
    with pytest.raises(exon.StateError):
        pub.subscribe(b"x")
    with pytest.raises(exon.StateError):
        pub.unsubscribe(b"x")
    with pytest.raises(exon.StateError):
        pub.receive(timeout=0.1)
    with pytest.raises(exon.StateError):
        pub.receive_nowait()
    with pytest.raises(exon.StateError):
        sub.send(b"x")
    with pytest.raises(exon.StateError):
        sub.send_nowait(b"x")
    with pytest.raises(exon.ConfigurationError, match="cookie"):
        pub.send(b"x", cookie=1)
    with pytest.raises(exon.ConfigurationError):
        sub.subscribe("text")  # type: ignore[arg-type]
    with pytest.raises(exon.ConfigurationError):
        sub.subscribe(bytes(5000))
    with pytest.raises(exon.ConfigurationError, match="overflow"):
        make_node().socket("pub", overflow="sometimes")


@pytest.mark.parametrize(("left", "right"), [
    ("pub", "pull"), ("pull", "pub"), ("push", "sub"), ("sub", "push"), ("pub", "pub"),
    ("sub", "sub"), ("req", "pub"), ("sub", "rep"), ("dealer", "pub"), ("sub", "router"),
])
def test_incompatible_pairs_are_refused_permanently(make_node, left: str, right: str) -> None:
    assert_refused_as_incompatible(make_node, left, right)


def test_malformed_payloads_are_counted(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"")
    pid = PeerId(pub.node.address, pub.tag)
    with sub._lock:  # a broken SUB: a subscription payload of an unknown kind
        sub._core.send(sub.tag, b"\x09junk", destination=pid, now=time.monotonic())
        sub.node._pump_locked()
    deadline = time.monotonic() + 5
    while pub.statistics().malformed_dropped == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pub.statistics().malformed_dropped == 1
    spid = next(iter(pub._subs))
    with pub._lock:  # a broken PUB: a payload of an unknown kind
        pub._emit(spid, pub._subs[spid], b"\x07junk")
        pub.node._flush_fast()
    pub.send(b"fine", timeout=5)
    assert sub.receive(timeout=5).payload == b"fine"
    assert sub.malformed_dropped == 1


def test_pubsub_names_exported() -> None:
    from exon.sockets import Dropped, PubSocket, PubStatistics, SubSocket

    assert exon.PubSocket is PubSocket
    assert exon.SubSocket is SubSocket
    assert exon.Dropped is Dropped
    assert exon.PubStatistics is PubStatistics
    assert (PubSocket.type, SubSocket.type) == ("pub", "sub")


# ---- the native doors (exon_fast_pubsub.c): shortcuts that never change what happens ----


def _native(sock, method: str) -> bool:
    return type(getattr(sock, method)).__module__ == "exon.native._fast"


def test_the_pub_door_publishes_with_each_subscribers_prefixes(make_node) -> None:
    a = make_node()
    pub = a.socket("pub", tag=1)
    subs = []
    for prefix in (b"", b"x", b"y"):
        sub = make_node().socket("sub")
        sub.subscribe(prefix)
        sub.link(f"{a.address}/1", timeout=5)
        subs.append(sub)
    pub.wait_for_links(3, timeout=5)
    assert _native(pub, "send")
    messages = [b"x%d" % i for i in range(50)] + [b"y%d" % i for i in range(50)]
    for m in messages:
        pub.send(m, timeout=5)
    assert pub._door.published > 0  # the door took over once it knew every subscriber
    assert [m.payload for m in _drain(subs[0], 100)] == messages
    assert [m.payload for m in _drain(subs[1], 50)] == messages[:50]
    assert [m.payload for m in _drain(subs[2], 50)] == messages[50:]
    for sub in subs:
        with pytest.raises(exon.Timeout):
            sub.receive(timeout=0.05)
    stats = pub.statistics()
    assert (stats.published, stats.sent) == (100, 200)


def test_the_pub_door_steps_aside_for_a_subscriber_without_credit(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"", credits=4)
    for i in range(4):
        pub.send(b"m%d" % i, timeout=5)
    with pytest.raises(exon.BackPressured):
        pub.send_nowait(b"late")
    with pytest.raises(exon.Timeout):  # "block": the door hands it to the Python wait
        pub.send(b"late", timeout=0.1)
    assert [m.payload for m in _drain(sub, 4)] == [b"m0", b"m1", b"m2", b"m3"]
    pub.send(b"after", timeout=5)
    assert sub.receive(timeout=5).payload == b"after"
    assert pub.statistics().published == 5  # the two refused sends published nothing


def test_the_pub_door_follows_subscription_changes(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"a")
    for _ in range(3):
        pub.send(b"a1", timeout=5)
        pub.send(b"b1", timeout=5)
    assert [m.payload for m in _drain(sub, 3)] == [b"a1", b"a1", b"a1"]
    sub.subscribe(b"b")
    pub.send(b"b2", timeout=5)
    sub.unsubscribe(b"a")
    pub.send(b"a2", timeout=5)
    pub.send(b"b3", timeout=5)
    assert [m.payload for m in _drain(sub, 2)] == [b"b2", b"b3"]
    with pytest.raises(exon.Timeout):
        sub.receive(timeout=0.05)


def test_a_closed_pub_door_raises(make_node) -> None:
    _a, _b, pub, _sub = _pub_sub(make_node, b"")
    pub.send(b"one", timeout=5)
    pub.close()
    with pytest.raises(exon.ClosedError):
        pub.send(b"two", timeout=5)


def test_the_sub_door_hands_out_messages_and_leaves_notices_to_python(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"", overflow="drop", credits=2)
    assert _native(sub, "receive")
    for i in range(5):  # two go, three are dropped for the full subscriber
        pub.send(b"m%d" % i, timeout=5)
    got = _drain(sub, 2)
    assert [m.payload for m in got] == [b"m0", b"m1"]
    assert all(type(m) is exon.Message for m in got)
    pub.flush(timeout=5)  # the notice, once the SUB's credit is back
    notice = sub.receive(timeout=5)
    assert isinstance(notice, exon.Dropped)
    assert notice.count == 3


def test_a_sub_that_stops_taking_all_filters_what_was_queued(make_node) -> None:
    _a, _b, pub, sub = _pub_sub(make_node, b"", b"k")
    pub.send(b"zz", timeout=5)
    pub.send(b"kk", timeout=5)
    deadline = time.monotonic() + 5
    while len(sub._inbox.nq) < 2 and time.monotonic() < deadline:  # both queued natively
        time.sleep(0.01)  # the node's dispatcher polls them in
    assert len(sub._inbox.nq) == 2
    sub.unsubscribe(b"")  # "zz" was in flight: the door must not hand it out
    assert sub._inbox.nq.pass_all == 0
    assert sub.receive(timeout=5).payload == b"kk"
    assert sub.filtered == 1
