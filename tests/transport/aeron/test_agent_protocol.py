"""Protocol rules of the sender and receiver cores, driven by an integer clock.

The cores talk to a plain Python UDP socket playing the other side, so every frame they
send is decoded with exon's codecs and checked against the rules in docs/protocol.md.
"""

from __future__ import annotations

import os
import socket

import pytest

from exon.native import check, ffi, lib
from exon.transport.aeron import frames as F
from exon.transport.aeron import layout as L
from tests.transport.aeron.udp_harness import MTU, STREAM, TERM_LENGTH, make_log, open_channel

pytestmark = pytest.mark.net
MS = 1_000_000
T0 = 10_000 * MS


class Peer:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]

    def frames(self) -> list[F.Frame]:
        out: list[F.Frame] = []
        self.sock.settimeout(0.002)
        while True:
            try:
                data, self.source = self.sock.recvfrom(65536)
            except TimeoutError:
                return out
            out.extend(F.split_datagram(data))

    def datagrams(self) -> list[bytes]:
        out = []
        self.sock.settimeout(0.002)
        while True:
            try:
                data, self.source = self.sock.recvfrom(65536)
            except TimeoutError:
                return out
            out.append(data)

    def send(self, data: bytes, port: int) -> None:
        self.sock.sendto(data, ("127.0.0.1", port))


@pytest.fixture
def sender(tmp_path):
    peer = Peer()
    channel = open_channel()
    log = make_log(os.path.join(tmp_path, "pub.log"), term_length=TERM_LENGTH, mtu=MTU,
                   initial_term_id=7, session_id=55, stream_id=STREAM, log_type=1)
    limit = ffi.new("int64_t *", 1 << 40)
    pub = ffi.new("exon_publication_t *")
    check(lib.exon_publication_init(pub, log, limit, ffi.NULL, 1))
    dest = ffi.new("exon_udp_addr_t *")
    check(lib.exon_udp_addr_resolve(dest, b"127.0.0.1", peer.port))
    params = ffi.new("exon_net_publication_params_t *")
    lib.exon_net_publication_default_params(params)
    params.linger_ns = 1000 * MS
    params.max_datagrams_per_cycle = 16
    net = ffi.new("exon_net_publication_t *")
    check(lib.exon_net_publication_init(net, log, channel, dest, params, T0))
    agent = ffi.new("exon_sender_agent_t *")
    lib.exon_sender_agent_init(agent)
    check(lib.exon_sender_agent_add(agent, net))
    yield peer, agent, net, pub, lib.exon_udp_channel_local_port(channel)
    lib.exon_udp_channel_close(channel)
    lib.exon_log_close(log)
    peer.sock.close()


def _sm(position: int, window: int, flags: int = 0) -> bytes:
    return F.encode_sm(session_id=55, stream_id=STREAM,
                       consumption_term_id=7 + position // TERM_LENGTH,
                       consumption_term_offset=position % TERM_LENGTH, receiver_window=window,
                       receiver_id=99, flags=flags)


def test_setup_every_100ms_until_sm_then_window_heartbeat_and_eos(sender) -> None:
    peer, agent, net, pub, port = sender
    setups = []
    for t in range(0, 350, 10):
        lib.exon_sender_agent_do_work(agent, T0 + t * MS)
        setups += [(t, f) for f in peer.frames() if isinstance(f, F.SetupFrame)]
    assert [t for t, _ in setups] == [0, 100, 200, 300]
    setup = setups[0][1]
    assert (setup.session_id, setup.stream_id, setup.initial_term_id, setup.active_term_id) == (
        55, STREAM, 7, 7)
    assert (setup.term_offset, setup.term_length, setup.mtu) == (0, TERM_LENGTH, MTU)
    for i in range(100):
        assert lib.exon_publication_offer(pub, bytes([i]) * 100, 100, 0) > 0
    lib.exon_sender_agent_do_work(agent, T0 + 351 * MS)
    assert not [f for f in peer.frames() if isinstance(f, F.DataFrame)]  # no SM: no data
    peer.send(_sm(0, 4096), port)
    now = T0 + 352 * MS
    lib.exon_sender_agent_do_work(agent, now)
    assert lib.exon_publication_is_connected(pub) == 1
    datagrams = peer.datagrams()
    data = [f for d in datagrams for f in F.split_datagram(d)]
    assert all(len(d) <= MTU for d in datagrams)
    assert max(len(F.split_datagram(d)) for d in datagrams) == MTU // 160  # 8 x 160 per datagram
    offsets = [f.term_offset for f in data]
    assert offsets == list(range(0, 4096, 160))[: len(offsets)]
    assert offsets[-1] + 160 <= 4096  # within the window
    assert net.sender_position == len(data) * 160
    # window opens: the rest flows
    peer.send(_sm(4096, 64 * 1024), port)
    lib.exon_sender_agent_do_work(agent, now + MS)
    rest = [f for f in peer.frames() if isinstance(f, F.DataFrame)]
    assert len(data) + len(rest) == 100
    # idle: heartbeats every 100 ms at the tail
    beats = []
    for t in range(2, 400):
        lib.exon_sender_agent_do_work(agent, now + t * MS)
        beats += [(t, f) for f in peer.frames() if isinstance(f, F.DataFrame) and f.is_heartbeat]
    assert [t for t, _ in beats] == [101, 201, 301]
    assert beats[0][1].term_offset == 16000
    assert not beats[0][1].is_eos
    # close: EOS heartbeats for the linger, then done
    now += 400 * MS
    lib.exon_net_publication_close(net, now)
    eos = []
    for t in range(0, 1200, 10):
        peer.send(_sm(16000, 64 * 1024), port)  # keep the connection alive
        lib.exon_sender_agent_do_work(agent, now + t * MS)
        eos += [f for f in peer.frames() if isinstance(f, F.DataFrame) and f.is_eos]
    assert 9 <= len(eos) <= 12
    assert all(f.term_offset == 16000 for f in eos)
    assert lib.exon_net_publication_is_done(net)


