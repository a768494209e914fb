"""Messages longer than the transport's largest message travel as node-level FRAGMENTs
(docs/protocol.md 2.14): on one link, small and large messages mixed, in order, once,
intact, with their cookies and credits, over IPC (two nodes on one driver) and UDP (two
nodes with their own drivers); terms of 64 KiB (largest message 8 KiB) make it cheap."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import exon
from exon.core.frames import HEADER_LENGTH
from exon.middleware.node_transport import encode_fragments, encode_hello
from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import NodeCounter
from tests.sockets.helpers import DRIVER, launched_driver, udp_nodes_with

TERM = 64 * 1024  #: the shortest term: the largest message is 8 KiB
SMALL_TERMS = {**DRIVER, "ipc_term_buffer_length": TERM}
UDP_SMALL_TERMS = {"ipc_term_buffer_length": TERM, "term_buffer_length": TERM,
                   "image_liveness_timeout_ns": 1_000_000_000}
CREDITS = 8  #: the PULL's window: the tests send many times more


@pytest.fixture
def small_driver() -> Iterator[MediaDriver]:
    with launched_driver("frag", SMALL_TERMS) as d:
        yield d


@pytest.fixture(params=["ipc", "udp"])
def node_pair(request: pytest.FixtureRequest,
              small_driver: MediaDriver) -> Iterator[Callable[[], exon.Node]]:
    """Make nodes: on one driver (IPC between them) or each with its own (UDP)."""
    if request.param == "udp":
        yield from udp_nodes_with(UDP_SMALL_TERMS)
        return
    nodes: list[exon.Node] = []

    def make() -> exon.Node:
        node = exon.Node("127.0.0.1:0", driver_dir=small_driver.dir)
        nodes.append(node)
        return node

    yield make
    for node in reversed(nodes):
        node.close(timeout=2.0)


def sizes(rng: random.Random, count: int, largest: int) -> list[int]:
    """Random sizes, small ones (native fast path) between large ones (> term / 8)."""
    out = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.5:
            out.append(rng.randrange(8, 200))
        elif kind < 0.7:
            out.append(rng.randrange(7_000, 10_000))  # around the limit
        else:
            out.append(rng.randrange(10_000, largest + 1))
    return out


def message(i: int, size: int) -> bytes:
    return i.to_bytes(4, "little") + random.Random(i).randbytes(size - 4)



@contextlib.contextmanager
def sending_in_background(send: Callable[[int, int], None], plan: list[int]) -> Iterator[None]:
    """Call ``send(i, size)`` for each size of ``plan``, in order, from a thread while the
    body receives; on a clean exit the thread has finished, and an error it raised is
    raised here."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            for i, size in enumerate(plan):
                send(i, size)
        except BaseException as exc:  # raised again by the receiving thread
            failure.append(exc)

    sender = threading.Thread(target=run)
    sender.start()
    try:
        yield
    finally:
        sender.join(30)
    if failure:
        raise failure[0]

def test_push_pull_mixed_sizes_arrive_once_in_order_with_cookies(node_pair) -> None:
    a, b = node_pair(), node_pair()
    pull = b.socket("pull", tag=1, credits=CREDITS)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=10)
    assert a._transport.publications[b.address].max_message_length == TERM // 8
    rng = random.Random(7)
    plan = [*sizes(rng, 160, 300_000), 1 << 20]  # the default max_message_size, exactly
    assert max(plan) > TERM // 8
    assert len(plan) > 10 * CREDITS
    cookies = {i for i in range(len(plan)) if i % 3 == 0}

    def send(i: int, size: int) -> None:
        push.send(message(i, size), cookie=i if i in cookies else None, timeout=20)

    with sending_in_background(send, plan):
        for i, size in enumerate(plan):
            got = pull.receive(timeout=20).payload
            assert (len(got), got[:4]) == (size, i.to_bytes(4, "little")), i
            assert got == message(i, size), i
    returned = [push.receive(timeout=10) for _ in cookies]
    assert returned == [exon.Cookie(i) for i in sorted(cookies)]
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.2)  # nothing twice
    # credits came back: another full window goes at once, large and small
    for i in range(CREDITS):
        push.send_nowait(message(1000 + i, 20_000 if i % 2 else 50))
    assert [pull.receive(timeout=10).payload for _ in range(CREDITS)] == [
        message(1000 + i, 20_000 if i % 2 else 50) for i in range(CREDITS)]
    assert a.fragments_dropped == 0
    assert b.fragments_dropped == 0
    assert not a._connections.backlog


def test_req_rep_mixed_sizes_both_ways(node_pair) -> None:
    a, b = node_pair(), node_pair()
    rep = b.socket("rep", tag=1)
    req = a.socket("req")
    req.link(f"{b.address}/1", timeout=10)
    rng = random.Random(11)
    for i, (ask, answer) in enumerate(zip(sizes(rng, 40, 200_000), sizes(rng, 40, 200_000),
                                          strict=True)):
        req.send(message(i, ask), cookie=i, timeout=10)
        got = rep.receive(timeout=10)
        assert got.payload == message(i, ask)
        rep.send(message(i + 500, answer), timeout=10)
        assert req.receive(timeout=10) == exon.Cookie(i)
        assert req.receive(timeout=10).payload == message(i + 500, answer)
    assert a.fragments_dropped == 0
    assert b.fragments_dropped == 0


