"""Per-channel overrides the driver applies: ``linger``, ``max-resend`` and ``nak-delay``.

Each test runs a real exon driver; the UDP ones put a raw Python socket (the ``Peer`` of
test_udp_protocol) on the other side, so what is checked is what goes over the wire or
what the driver leaves on disk (docs/protocol.md 1.3). Timing checks are lower bounds
(something may not happen before a deadline) plus generous upper bounds.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from exon import errors
from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron import frames as F
from exon.transport.aeron import layout as L
from exon.transport.aeron.counters import SystemCounter
from tests.transport.aeron.driver_fixtures import (
    SMALL,
    allocated_bytes,
    unique_dir,
    wait_until,
)
from tests.transport.aeron.test_udp_protocol import Peer, peer_in

pytestmark = pytest.mark.net


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


STREAM = 21
TERM = 64 * 1024
MTU = 1408
MS = 1_000_000
SECOND = 1_000_000_000


def launch(stack: ExitStack, **settings: Any) -> Aeron:
    opts = {**SMALL, "ipc_term_buffer_length": TERM, "term_buffer_length": TERM,
            "mtu_length": MTU, "dir_delete_on_shutdown": True, **settings}
    driver = stack.enter_context(MediaDriver.launch(dir=unique_dir("uriprm"), **opts))
    return stack.enter_context(Aeron.connect(driver.dir, timeout=5.0))


def meta_linger_ns(path: str) -> int:
    """The log metadata's ``linger_timeout_ns`` (the metadata follows the 3 terms)."""
    with open(path, "rb") as f:
        f.seek(L.LOG_PARTITION_COUNT * TERM + L.LOG_LINGER_TIMEOUT_NS_OFFSET)
        return int(struct.unpack("<q", f.read(8))[0])


# -- linger -------------------------------------------------------------------------------


@pytest.mark.parametrize("media", ["ipc", "udp"])
def test_linger_replaces_the_driver_publication_linger(stack: ExitStack, media: str) -> None:
    """The driver lingers 30 s; ``linger=0`` frees the log at once, ``linger=400ms`` keeps it
    at least that long, and a publication without ``linger`` keeps the driver's."""
    aeron = launch(stack, publication_linger_timeout_ns=30 * SECOND)
    if media == "ipc":
        channels = ["aeron:ipc?linger=0", "aeron:ipc?linger=400ms|term-length=64k",
                    "aeron:ipc"]
    else:
        port = peer_in(stack).port  # nobody answers: each publication never connects
        base = f"aeron:udp?endpoint=127.0.0.1:{port}"
        channels = [f"{base}|linger=0", f"{base}|linger=400ms", base]
    pubs = [aeron.add_exclusive_publication(ch, STREAM) for ch in channels]
    paths = [p.log.path for p in pubs]
    assert [meta_linger_ns(p) for p in paths] == [0, 400 * MS, 30 * SECOND]
    for pub in pubs:
        pub.close()
    closed = time.monotonic()
    assert wait_until(lambda: not os.path.exists(paths[0]), 3.0), "linger=0 log still there"
    if time.monotonic() - closed < 0.3:  # only meaningful while the 400 ms are not yet over
        assert os.path.exists(paths[1])
    assert wait_until(lambda: not os.path.exists(paths[1]), 3.0), "linger=400ms log still there"
    assert time.monotonic() - closed >= 0.35
    assert os.path.exists(paths[2])  # the driver's 30 s


