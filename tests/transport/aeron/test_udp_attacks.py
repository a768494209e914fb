"""Issue 13, driver level: strangers cannot lock a receive endpoint's image table, and a
SETUP alone never makes the driver NAK (no reflection). Raw UDP sockets on loopback play the
attacker; a real exon driver is the target. Each test bounds its loops in count and time."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from exon.transport.aeron import frames as F
from exon.transport.aeron.counters import SystemCounter
from tests.transport.aeron.driver_fixtures import allocated_bytes, wait_until
from tests.transport.aeron.test_udp_protocol import (
    MTU,
    STREAM,
    TERM,
    Peer,
    launch,
    peer_in,
)

pytestmark = pytest.mark.net

MS = 1_000_000


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def _setup(session: int, *, term_id: int = 7, term_offset: int = 0,
           term_length: int = TERM) -> bytes:
    return F.encode_setup(term_offset=term_offset, session_id=session, stream_id=STREAM,
                          initial_term_id=term_id, active_term_id=term_id,
                          term_length=term_length, mtu=MTU)


def _data(session: int, offset: int, payload: bytes, term_id: int = 7) -> bytes:
    return F.encode_data(flags=0xC0, term_offset=offset, session_id=session, stream_id=STREAM,
                         term_id=term_id, payload=payload)


def _endpoint(sub) -> tuple[str, int]:
    return ("127.0.0.1", int(sub.bound_endpoint.rsplit(":", 1)[1]))


def _images_held(aeron) -> list[str]:
    return [label for label in aeron.allocated_counters().values() if label.startswith("rcv-pos")]


def test_one_source_holds_at_most_k_unverified_images(stack: ExitStack) -> None:
    """A flood of SETUPs for made-up sessions from one address takes at most
    max_unverified_images_per_source entries: each new one evicts that source's oldest
    (counted), so the table never fills; the rest of the table stays free."""
    flood = peer_in(stack)
    rx = launch(stack, max_unverified_images_per_source=3)
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = _endpoint(sub)
    for session in range(1000, 1100):  # 100 sessions, well past the table's 64
        flood.send(_setup(session), port)
        time.sleep(0.001)

    def accounted() -> int:  # every SETUP past the source's three evicted one or was dropped
        return (rx.counter_value(SystemCounter.IMAGES_EVICTED)
                + rx.counter_value(SystemCounter.SETUPS_DROPPED))

    assert wait_until(lambda: accounted() == 97, 10.0)
    assert rx.counter_value(SystemCounter.IMAGES_EVICTED) > 0
    # the driver's truth: one rcv-pos counter per image it holds
    assert wait_until(lambda: len(_images_held(rx)) == 3, 2.0)
    assert wait_until(lambda: sub.image_count == 3, 2.0)
    assert {i.session_id for i in sub.images} <= set(range(1000, 1100))
    # an honest newcomer from another address still gets its image at once
    honest = peer_in(stack)
    before = sub.image_count
    honest.send(_setup(5), port)
    assert wait_until(lambda: sub.image_count == before + 1, 2.0)


def test_a_setup_reserves_at_most_the_drivers_own_term_length(stack: ExitStack) -> None:
    """Images are not sparse (their pages reserved when made) only up to the driver's own
    term_buffer_length: a SETUP announcing longer terms gets a sparse log, so a stranger's
    SETUPs cannot make the driver reserve max_image_term_length x 3 each."""
    peer = peer_in(stack)
    rx = launch(stack)  # term_buffer_length = TERM
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = _endpoint(sub)
    peer.send(_setup(21, term_length=TERM), port)
    peer.send(_setup(22, term_length=16 * TERM), port)
    assert wait_until(lambda: sub.image_count == 2, 2.0)
    reserved = {image.session_id: allocated_bytes(image.log.path) >= image.log.length
                for image in sub.images}
    assert reserved == {21: True, 22: False}


def test_strangers_from_many_sources_never_evict_a_verified_image(stack: ExitStack) -> None:
    """A full table evicts the oldest unverified image for a new SETUP; a verified image
    (data from its join position arrived) that keeps hearing from its source stays."""
    rx = launch(stack, max_images_per_endpoint=8)
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = _endpoint(sub)
    honest = peer_in(stack)
    honest.send(_setup(1), port)
    assert wait_until(lambda: sub.image_count == 1, 10.0)
    honest.wait_for(F.StatusMessage)
    honest.send(_data(1, 0, b"hello"), port)  # verifies the image
    got: list[bytes] = []
    assert wait_until(lambda: sub.poll(lambda d, _h: got.append(bytes(d)), 10) >= 0
                      and got == [b"hello"], 10.0)
    strangers = [peer_in(stack) for _ in range(20)]
    offset = 64
    for rnd in range(3):
        for i, s in enumerate(strangers):
            s.send(_setup(2000 + rnd * 100 + i), port)
        honest.send(_data(1, offset, b"still here %d" % rnd), port)
        offset += 64
        time.sleep(0.05)
    assert wait_until(lambda: rx.counter_value(SystemCounter.IMAGES_EVICTED) > 0, 10.0)
    assert wait_until(lambda: sub.poll(lambda d, _h: got.append(bytes(d)), 10) >= 0
                      and len(got) == 4, 10.0)
    assert got == [b"hello", b"still here 0", b"still here 1", b"still here 2"]
    assert sub.image_count <= 8
    # with the table full of verified, live images a stranger's SETUP is a counted drop
    rx2 = launch(stack, max_images_per_endpoint=2)
    sub2 = rx2.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port2 = _endpoint(sub2)
    owners = [peer_in(stack) for _ in range(2)]
    for n, owner in enumerate(owners):
        owner.send(_setup(10 + n), port2)
        assert wait_until(lambda n=n: sub2.image_count == n + 1, 10.0)
        owner.wait_for(F.StatusMessage)
        owner.send(_data(10 + n, 0, b"x"), port2)
    time.sleep(0.1)
    dropped = rx2.counter_value(SystemCounter.SETUPS_DROPPED)
    strangers[0].send(_setup(99), port2)
    assert wait_until(lambda: rx2.counter_value(SystemCounter.SETUPS_DROPPED) > dropped, 10.0)
    assert rx2.counter_value(SystemCounter.IMAGES_EVICTED) == 0
    assert sub2.image_count == 2


def test_a_verified_image_quiet_past_the_idle_timeout_makes_room(stack: ExitStack) -> None:
    rx = launch(stack, max_images_per_endpoint=1, image_idle_eviction_timeout_ns=200 * MS)
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = _endpoint(sub)
    gone = peer_in(stack)
    gone.send(_setup(1), port)
    assert wait_until(lambda: sub.image_count == 1, 2.0)
    gone.wait_for(F.StatusMessage)
    gone.send(_data(1, 0, b"x"), port)
    time.sleep(0.4)  # its source went quiet (a killed node)
    newcomer = peer_in(stack)
    newcomer.send(_setup(2), port)
    assert wait_until(lambda: rx.counter_value(SystemCounter.IMAGES_EVICTED) == 1, 2.0)
    assert wait_until(lambda: [i.session_id for i in sub.images] == [2], 2.0)


def _naks(sock: socket.socket, seconds: float) -> list[F.NakFrame]:
    out: list[F.NakFrame] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data, _ = sock.recvfrom(65536)
        except TimeoutError:
            break
        out.extend(f for f in F.split_datagram(data) if isinstance(f, F.NakFrame))
    return out


def test_a_setup_and_one_data_far_ahead_draw_no_naks(stack: ExitStack) -> None:
    """The issue's two datagrams: a SETUP for a made-up session and one DATA 64 KiB ahead
    drew ~6,500 NAKs/s towards the (spoofable) source. The image never saw data from its
    join position nor answered an RTTM: its gap is not NAKed at all (counted suppressed)."""
    rx = launch(stack, term_buffer_length=1 << 20, nak_unicast_delay_ns=1_000)
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = _endpoint(sub)
    victim = Peer()  # the address the attacker spoofs: it only listens
    stack.callback(victim.close)
    big = 1 << 20
    setup = F.encode_setup(term_offset=0, session_id=4242, stream_id=STREAM, initial_term_id=7,
                           active_term_id=7, term_length=big, mtu=MTU)
    victim.send(setup, port)
    assert wait_until(lambda: sub.image_count == 1, 2.0)
    victim.send(F.encode_data(flags=0xC0, term_offset=64 * 1024, session_id=4242,
                              stream_id=STREAM, term_id=7, payload=b"z" * 32), port)
    naks = _naks(victim.sock, 2.0)
    assert naks == []
    assert rx.counter_value(SystemCounter.NAK_MESSAGES_SENT) == 0
    assert rx.counter_value(SystemCounter.NAKS_SUPPRESSED) > 0


def test_naks_of_a_gap_that_is_never_filled_back_off(stack: ExitStack) -> None:
    """A source that sent data from its join (so it is real) and then a frame 64 KiB ahead,
    and never fills the gap, draws a handful of NAKs a second, not thousands."""
    rx = launch(stack, term_buffer_length=1 << 20, nak_unicast_delay_ns=1_000,
                nak_retry_max_delay_ns=250 * MS)
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = _endpoint(sub)
    peer = peer_in(stack)
    big = 1 << 20
    peer.send(F.encode_setup(term_offset=0, session_id=77, stream_id=STREAM, initial_term_id=7,
                             active_term_id=7, term_length=big, mtu=MTU), port)
    assert wait_until(lambda: sub.image_count == 1, 2.0)
    peer.send(F.encode_data(flags=0xC0, term_offset=0, session_id=77, stream_id=STREAM,
                            term_id=7, payload=b"a" * 32), port)
    peer.send(F.encode_data(flags=0xC0, term_offset=64 * 1024, session_id=77, stream_id=STREAM,
                            term_id=7, payload=b"z" * 32), port)
    naks = _naks(peer.sock, 3.0)
    assert naks, "a real gap of a verified source is NAKed"
    assert all((n.session_id, n.term_offset) == (77, 64) for n in naks)
    # 100 us doubling to 250 ms: about 12 in the first second, then 4 a second
    assert len(naks) <= 30, len(naks)
