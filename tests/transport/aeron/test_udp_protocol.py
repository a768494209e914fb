"""Protocol cadence of exon's UDP media driver against a raw Python UDP socket.

One side is a real exon driver (a publication, or a subscription); the other is a plain
socket that speaks Aeron frames through exon's codecs (exon.transport.aeron.frames), so every
frame the driver sends is decoded and checked against the rules in docs/protocol.md (section 1).
The driver runs on its own threads with a wall clock: timing checks allow for scheduling.
"""

from __future__ import annotations

import itertools
import os
import socket
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
from tests.transport.aeron.driver_fixtures import SMALL, unique_dir, wait_until

pytestmark = pytest.mark.net

STREAM = 11
TERM = 64 * 1024
MTU = 1408
MS = 1_000_000


class Peer:
    """A raw UDP socket on 127.0.0.1 that decodes and encodes Aeron frames."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.source: tuple[str, int] | None = None

    def datagrams(self, seconds: float) -> list[tuple[float, bytes]]:
        """Everything received within ``seconds``, each with its arrival time."""
        out: list[tuple[float, bytes]] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data, self.source = self.sock.recvfrom(65536)
            except TimeoutError:
                break
            out.append((time.monotonic(), data))
        return out

    def frames(self, seconds: float) -> list[tuple[float, F.Frame]]:
        return [(t, f) for t, d in self.datagrams(seconds) for f in F.split_datagram(d)]

    def wait_for(self, kind: type, seconds: float = 2.0) -> F.Frame:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for _, frame in self.frames(0.02):
                if isinstance(frame, kind):
                    return frame
        raise AssertionError(f"no {kind.__name__} within {seconds} s")

    def send(self, data: bytes, address: tuple[str, int] | None = None) -> None:
        target = address or self.source
        assert target is not None
        self.sock.sendto(data, target)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def launch(stack: ExitStack, **settings: Any) -> Aeron:
    opts = {**SMALL, "term_buffer_length": TERM, "mtu_length": MTU,
            "dir_delete_on_shutdown": True, **settings}
    driver = stack.enter_context(MediaDriver.launch(dir=unique_dir("proto"), **opts))
    return stack.enter_context(Aeron.connect(driver.dir, timeout=5.0))


def peer_in(stack: ExitStack) -> Peer:
    peer = Peer()
    stack.callback(peer.close)
    return peer


def _data(frames: list[tuple[float, F.Frame]]) -> list[F.DataFrame]:
    return [f for _, f in frames if isinstance(f, F.DataFrame) and not f.is_heartbeat]


# -- the driver's sender against a raw receiver ------------------------------------------


def test_sender_setup_window_packing_heartbeat_and_eos(stack: ExitStack) -> None:
    peer = peer_in(stack)
    tx = launch(stack, publication_linger_timeout_ns=300 * MS)
    pub = tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{peer.port}|session-id=55", STREAM)
    # SETUP every 100 ms until an SM arrives
    setups = [(t, f) for t, f in peer.frames(0.45) if isinstance(f, F.SetupFrame)]
    assert 3 <= len(setups) <= 6
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(setups)]
    assert all(0.06 < g < 0.2 for g in gaps), gaps
    setup = setups[0][1]
    assert (setup.session_id, setup.stream_id, setup.term_offset) == (55, STREAM, 0)
    assert (setup.term_length, setup.mtu) == (TERM, MTU)
    assert setup.active_term_id == setup.initial_term_id
    assert not pub.is_connected
    term0 = setup.initial_term_id

    def sm(position: int, window: int, flags: int = 0) -> bytes:
        return F.encode_sm(session_id=55, stream_id=STREAM,
                           consumption_term_id=term0 + position // TERM,
                           consumption_term_offset=position % TERM, receiver_window=window,
                           receiver_id=99, flags=flags)

    # an SM with a zero window connects the publication, but no DATA may flow yet
    peer.send(sm(0, 0))
    assert wait_until(lambda: pub.is_connected, 2.0)
    for i in range(100):  # 100 x 100-byte messages, 160 bytes aligned
        assert wait_until(lambda i=i: pub.offer(bytes([i]) * 100) > 0, 2.0)
    assert not _data(peer.frames(0.15))
    # SM with a 4 KiB window: data up to the window only, packed up to the MTU per datagram
    peer.send(sm(0, 4096))
    datagrams = [d for _, d in peer.datagrams(0.2)]
    data = [f for d in datagrams for f in F.split_datagram(d)
            if isinstance(f, F.DataFrame) and not f.is_heartbeat]
    assert data, "no DATA after the SM"
    assert all(len(d) <= MTU for d in datagrams)
    assert max(len(F.split_datagram(d)) for d in datagrams) == MTU // 160  # 8 frames
    offsets = [f.term_offset for f in data]
    assert offsets == list(range(0, 4096, 160))[: len(offsets)]
    assert offsets[-1] + 160 <= 4096
    assert all(f.term_id == term0 and f.session_id == 55 for f in data)
    # the window opens: the rest flows
    peer.send(sm(4096, 64 * 1024))
    rest = _data(peer.frames(0.2))
    assert len(data) + len(rest) == 100
    assert [f.payload for f in data + rest] == [bytes([i]) * 100 for i in range(100)]
    # idle: heartbeats (zero-length DATA at the tail) every ~100 ms
    beats = [(t, f) for t, f in peer.frames(0.45)
             if isinstance(f, F.DataFrame) and f.is_heartbeat]
    assert 3 <= len(beats) <= 6
    assert all(f.term_offset == 16000 and not f.is_eos for _, f in beats)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(beats)]
    assert all(0.06 < g < 0.2 for g in gaps), gaps
    assert tx.counter_value(SystemCounter.HEARTBEATS_SENT) >= 3
    # close: EOS heartbeats during the linger while the receiver still answers
    peer.send(sm(16000, 64 * 1024))
    pub.close()
    eos: list[F.DataFrame] = []
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        peer.send(sm(16000, 64 * 1024))
        eos += [f for _, f in peer.frames(0.02) if isinstance(f, F.DataFrame) and f.is_eos]
    assert 2 <= len(eos) <= 6
    assert all(f.term_offset == 16000 and f.frame_length == 0 for f in eos)
    assert not _data(peer.frames(0.15))  # linger over: silence


def test_a_publication_closed_before_any_answer_sends_nothing_while_it_lingers(
        stack: ExitStack) -> None:
    """No receiver ever answered: closed, it has nobody to drain to, so it neither SETUPs
    nor heartbeats through its linger (it did both every 100 ms for the whole linger: a
    node giving up on an address that never answers, docs/protocol.md 2.6.1)."""
    peer = peer_in(stack)
    tx = launch(stack, publication_linger_timeout_ns=2000 * MS)
    pub = tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{peer.port}", STREAM)
    before = peer.frames(0.25)
    assert any(isinstance(f, F.SetupFrame) for _, f in before)  # it did try
    pub.close()
    peer.frames(0.05)  # a round already on its way
    assert peer.frames(0.5) == []


def test_sender_answers_send_setup_retransmits_once_per_linger(stack: ExitStack) -> None:
    peer = peer_in(stack)
    tx = launch(stack, retransmit_unicast_linger_ns=300 * MS)
    pub = tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{peer.port}|session-id=56", STREAM)
    setup = peer.wait_for(F.SetupFrame)
    assert isinstance(setup, F.SetupFrame)
    term0 = setup.initial_term_id
    peer.send(F.encode_sm(session_id=56, stream_id=STREAM, consumption_term_id=term0,
                          consumption_term_offset=0, receiver_window=64 * 1024,
                          receiver_id=99, flags=0))
    assert wait_until(lambda: pub.is_connected, 2.0)
    peer.frames(0.05)
    for i in range(20):
        assert wait_until(lambda i=i: pub.offer(bytes([i]) * 500) > 0, 2.0)  # 544 aligned
    assert len(_data(peer.frames(0.2))) == 20
    # an SM carrying SEND_SETUP is answered with a SETUP at once
    peer.send(F.encode_sm(session_id=56, stream_id=STREAM, consumption_term_id=term0,
                          consumption_term_offset=0, receiver_window=0, receiver_id=99,
                          flags=L.SM_FLAG_SEND_SETUP))
    again = peer.wait_for(F.SetupFrame, 0.5)
    assert isinstance(again, F.SetupFrame)
    assert again.session_id == 56
    # a NAK is answered by resending exactly its range; repeats within the linger are ignored
    nak = F.encode_nak(session_id=56, stream_id=STREAM, term_id=term0, term_offset=1088,
                       length=1088)
    before = tx.counter_value(SystemCounter.RETRANSMITS_SENT)
    for _ in range(3):
        peer.send(nak)
    first = _data(peer.frames(0.1))
    assert [(f.term_offset, f.payload) for f in first] == [
        (1088, bytes([2]) * 500), (1632, bytes([3]) * 500)]
    assert tx.counter_value(SystemCounter.RETRANSMITS_SENT) == before + 1
    assert tx.counter_value(SystemCounter.NAK_MESSAGES_RECEIVED) >= 3
    time.sleep(0.35)  # the linger ends: the same NAK is served again
    peer.send(nak)
    assert [f.term_offset for f in _data(peer.frames(0.1))] == [1088, 1632]
    # an RTTM request (REPLY flag) is echoed at once without the flag; answers are ignored
    peer.send(F.encode_rttm(session_id=56, stream_id=STREAM, echo_timestamp=123,
                            reception_delta=0, receiver_id=99, flags=L.RTTM_FLAG_REPLY))
    echo = peer.wait_for(F.RttmFrame, 0.5)
    assert echo == F.RttmFrame(flags=0, session_id=56, stream_id=STREAM, echo_timestamp=123,
                               reception_delta=0, receiver_id=99)
    peer.send(F.encode_rttm(session_id=56, stream_id=STREAM, echo_timestamp=5,
                            reception_delta=0, receiver_id=99, flags=0))
    assert not [f for _, f in peer.frames(0.1) if isinstance(f, F.RttmFrame)]
    # NAKs for other sessions and garbage are counted, not acted on
    invalid = tx.counter_value(SystemCounter.INVALID_PACKETS)
    peer.send(b"\x00" * 5)
    peer.send(F.encode_nak(session_id=57, stream_id=STREAM, term_id=term0, term_offset=0,
                           length=32))
    assert not _data(peer.frames(0.1))
    assert wait_until(lambda: tx.counter_value(SystemCounter.INVALID_PACKETS) > invalid)


# -- the driver's receiver against a raw sender -----------------------------------------


def _frame(session: int, offset: int, payload: bytes, term_id: int = 7, flags: int = 0xC0) -> bytes:
    return F.encode_data(flags=flags, term_offset=offset, session_id=session, stream_id=STREAM,
                         term_id=term_id, payload=payload)


def _setup(session: int) -> bytes:
    return F.encode_setup(term_offset=0, session_id=session, stream_id=STREAM, initial_term_id=7,
                          active_term_id=7, term_length=TERM, mtu=MTU)


def test_receiver_elicits_setup_naks_gaps_and_paces_sms(stack: ExitStack) -> None:
    peer = peer_in(stack)
    rx = launch(stack, status_message_timeout_ns=200 * MS, nak_unicast_delay_ns=1 * MS)
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = ("127.0.0.1", int(sub.bound_endpoint.rsplit(":", 1)[1]))
    # data of an unknown session: an SM with SEND_SETUP asks for a SETUP
    peer.send(_frame(55, 0, b"x" * 10), port)
    sm = peer.wait_for(F.StatusMessage)
    assert isinstance(sm, F.StatusMessage)
    assert (sm.flags, sm.session_id, sm.stream_id) == (L.SM_FLAG_SEND_SETUP, 55, STREAM)
    assert sub.image_count == 0
    # SETUP creates the image; its first SM comes at once with the window (term / 2)
    peer.send(_setup(55), port)
    assert wait_until(lambda: sub.image_count == 1, 2.0)
    first = peer.wait_for(F.StatusMessage)
    assert isinstance(first, F.StatusMessage)
    assert (first.flags, first.consumption_term_id, first.consumption_term_offset) == (0, 7, 0)
    assert first.receiver_window == TERM // 2
    assert first.receiver_id != 0
    # frames 0 and 128 arrive, 64 is missing: a NAK for exactly the gap, repeated while open
    peer.send(_frame(55, 0, b"a" * 20), port)
    peer.send(_frame(55, 128, b"c" * 20), port)
    naks = [f for _, f in peer.frames(0.4) if isinstance(f, F.NakFrame)]
    assert len(naks) >= 2
    assert all((n.session_id, n.term_id, n.term_offset, n.length) == (55, 7, 64, 64)
               for n in naks)
    got: list[bytes] = []
    sub.poll(lambda d, _h: got.append(bytes(d)), 10)
    assert got == [b"a" * 20]
    peer.send(_frame(55, 64, b"b" * 20), port)
    assert wait_until(lambda: sub.poll(lambda d, _h: got.append(bytes(d)), 10) >= 0
                      and len(got) == 3, 2.0)
    assert got == [b"a" * 20, b"b" * 20, b"c" * 20]
    # duplicates are ignored
    peer.send(_frame(55, 64, b"b" * 20), port)
    time.sleep(0.05)
    assert sub.poll(lambda d, _h: got.append(bytes(d)), 10) == 0
    # SMs: the consumption moved (an SM soon), then one per status-message timeout while idle
    sms = [(t, f) for t, f in peer.frames(0.75) if isinstance(f, F.StatusMessage)]
    assert sms
    assert sms[-1][1].consumption_term_offset == 192
    idle = [t for t, f in sms if f.consumption_term_offset == 192]
    gaps = [b - a for a, b in itertools.pairwise(idle)]
    assert 2 <= len(idle) <= 6
    assert all(0.12 < g < 0.3 for g in gaps), gaps
    # data past the window is an over-run; data behind the consumed position an under-run
    over = rx.counter_value(SystemCounter.FLOW_CONTROL_OVER_RUNS)
    peer.send(_frame(55, 192 + TERM // 2 + 64, b"z"), port)
    assert wait_until(lambda: rx.counter_value(SystemCounter.FLOW_CONTROL_OVER_RUNS) > over)
    under = rx.counter_value(SystemCounter.FLOW_CONTROL_UNDER_RUNS)
    peer.send(_frame(55, 0, b"a" * 20), port)
    assert wait_until(lambda: rx.counter_value(SystemCounter.FLOW_CONTROL_UNDER_RUNS) > under)
    # an image takes data only from its SETUP's source address
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(_frame(55, 192, b"evil"), port)
        time.sleep(0.05)
    assert sub.poll(lambda d, _h: got.append(bytes(d)), 10) == 0
    # EOS at the tail ends the image once consumed
    peer.send(_frame(55, 192, b"last"), port)
    assert wait_until(lambda: sub.poll(lambda d, _h: got.append(bytes(d)), 10) > 0, 2.0)
    assert got[-1] == b"last"
    peer.send(F.encode_heartbeat(term_offset=256, session_id=55, stream_id=STREAM, term_id=7,
                                 eos=True), port)
    assert wait_until(lambda: sub.image_count == 0, 3.0)


def test_receiver_measures_rtt_with_rttm(stack: ExitStack) -> None:
    peer = peer_in(stack)
    rx = launch(stack)
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = ("127.0.0.1", int(sub.bound_endpoint.rsplit(":", 1)[1]))
    peer.send(_setup(57), port)
    assert wait_until(lambda: sub.image_count == 1, 2.0)
    # the image asks at once (REPLY flag, its clock in echo_timestamp), then about once a second
    request = peer.wait_for(F.RttmFrame, 1.0)
    assert isinstance(request, F.RttmFrame)
    assert (request.flags, request.session_id, request.stream_id) == (
        L.RTTM_FLAG_REPLY, 57, STREAM)
    assert request.receiver_id != 0
    rtt_ids = [i for i, label in rx.allocated_counters().items() if label.startswith("rcv-rtt")]
    assert len(rtt_ids) == 1
    assert rx.counter_value(rtt_ids[0]) == 0
    time.sleep(0.08)  # the answer takes 80 ms, 30 of which the peer says it held it
    peer.send(F.encode_rttm(session_id=57, stream_id=STREAM,
                            echo_timestamp=request.echo_timestamp, reception_delta=30 * MS,
                            receiver_id=request.receiver_id, flags=0))
    assert wait_until(lambda: rx.counter_value(rtt_ids[0]) > 0, 2.0)
    assert 50 * MS <= rx.counter_value(rtt_ids[0]) < 1000 * MS
    # answers with a foreign receiver id or a future timestamp are counted invalid
    invalid = rx.counter_value(SystemCounter.INVALID_PACKETS)
    peer.send(F.encode_rttm(session_id=57, stream_id=STREAM, echo_timestamp=1 << 62,
                            reception_delta=0, receiver_id=request.receiver_id, flags=0))
    assert wait_until(lambda: rx.counter_value(SystemCounter.INVALID_PACKETS) > invalid)
    nxt = peer.wait_for(F.RttmFrame, 2.0)
    assert isinstance(nxt, F.RttmFrame)
    assert nxt.echo_timestamp - request.echo_timestamp >= 900 * MS


def test_receiver_refuses_setups_over_the_max_image_term_length(stack: ExitStack) -> None:
    """A spoofed SETUP announcing a huge (but Aeron-valid) term never makes an image log."""
    peer = peer_in(stack)
    rx = launch(stack, max_image_term_length="128k")
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = ("127.0.0.1", int(sub.bound_endpoint.rsplit(":", 1)[1]))
    images_dir = os.path.join(rx.dir, "images")

    def logs() -> list[str]:
        return os.listdir(images_dir) if os.path.isdir(images_dir) else []

    for session, term_length in ((60, 1 << 30), (61, 256 * 1024)):
        invalid = rx.counter_value(SystemCounter.INVALID_PACKETS)
        peer.send(F.encode_setup(term_offset=0, session_id=session, stream_id=STREAM,
                                 initial_term_id=7, active_term_id=7, term_length=term_length,
                                 mtu=MTU), port)
        assert wait_until(lambda i=invalid: rx.counter_value(SystemCounter.INVALID_PACKETS) > i)
    # the refusal happens on receipt: a later, acceptable SETUP is served and is the only image
    peer.send(F.encode_setup(term_offset=0, session_id=62, stream_id=STREAM, initial_term_id=7,
                             active_term_id=7, term_length=128 * 1024, mtu=MTU), port)
    assert wait_until(lambda: sub.image_count == 1, 2.0)
    assert len(logs()) == 1
    assert all(os.path.getsize(os.path.join(images_dir, name)) < 1 << 20 for name in logs())
    assert sub.image_count == 1


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_publication_control_is_the_local_address_of_its_socket(stack: ExitStack) -> None:
    """``control`` on a publication binds its send socket: SETUPs leave from it, SMs return."""
    peer = peer_in(stack)
    tx = launch(stack)
    control = _free_udp_port()
    pub = tx.add_publication(
        f"aeron:udp?endpoint=127.0.0.1:{peer.port}|control=127.0.0.1:{control}|session-id=56",
        STREAM)
    setup = peer.wait_for(F.SetupFrame)
    assert isinstance(setup, F.SetupFrame)
    assert peer.source == ("127.0.0.1", control)
    # an SM sent to the control address connects the publication
    peer.send(F.encode_sm(session_id=56, stream_id=STREAM,
                          consumption_term_id=setup.initial_term_id, consumption_term_offset=0,
                          receiver_window=4096, receiver_id=99, flags=0),
              ("127.0.0.1", control))
    assert wait_until(lambda: pub.is_connected, 2.0)
    # port 0: an ephemeral port on the control host
    other = peer_in(stack)
    tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{other.port}|control=127.0.0.1:0", STREAM)
    other.wait_for(F.SetupFrame)
    assert other.source is not None
    assert other.source[0] == "127.0.0.1"
    assert other.source[1] not in (0, control)
    # a control address another socket holds is a driver error naming it
    with pytest.raises(errors.DriverError, match="send channel"):
        tx.add_publication(
            f"aeron:udp?endpoint=127.0.0.1:{other.port}|control=127.0.0.1:{control}|session-id=57",
            STREAM)
    # on a subscription control would mean multi-destination: refused
    with pytest.raises(errors.ChannelUriError, match="control"):
        tx.add_subscription(f"aeron:udp?endpoint=127.0.0.1:0|control=127.0.0.1:{control}", STREAM)