def test_linger_out_of_range_or_malformed_is_refused(stack: ExitStack) -> None:
    aeron = launch(stack)
    with pytest.raises(errors.ChannelUriError, match="linger"):
        aeron.add_publication("aeron:ipc?linger=2h", STREAM)
    with pytest.raises(errors.ChannelUriError, match="linger"):
        aeron.add_publication("aeron:ipc?linger=7200s", STREAM)
    with pytest.raises(errors.ChannelUriError, match="linger"):
        aeron.add_publication("aeron:udp?endpoint=127.0.0.1:9|linger=3601s", STREAM)
    with pytest.raises(errors.ChannelUriError, match="nak-delay"):
        aeron.add_subscription("aeron:udp?endpoint=127.0.0.1:0|nak-delay=3601s", STREAM)
    # one hour is the limit, and is accepted
    pub = aeron.add_exclusive_publication("aeron:ipc?linger=3600s", STREAM)
    assert meta_linger_ns(pub.log.path) == 3600 * SECOND


# -- sparse -------------------------------------------------------------------------------


@pytest.mark.parametrize("driver_sparse", [False, True])
def test_sparse_replaces_the_driver_term_buffer_sparse_file(stack: ExitStack,
                                                             driver_sparse: bool) -> None:
    """Aeron's default (not sparse: every page reserved when the log is made); a channel's
    ``sparse=`` decides for its own publication, IPC and UDP."""
    aeron = launch(stack, term_buffer_sparse_file=driver_sparse)
    udp = f"aeron:udp?endpoint=127.0.0.1:{peer_in(stack).port}"  # nobody answers
    channels = {"aeron:ipc": driver_sparse, "aeron:ipc?sparse=true": True,
                "aeron:ipc?linger=0|sparse=false": False, udp: driver_sparse,
                f"{udp}|sparse=true": True, f"{udp}|sparse=false": False}
    for channel, sparse in channels.items():
        pub = aeron.add_exclusive_publication(channel, STREAM)
        assert (allocated_bytes(pub.log.path) < pub.log.length) == sparse, channel


@pytest.mark.parametrize("channel", ["aeron:ipc?sparse=yes", "aeron:ipc?sparse=",
                                     "aeron:ipc?sparse=true|sparse=true",
                                     "aeron:udp?endpoint=127.0.0.1:9|sparse=1"])
def test_sparse_malformed_is_refused(stack: ExitStack, channel: str) -> None:
    aeron = launch(stack)
    with pytest.raises(errors.ChannelUriError, match=r"sparse|key=value"):
        aeron.add_publication(channel, STREAM)


# -- max-resend ---------------------------------------------------------------------------


def _connected_publication(stack: ExitStack, aeron: Aeron, peer: Peer, extra: str,
                           session: int) -> tuple[Any, int]:
    pub = aeron.add_exclusive_publication(
        f"aeron:udp?endpoint=127.0.0.1:{peer.port}|session-id={session}{extra}", STREAM)
    setup = peer.wait_for(F.SetupFrame)
    assert isinstance(setup, F.SetupFrame)
    term0 = setup.initial_term_id
    peer.send(F.encode_sm(session_id=session, stream_id=STREAM, consumption_term_id=term0,
                          consumption_term_offset=0, receiver_window=TERM // 2,
                          receiver_id=99, flags=0))
    assert wait_until(lambda: pub.is_connected, 2.0)
    for i in range(8):  # 8 x 544 aligned bytes
        assert wait_until(lambda i=i: pub.offer(bytes([i]) * 500) > 0, 2.0)
    deadline = time.monotonic() + 2.0
    sent = 0
    while sent < 8 and time.monotonic() < deadline:
        sent += len([f for _, f in peer.frames(0.05)
                     if isinstance(f, F.DataFrame) and not f.is_heartbeat])
    assert sent == 8
    return pub, term0


def _resent_offsets(aeron: Aeron, peer: Peer, session: int, term0: int) -> tuple[list[int], int]:
    """NAK three separate frames at once; which of them were resent (a resend may carry the
    frame after the NAKed one in its datagram), and the retransmit count."""
    before = aeron.counter_value(SystemCounter.RETRANSMITS_SENT)
    for offset in (0, 1088, 2176):
        peer.send(F.encode_nak(session_id=session, stream_id=STREAM, term_id=term0,
                               term_offset=offset, length=544))
    offsets = {f.term_offset for _, f in peer.frames(0.3)
               if isinstance(f, F.DataFrame) and not f.is_heartbeat}
    resent = [offset for offset in (0, 1088, 2176) if offset in offsets]
    return resent, aeron.counter_value(SystemCounter.RETRANSMITS_SENT) - before


