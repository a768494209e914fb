"""Hostile peers over real nodes (issue #32): a raw-publication attacker that names a
reply address it does not own cannot link nor deliver, what goes to that address stays
within 3x what came in its name, and a session flooding garbage does not stall a good
stream (docs/protocol.md 2.6.1, 2.17).

The attacker is an Aeron publication of its own on the target node's IPC stream (one
driver for all): its HELLO and its frames are whatever it likes.
"""

from __future__ import annotations

import random
import socket
import time

import pytest

import exon
from exon.bench.flood import good_stream, start_flooder
from exon.core.frames import (
    Decision,
    LinkMetadata,
    encode_data,
    encode_flow,
    encode_link,
    encode_linkack,
)
from exon.core.link_actions import AMPLIFICATION_FACTOR
from exon.middleware.node_connections import CONNECT_ROUND_BYTES
from exon.middleware.node_transport import encode_hello
from exon.transport.aeron import Aeron


def _offer(pub, frame: bytes, deadline: float) -> None:  # type: ignore[no-untyped-def]
    while pub.offer(frame) < 0:
        if time.monotonic() > deadline:
            raise AssertionError("the attacker's publication never took its frame")
        time.sleep(0.0005)


def test_a_blind_attacker_with_a_blackhole_reply_address_never_links(make_node,
                                                                     driver) -> None:
    node = make_node()
    pull = node.socket("pull", tag=2)
    # the blackhole: a UDP port that reads (to measure what the node sends there) and
    # never answers, so no driver ever connects
    hole = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hole.bind(("127.0.0.1", 0))
    hole.setblocking(False)
    blackhole = f"127.0.0.1:{hole.getsockname()[1]}"
    rng = random.Random(32)
    sent = 0
    try:
        with Aeron.connect(driver.dir) as aeron:
            pub = aeron.add_exclusive_publication("aeron:ipc", node._transport.stream_id)
            deadline = time.monotonic() + 10
            frames = [encode_hello(blackhole)]
            for attempt in range(5):
                inc = 5000 + attempt
                meta = LinkMetadata(socket_type="push", credits=1024, max_message_size=1 << 20,
                                    node_id="attacker", reply_address=blackhole,
                                    nonce=rng.randbytes(16))
                frames.append(encode_link(66, 2, inc, meta))
                frames += [encode_data(66, 2, inc, b"spoofed %d" % i) for i in range(20)]
                frames.append(encode_flow(66, 2, inc, 0, 5000))
                # a blind guess at the echo, for every incarnation the node might have used
                frames += [encode_linkack(66, 2, inc, Decision.ACCEPTED, answers=guess,
                                          echo=rng.randbytes(16))
                           for guess in range(1, 4)]
            for frame in frames:
                _offer(pub, frame, deadline)
                sent += len(frame)
            with pytest.raises(exon.Timeout):
                pull.receive(timeout=1.5)  # nothing reaches the application
            pub.close()
        wire = 0
        end = time.monotonic() + 1.0  # the node's connection attempt times out meanwhile
        while time.monotonic() < end:
            try:
                wire += len(hole.recv(65536))
            except BlockingIOError:
                time.sleep(0.01)
        stats = node.statistics()
        assert stats.links_established == 0
        assert pull.peers == []
        assert stats.unvalidated_dropped >= 20
        counts = node._core.outbox.unvalidated.get(blackhole)
        assert counts is not None
        came, went = counts
        assert 0 < went <= AMPLIFICATION_FACTOR * came
        assert wire <= went  # the SETUP rounds are within what was counted
        assert not node._core.validated(blackhole)
        print(f"\nattacker sent {sent} B; exon frames for the blackhole {went} B of "
              f"{AMPLIFICATION_FACTOR}x{came} B allowed, held back "
              f"{stats.amplification_held} frames; on the wire there (SETUPs, no connection) "
              f"{wire} B")
    finally:
        hole.close()