def test_send_setup_flag_nak_linger_and_rttm(sender) -> None:
    peer, agent, net, pub, port = sender
    lib.exon_sender_agent_do_work(agent, T0)
    peer.frames()
    peer.send(_sm(0, 64 * 1024), port)
    for i in range(20):
        lib.exon_publication_offer(pub, bytes([i]) * 500, 500, 0)
    lib.exon_sender_agent_do_work(agent, T0 + MS)
    assert len([f for f in peer.frames() if isinstance(f, F.DataFrame)]) == 20
    # an SM asking for SETUP is answered at once
    peer.send(_sm(0, 0, flags=L.SM_FLAG_SEND_SETUP), port)
    lib.exon_sender_agent_do_work(agent, T0 + 2 * MS)
    assert any(isinstance(f, F.SetupFrame) for f in peer.frames())
    # NAK: immediate resend of exactly the range, duplicates ignored for 10 ms
    nak = F.encode_nak(session_id=55, stream_id=STREAM, term_id=7, term_offset=1088, length=1088)
    resent = []
    for t in range(3, 30):
        peer.send(nak, port)
        lib.exon_sender_agent_do_work(agent, T0 + t * MS)
        resent += [(t, f.term_offset) for f in peer.frames() if isinstance(f, F.DataFrame)
                   and not f.is_heartbeat]
    assert [t for t, _ in resent] == [3, 3, 14, 14, 25, 25]
    assert [o for _, o in resent[:2]] == [1088, 1632]
    assert net.stats.naks_received == 27
    assert net.stats.retransmits == 3
    # RTTM request echoed without the flag
    peer.send(F.encode_rttm(session_id=55, stream_id=STREAM, echo_timestamp=123, reception_delta=0,
                            receiver_id=99, flags=L.RTTM_FLAG_REPLY), port)
    lib.exon_sender_agent_do_work(agent, T0 + 40 * MS)
    rttm = [f for f in peer.frames() if isinstance(f, F.RttmFrame)]
    assert rttm == [F.RttmFrame(flags=0, session_id=55, stream_id=STREAM, echo_timestamp=123,
                                reception_delta=0, receiver_id=99)]
    # control frames for other sessions and garbage are counted, not acted on
    peer.send(b"\x00" * 5, port)
    peer.send(F.encode_nak(session_id=56, stream_id=STREAM, term_id=7, term_offset=0, length=32),
              port)
    lib.exon_sender_agent_do_work(agent, T0 + 41 * MS)
    assert agent.invalid_packets == 1
    assert agent.unknown_session_packets == 1


@pytest.fixture
def receiver(tmp_path):
    peer = Peer()
    channel = open_channel()
    agent = ffi.new("exon_receiver_agent_t *")
    check(lib.exon_receiver_agent_init(agent, channel, 0.0, 0))
    check(lib.exon_receiver_agent_subscribe(agent, STREAM))
    yield peer, agent, channel, lib.exon_udp_channel_local_port(channel), tmp_path
    lib.exon_receiver_agent_fini(agent)
    lib.exon_udp_channel_close(channel)