def test_max_resend_caps_the_resends_in_flight_of_that_publication(stack: ExitStack) -> None:
    """With the retransmit linger at 2 s every served NAK holds its slot: ``max-resend=1``
    serves one of three NAKs for different ranges, the driver's 16 serve all three."""
    aeron = launch(stack, retransmit_unicast_linger_ns=2 * SECOND)
    one = peer_in(stack)
    _, term0 = _connected_publication(stack, aeron, one, "|max-resend=1", 71)
    resent, served = _resent_offsets(aeron, one, 71, term0)
    assert (resent, served) == ([0], 1)
    many = peer_in(stack)
    _, term0 = _connected_publication(stack, aeron, many, "", 72)
    resent, served = _resent_offsets(aeron, many, 72, term0)
    assert (resent, served) == ([0, 1088, 2176], 3)


# -- nak-delay ----------------------------------------------------------------------------


def _image_with_gap(stack: ExitStack, aeron: Aeron, port: tuple[str, int], session: int,
                    peer: Peer, sub: Any) -> float:
    """A SETUP, then frames 0 and 128 of ``session`` (64 missing); when the gap was sent."""
    peer.send(F.encode_setup(term_offset=0, session_id=session, stream_id=STREAM,
                             initial_term_id=7, active_term_id=7, term_length=TERM, mtu=MTU),
              port)
    assert wait_until(lambda: sub.image_count >= 1, 2.0)
    peer.frames(0.05)
    for offset, byte in ((0, b"a"), (128, b"c")):
        peer.send(F.encode_data(flags=0xC0, term_offset=offset, session_id=session,
                                stream_id=STREAM, term_id=7, payload=byte * 20), port)
    return time.monotonic()


def _first_nak_after(peer: Peer, session: int, seconds: float) -> float | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for t, f in peer.frames(0.01):
            if isinstance(f, F.NakFrame):
                assert (f.session_id, f.term_id, f.term_offset, f.length) == (session, 7, 64, 64)
                return t
    return None


def test_nak_delay_of_the_first_subscription_sets_the_images_nak_delay(stack: ExitStack) -> None:
    """Driver NAK delay 1 ms; ``nak-delay=600ms`` on the subscription holds the first NAK back
    at least that long; a later subscription on the same endpoint and stream asking for
    1 ms does not change it (the first subscription's value wins)."""
    aeron = launch(stack, nak_unicast_delay_ns=1 * MS)
    slow = aeron.add_subscription("aeron:udp?endpoint=127.0.0.1:0|nak-delay=600ms", STREAM)
    bound = int(slow.bound_endpoint.rsplit(":", 1)[1])
    aeron.add_subscription(f"aeron:udp?endpoint=127.0.0.1:{bound}|nak-delay=1ms", STREAM)
    peer = peer_in(stack)
    gap_at = _image_with_gap(stack, aeron, ("127.0.0.1", bound), 81, peer, slow)
    nak_at = _first_nak_after(peer, 81, 3.0)
    assert nak_at is not None, "no NAK within 3 s"
    assert nak_at - gap_at >= 0.55
    # a subscription without nak-delay on another endpoint: the driver's 1 ms
    fast = aeron.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    other = peer_in(stack)
    port = ("127.0.0.1", int(fast.bound_endpoint.rsplit(":", 1)[1]))
    gap_at = _image_with_gap(stack, aeron, port, 82, other, fast)
    nak_at = _first_nak_after(other, 82, 3.0)
    assert nak_at is not None, "no NAK within 3 s"
    assert nak_at - gap_at < 0.5
