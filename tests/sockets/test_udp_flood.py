"""Issue 13: "400 bytes per second locks out new peers". A raw UDP socket on loopback
floods a node's endpoint with valid SETUPs for made-up sessions (far faster than the ten a
second that used to fill the 64-image table for good). A node linked before the flood keeps
its REQ/REP working, and a new node links and gets its reply within a bounded time."""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

import exon
from exon.middleware.node_transport import UDP_STREAM_ID
from exon.sockets.messages import split_address
from exon.transport.aeron import frames as F
from exon.transport.aeron.counters import SystemCounter
from tests.sockets.helpers import udp_nodes_with

pytestmark = pytest.mark.net

SMALL = {
    "ipc_term_buffer_length": 1024 * 1024,
    "term_buffer_length": 1024 * 1024,
    "image_liveness_timeout_ns": 10_000_000_000,  # the default: flood images would last 10 s
}


class Flood:
    """SETUPs for fresh made-up sessions from ``sources`` sockets, ``rate`` a second each."""

    def __init__(self, target: str, *, sources: int, rate: float) -> None:
        self.target = split_address(target)
        self.socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(sources)]
        for s in self.socks:
            s.bind(("127.0.0.1", 0))
        self.interval = 1.0 / rate
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(13)
        while not self._stop.wait(self.interval):
            for s in self.socks:
                setup = F.encode_setup(term_offset=0, session_id=rng.randrange(1, 2**31),
                                       stream_id=UDP_STREAM_ID, initial_term_id=5,
                                       active_term_id=5, term_length=64 * 1024, mtu=1408)
                s.sendto(setup, self.target)
                self.sent += 1

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.socks:
            s.close()


@pytest.fixture
def udp_nodes():
    yield from udp_nodes_with(SMALL)


def _round_trip(req: exon.Socket, rep: exon.Socket, n: int) -> None:
    req.send(b"q%d" % n, timeout=5)
    m = rep.receive(timeout=5)
    rep.send(m.payload.upper())
    assert req.receive(timeout=5).payload == b"Q%d" % n


def _counter(node: exon.Node, which: SystemCounter) -> int:
    assert node._aeron is not None
    return node._aeron.counter_value(which)


@pytest.mark.parametrize(("sources", "rate"), [(1, 200.0), (40, 10.0)],
                         ids=["one-source-200-per-s", "40-sources-400-per-s"])
def test_a_setup_flood_locks_out_neither_new_nor_linked_peers(udp_nodes, sources, rate) -> None:
    target = udp_nodes()
    rep = target.socket("rep", tag=1)
    old = udp_nodes()
    old_req = old.socket("req")
    old_req.link(f"{target.address}/1", timeout=10)
    _round_trip(old_req, rep, 0)
    with Flood(target.address, sources=sources, rate=rate) as flood:
        # long enough for the flood to have filled the old 64-image table several times
        deadline = time.monotonic() + 5.0
        while flood.sent < 3 * 64 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flood.sent >= 3 * 64
        for n in range(1, 11):  # the established link keeps working during the flood
            _round_trip(old_req, rep, n)
        new = udp_nodes()
        new_req = new.socket("req")
        t0 = time.monotonic()
        new_req.link(f"{target.address}/1", timeout=10)
        _round_trip(new_req, rep, 100)
        took = time.monotonic() - t0
        for n in range(11, 21):
            _round_trip(old_req, rep, n)
    assert took < 10.0
    # the flood did reach the table: it was evicted (counted), not silently absorbed
    assert _counter(target, SystemCounter.IMAGES_EVICTED) > 0