def test_setups_to_an_unvalidated_address_stay_within_the_limit(make_node, driver) -> None:
    """One HELLO and one LINK naming a blackhole: the node answers (a LINKACK) and opens a
    stream there, whose SETUP rounds count against the same 3x as its frames, so what
    reaches the blackhole on the wire stays within 3x what came in its name (before: one
    SETUP and one heartbeat every 100 ms for 1 s, 792 B, whatever came)."""
    node = make_node()
    node.socket("pull", tag=2)
    hole = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hole.bind(("127.0.0.1", 0))
    hole.setblocking(False)
    blackhole = f"127.0.0.1:{hole.getsockname()[1]}"
    try:
        with Aeron.connect(driver.dir) as aeron:
            pub = aeron.add_exclusive_publication("aeron:ipc", node._transport.stream_id)
            deadline = time.monotonic() + 10
            meta = LinkMetadata(socket_type="push", credits=1, max_message_size=64,
                                node_id="a", reply_address=blackhole, nonce=bytes(16))
            for frame in (encode_hello(blackhole), encode_link(66, 2, 7, meta)):
                _offer(pub, frame, deadline)
            wire = 0
            end = time.monotonic() + 2.0  # longer than a whole connection attempt (1 s)
            while time.monotonic() < end:
                try:
                    wire += len(hole.recv(65536))
                except BlockingIOError:
                    time.sleep(0.01)
            pub.close()
        counts = node._core.outbox.unvalidated.get(blackhole)
        assert counts is not None
        came, went = counts
        stats = node.statistics()
        print(f"\ncame {came} B in the blackhole's name; counted sent {went} B "
              f"(SETUP rounds of {CONNECT_ROUND_BYTES} B included); on the wire {wire} B; "
              f"held {stats.amplification_held} frames")
        assert wire >= CONNECT_ROUND_BYTES  # the attempt was made, within its budget
        assert wire <= went <= AMPLIFICATION_FACTOR * came
        assert node.statistics().links_established == 0
    finally:
        hole.close()


def test_linking_and_request_reply_still_work_with_the_token(make_node) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=7)
    req = b.socket("req")
    req.link(f"{a.address}/7", timeout=5)
    for i in range(20):
        req.send(b"q%d" % i, timeout=5)
        m = rep.receive(timeout=5)
        rep.send(m.payload.upper())
        assert req.receive(timeout=5).payload == b"Q%d" % i
    assert a.statistics().tokens_rejected == 0
    assert a._core.validated(b.address)


@pytest.mark.slow
def test_a_garbage_flood_does_not_stall_a_good_stream(make_node, driver) -> None:
    """One session pushing 100k garbage messages a second (as fast as this machine lets a
    Python flooder) beside a good stream: the good stream goes on; its longest gap is
    reported, not asserted (a timing: ``exon bench sockets --flood`` measures it)."""
    node, other = make_node(), make_node()
    pull = node.socket("pull", tag=3)
    push = other.socket("push")
    push.link(f"{node.address}/3", timeout=5)
    quiet, quiet_gap = good_stream(push, pull, 1.5)
    proc = start_flooder(driver.dir, node, 100_000, 3.5)
    try:
        flooded, flood_gap = good_stream(push, pull, 1.5)
        assert proc.wait(30) == 0
        assert proc.stdout is not None
        offered = int(proc.stdout.read().split()[-1])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert offered > 1000  # the flood ran
    assert flooded > 0  # and the good stream went on beside it
    assert node.malformed_native > 0  # dropped natively
    assert node.statistics().links_established == 1
    print(f"\ngood stream: {quiet} msgs, longest gap {quiet_gap * 1000:.1f} ms without the "
          f"flood; {flooded} msgs, longest gap {flood_gap * 1000:.1f} ms beside "
          f"{offered / 3.5:.0f} garbage messages/s (ratio {flooded / max(quiet, 1):.2f}); "
          f"dropped natively {node.malformed_native}")