def _data(offset: int, payload: bytes, term_id: int = 7, session: int = 55) -> bytes:
    return F.encode_data(flags=0xC0, term_offset=offset, session_id=session, stream_id=STREAM,
                         term_id=term_id, payload=payload)


def test_receiver_elicits_setup_creates_image_naks_and_sms(receiver) -> None:
    peer, agent, channel, port, tmp_path = receiver
    # data for an unknown session of a subscribed stream: SM with SEND_SETUP, rate limited
    peer.send(_data(0, b"x" * 10), port)
    peer.send(_data(64, b"x" * 10), port)
    lib.exon_receiver_agent_do_work(agent, T0)
    sms = [f for f in peer.frames() if isinstance(f, F.StatusMessage)]
    assert len(sms) == 1
    assert sms[0].flags == L.SM_FLAG_SEND_SETUP
    assert (sms[0].session_id, sms[0].consumption_term_id, sms[0].receiver_window) == (55, 0, 0)
    # SETUP queues an image request for the conductor
    setup = F.encode_setup(term_offset=0, session_id=55, stream_id=STREAM, initial_term_id=7,
                           active_term_id=7, term_length=TERM_LENGTH, mtu=MTU)
    peer.send(setup, port)
    peer.send(setup, port)
    lib.exon_receiver_agent_do_work(agent, T0 + MS)
    req = ffi.new("exon_setup_request_t *")
    assert lib.exon_receiver_agent_take_setup(agent, req) == 1
    assert lib.exon_receiver_agent_take_setup(agent, req) == 0  # the duplicate is merged
    log = make_log(os.path.join(tmp_path, "img.log"), term_length=TERM_LENGTH, mtu=MTU,
                   initial_term_id=7, session_id=55, stream_id=STREAM, log_type=2)
    image = ffi.new("exon_net_image_t *")
    check(lib.exon_net_image_init(image, log, channel, ffi.addressof(req, "source"),
                                  ffi.addressof(req, "setup"), 1234, ffi.NULL, T0 + MS))
    check(lib.exon_receiver_agent_add_image(agent, image))
    assert image.window == 32 * 1024
    lib.exon_receiver_agent_do_work(agent, T0 + 2 * MS)
    first = [f for f in peer.frames() if isinstance(f, F.StatusMessage)]
    assert len(first) == 1  # at once on creation
    assert (first[0].flags, first[0].receiver_window, first[0].receiver_id) == (0, 32768, 1234)
    # frames 0 and 128 arrive, 64 is missing: NAK after 1 us, again after 100 us
    peer.send(_data(0, b"a" * 20), port)
    peer.send(_data(128, b"c" * 20), port)
    naks = []
    for us in range(0, 400, 50):
        lib.exon_receiver_agent_do_work(agent, T0 + 3 * MS + us * 1000)
        naks += [(us, f) for f in peer.frames() if isinstance(f, F.NakFrame)]
    assert [us for us, _ in naks] == [50, 150, 250, 350]
    assert (naks[0][1].term_id, naks[0][1].term_offset, naks[0][1].length) == (7, 64, 64)
    assert image.rebuild_position == 64
    assert image.hwm_position == 192
    peer.send(_data(64, b"b" * 20), port)
    lib.exon_receiver_agent_do_work(agent, T0 + 4 * MS)
    assert image.rebuild_position == 192
    # SMs: none while idle until 200 ms, then every 200 ms
    peer.frames()
    times = []
    for t in range(5, 700, 5):
        lib.exon_receiver_agent_do_work(agent, T0 + t * MS)
        times += [t for f in peer.frames() if isinstance(f, F.StatusMessage)]
    assert times == [205, 405, 605]  # last SM at 2 ms, then every 200 ms (5 ms steps)
    # data beyond the window is an over-run; data behind the SM position an under-run
    image.consumer_position_local = 192
    lib.exon_receiver_agent_do_work(agent, T0 + 900 * MS)
    peer.send(_data(40000, b"z"), port)
    lib.exon_receiver_agent_do_work(agent, T0 + 901 * MS)
    assert image.stats.over_runs == 1
    peer.send(_data(0, b"a" * 20), port)
    lib.exon_receiver_agent_do_work(agent, T0 + 902 * MS)
    assert image.stats.under_runs == 1
    # wrong-session frames in a batch, lying PADs: counted as bad, nothing inserted
    bad_pad = F.encode_pad(frame_length=96, term_offset=192, session_id=55, stream_id=STREAM,
                           term_id=7)
    peer.send(bad_pad, port)
    lib.exon_receiver_agent_do_work(agent, T0 + 903 * MS)
    assert image.stats.bad_packets == 1
    lib.exon_log_close(log)