def test_pub_sub_mixed_sizes_through_the_pub_door_and_around_it(node_pair) -> None:
    """The PUB's native door takes payloads up to 8 KiB; with 64 KiB terms those near
    8 KiB are too large for one message and fall back to Python, and larger ones never
    try: every one arrives, in order, to both subscribers."""
    a, b = node_pair(), node_pair()
    pub = a.socket("pub", tag=1)
    subs = [b.socket("sub", credits=CREDITS) for _ in range(2)]
    for sub in subs:
        sub.subscribe(b"")
        sub.link(f"{a.address}/1", timeout=10)
    rng = random.Random(5)
    plan = [rng.choice([rng.randrange(8, 100), rng.randrange(8_100, 8_193),
                        rng.randrange(8_193, 40_000)]) for _ in range(60)]

    def send(i: int, size: int) -> None:
        pub.send(message(i, size), timeout=20)

    with sending_in_background(send, plan):
        for i, size in enumerate(plan):
            for sub in subs:
                assert sub.receive(timeout=20).payload == message(i, size), i
    assert b.fragments_dropped == 0


def test_above_the_receiving_socket_max_is_still_message_too_large(small_driver) -> None:
    with exon.Node(driver_dir=small_driver.dir) as a, exon.Node(driver_dir=small_driver.dir) as b:
        pull = b.socket("pull", tag=1, max_message_size=100_000)
        push = a.socket("push")
        push.link(f"{b.address}/1", timeout=10)
        with pytest.raises(exon.MessageTooLarge):
            push.send(b"x" * 100_001, timeout=5)
        push.send(b"y" * 100_000, timeout=5)  # at the socket's limit: 13 FRAGMENTs
        assert pull.receive(timeout=5).payload == b"y" * 100_000


def test_a_default_size_message_on_an_embedded_node_ipc_pair() -> None:
    """The case that failed before FRAGMENTs: an embedded driver's IPC terms were 8 MiB,
    so its largest message was 1 MiB, and a 1 MiB message (the default max_message_size)
    plus the 20-byte exon header did not fit. With 2 MiB terms it is cut in five."""
    with exon.Node(driver="embedded") as a, exon.Node(driver_dir=a.driver_dir) as b:
        pull = b.socket("pull", tag=1)
        push = a.socket("push")
        push.link(f"{b.address}/1", timeout=10)
        assert a._transport.channel_for(b.address)[0] == "aeron:ipc"
        assert a._transport.publications[b.address].max_message_length == 256 * 1024
        payload = bytes(range(256)) * 4096  # 1 MiB
        push.send(payload, cookie="big", timeout=10)
        assert pull.receive(timeout=10).payload == payload
        assert push.receive(timeout=10) == exon.Cookie("big")


def _fragments_dropped(driver_dir: str, node: exon.Node) -> int:
    node.statistics()  # publishes the counters
    with CncFile.open(driver_dir) as cnc:
        for c in cnc.counters().snapshot():
            if c.type_id == NodeCounter.FRAGMENTS_DROPPED and f"node {node.node_id} " in c.label:
                return c.value
    raise AssertionError("no fragments-dropped counter for the node")


def _offer(pub: Any, data: bytes) -> None:
    deadline = time.monotonic() + 5
    while pub.offer(data) < 0:
        assert time.monotonic() < deadline, "the raw publication never took the frame"
        time.sleep(0.001)


def test_garbage_fragments_from_a_raw_publication_are_counted_drops(small_driver) -> None:
    node = exon.Node(driver_dir=small_driver.dir)
    other = exon.Node(driver_dir=small_driver.dir)
    try:
        pull = node.socket("pull", tag=1)
        push = other.socket("push")
        push.link(f"{node.address}/1", timeout=10)
        claimed = "127.0.0.1:9"
        whole = encode_fragments(b"z" * 30_000, 8192)
        garbage = [
            b"\x01\x00\x02\x02\x00",  # truncated FRAGMENT header (dropped natively)
            whole[1],  # a continuation without a start
            whole[0], whole[2],  # a gap: the assembly and the chunk go
            whole[0][:16] + whole[0][20:],  # remaining length that lies (natively)
            b"\x01\x00\x02\x02" + (8 + 5).to_bytes(4, "little") + (2**32 - 1).to_bytes(
                4, "little") + b"\x00" * 4 + b"hello",  # 4 GiB announced: above the cap
            whole[0],  # left unfinished: dropped when the image goes
        ]
        with Aeron.connect(small_driver.dir) as aeron:
            pub = aeron.add_exclusive_publication("aeron:ipc", node._transport.stream_id)
            _offer(pub, encode_hello(claimed))
            for frame in garbage:
                _offer(pub, frame)
            # meanwhile the node keeps serving, large messages included
            for i in range(5):
                push.send(message(i, 30_000), timeout=5)
                assert pull.receive(timeout=5).payload == message(i, 30_000)
            deadline = time.monotonic() + 5
            while node._assembler.dropped < 4 and time.monotonic() < deadline:
                time.sleep(0.01)  # the node's dispatcher reads the rest
            assert len(node._assembler) == 1  # the unfinished one
            pub.close()
        deadline = time.monotonic() + 10
        while node._assembler.dropped < 5 and time.monotonic() < deadline:
            with pytest.raises(exon.Timeout):
                pull.receive(timeout=0.05)  # polls: the image goes, its assembly too
        # the native poll drops what is no frame at all (2.17): 1 truncated + 1 liar; the
        # assembler 1 stray + (1 + 1) gap + 1 oversize + 1 unfinished
        assert node.malformed_native == 2
        assert node._assembler.dropped == 5
        assert len(node._assembler) == 0
        assert _fragments_dropped(small_driver.dir, node) == 5
        push.send(message(9, 30_000), timeout=5)
        assert pull.receive(timeout=5).payload == message(9, 30_000)
        assert node._assembler.max_total == HEADER_LENGTH + (1 << 20)
    finally:
        other.close(timeout=2.0)
        node.close(timeout=2.0)
