"""Unreachable peer nodes cost the other sockets of a node nothing (issue #13).

Connecting to a peer node (creating the publication, waiting for the peer's driver to
answer) used to block the thread that polls for the whole node for up to 1 s per address,
so one dead reply address froze every other socket of the node. These tests reproduce both
attacks: a socket linking to a dead address, and a peer whose HELLO names a dead reply
address and then sends frames that the node must answer there.
"""

from __future__ import annotations

import threading
import time

import pytest

import exon
from exon.core.frames import encode_data, encode_unlink
from exon.middleware.node_transport import encode_hello, free_port
from exon.transport.aeron import Aeron

pytestmark = pytest.mark.net  # the dead addresses are UDP endpoints on loopback

#: how long a peer node's driver has to answer in these tests: a node that waited for that
#: in its polling thread (the bug) would stall every round trip for this long per address
CONNECT_TIMEOUT = 3.0
#: bound on the slowest round trip while the attacks run: generous (a round trip here
#: takes well under 10 ms, but a shared CI machine may be very loaded) and half of the
#: CONNECT_TIMEOUT a round trip took with the bug
MAX_ROUND_TRIP = 1.5


@pytest.fixture
def long_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    import exon.middleware.node_connections

    monkeypatch.setattr(exon.middleware.node_connections, "CONNECT_TIMEOUT", CONNECT_TIMEOUT)


def _dead_address() -> str:
    return f"127.0.0.1:{free_port('127.0.0.1')}"  # free: nothing answers there


def _round_trips(req: exon.Socket, rep: exon.Socket, seconds: float) -> list[float]:
    """Round trips for ``seconds`` (count-bounded too); each one's duration."""
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                rep.send(rep.receive(timeout=0.2).payload, timeout=2)
            except exon.Timeout:
                continue

    server = threading.Thread(target=serve)
    server.start()
    took: list[float] = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end and len(took) < 20_000:
            start = time.monotonic()
            req.send(b"ping", timeout=5)
            assert req.receive(timeout=5).payload == b"ping"
            took.append(time.monotonic() - start)
    finally:
        stop.set()
        server.join(5)
    return took


@pytest.mark.usefixtures("long_connect_timeout")
def test_linking_to_dead_addresses_does_not_stall_the_node(make_node) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req")
    req.link(f"{a.address}/1", timeout=5)
    # two sockets of node a link to dead addresses, again and again, while b's REQ and
    # a's REP do round trips
    outcomes: list[BaseException] = []

    def link_dead() -> None:
        push = a.socket("push")
        for _ in range(3):
            try:
                push.link(f"{_dead_address()}/1", timeout=0.6)
            except exon.ExonError as exc:
                outcomes.append(exc)

    linkers = [threading.Thread(target=link_dead) for _ in range(2)]
    for t in linkers:
        t.start()
    took = _round_trips(req, rep, 2.0)
    for t in linkers:
        t.join(10)
    assert len(outcomes) == 6
    assert all(isinstance(exc, exon.Timeout) for exc in outcomes), outcomes
    assert len(took) > 20
    assert max(took) < MAX_ROUND_TRIP, f"slowest round trip {max(took):.3f}s"


@pytest.mark.usefixtures("long_connect_timeout")
def test_a_peer_with_a_dead_reply_address_does_not_stall_the_node(make_node, driver) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req")
    req.link(f"{a.address}/1", timeout=5)
    # the attacker: its own publication to node a, a HELLO naming a dead reply address,
    # then frames node a must answer (ERROR SOCKET_NOT_FOUND / NOT_LINKED) at that address
    stop = threading.Event()
    sent = [0]
    with Aeron.connect(driver.dir) as aeron:
        pub = aeron.add_exclusive_publication("aeron:ipc", a._transport.stream_id)
        deadline = time.monotonic() + 5
        while not pub.is_connected and time.monotonic() < deadline:
            time.sleep(0.001)

        # one image (session) per claimed address, each opened with its HELLO
        claims = []
        for address in [_dead_address() for _ in range(4)]:
            p = aeron.add_exclusive_publication("aeron:ipc", a._transport.stream_id)
            while p.offer(encode_hello(address)) < 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            claims.append(p)

        def attack() -> None:
            while not stop.is_set():
                for p in claims:
                    p.offer(encode_data(7, 999, 1, b"x"))  # no socket 999: answered
                    p.offer(encode_unlink(7, 1, 1, 0))  # socket 1, not linked: answered
                    sent[0] += 2
                    stop.wait(0.05)

        attacker = threading.Thread(target=attack)
        attacker.start()
        try:
            took = _round_trips(req, rep, 2.0)
        finally:
            stop.set()
            attacker.join(10)
        for p in [pub, *claims]:
            p.close()
    assert sent[0] >= 8
    assert len(took) > 20
    assert max(took) < MAX_ROUND_TRIP, f"slowest round trip {max(took):.3f}s"
    # the answers to the dead addresses are dropped and counted once their connect gives up
    deadline = time.monotonic() + CONNECT_TIMEOUT + 5
    while a.frames_dropped == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert a.frames_dropped > 0


def test_linking_to_a_dead_address_still_fails_typed(make_node) -> None:
    node = make_node()
    push = node.socket("push")
    dead = _dead_address()
    start = time.monotonic()
    with pytest.raises(exon.Timeout):
        push.link(f"{dead}/1", timeout=1.5)
    assert time.monotonic() - start < 5
    with pytest.raises(exon.Timeout):
        push.send(b"nobody", timeout=0.1)  # no link: nothing was silently accepted
    assert node.connects_failed >= 1
    assert node.frames_dropped >= 1  # the LINKs that could not go out: counted


def test_connect_backoff_doubles_caps_forgets_and_stays_bounded() -> None:
    from exon.middleware.node_transport import ConnectBackoff

    backoff = ConnectBackoff(initial=0.25, maximum=1.0, limit=3)
    assert not backoff.blocked("x", 0.0)
    assert [backoff.failed("x", t) for t in (0.0, 1.0, 2.0, 3.0)] == [0.25, 0.5, 1.0, 1.0]
    assert backoff.blocked("x", 3.5)
    assert not backoff.blocked("x", 4.0)
    backoff.succeeded("x")
    assert backoff.failed("x", 10.0) == 0.25  # forgotten after a success
    for i in range(10):  # a flood of made-up addresses
        backoff.failed(f"a{i}", 10.0)
    assert len(backoff) <= 3
    assert backoff.blocked("a9", 10.1)
