"""Real UDP on loopback: bind port 0, connect-less sends, recvmmsg/sendmmsg batches."""

from __future__ import annotations

import socket
import time

import pytest

from exon.native import check, ffi, lib
from exon.transport.aeron import frames as F

pytestmark = pytest.mark.net


def _addr(host: str, port: int):
    addr = ffi.new("exon_udp_addr_t *")
    check(lib.exon_udp_addr_resolve(addr, host.encode(), port))
    return addr


def _text(addr) -> str:
    buf = ffi.new("char[]", 64)
    lib.exon_udp_addr_format(addr, buf, 64)
    return ffi.string(buf).decode()


@pytest.fixture
def channel_pair(request):
    host = getattr(request, "param", "127.0.0.1")
    channels = []
    for _ in range(2):
        ch = ffi.new("exon_udp_channel_t *")
        rc = lib.exon_udp_channel_open(ch, _addr(host, 0), 256 * 1024, 256 * 1024)
        if rc < 0 and host == "::1":
            pytest.skip(f"IPv6 loopback unavailable: rc={rc}")
        check(rc)
        channels.append(ch)
    yield channels
    for ch in channels:
        lib.exon_udp_channel_close(ch)


def _recv_all(ch, want: int, timeout: float = 5.0):
    msgs = ffi.new("exon_udp_msg_t[]", 64)
    buffers = [ffi.new("uint8_t[]", 65536) for _ in range(64)]
    for m, b in zip(msgs, buffers, strict=True):
        m.buffer = b
        m.capacity = 65536
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        n = check(lib.exon_udp_channel_recv_batch(ch, msgs, 64))
        for m in msgs[0:n]:
            got.append((bytes(ffi.buffer(m.buffer, m.length)), _text(ffi.addressof(m, "addr")),
                        bool(m.truncated)))
        if n == 0:
            time.sleep(0.001)
    return got


def test_port_zero_reports_bound_port_and_buffers(channel_pair) -> None:
    a, b = channel_pair
    pa, pb = lib.exon_udp_channel_local_port(a), lib.exon_udp_channel_local_port(b)
    assert 0 < pa < 65536
    assert pa != pb
    assert _text(ffi.addressof(a, "local")) == f"127.0.0.1:{pa}"
    assert a.so_rcvbuf > 0
    assert a.so_sndbuf > 0


def test_nothing_waiting_is_zero_not_an_error(channel_pair) -> None:
    a, _ = channel_pair
    assert _recv_all(a, 1, timeout=0.05) == []


def test_sendto_and_batch_round_trip_with_source_address(channel_pair) -> None:
    a, b = channel_pair
    to_b = _addr("127.0.0.1", lib.exon_udp_channel_local_port(b))
    datagram = F.encode_data(flags=0xC0, term_offset=0, session_id=1, stream_id=2, term_id=3,
                             payload=b"hello")
    assert lib.exon_udp_channel_send(a, datagram, len(datagram), to_b) == len(datagram)
    out = ffi.new("exon_udp_msg_t[]", 40)
    keep = []
    for i, m in enumerate(out):
        payload = F.encode_heartbeat(term_offset=32 * i, session_id=1, stream_id=2, term_id=3)
        buf = ffi.new("uint8_t[]", payload)
        keep.append(buf)
        m.buffer = buf
        m.length = len(payload)
        m.addr = to_b[0]
    sent = 0
    deadline = time.monotonic() + 5
    while sent < 40 and time.monotonic() < deadline:
        sent += check(lib.exon_udp_channel_send_batch(a, out + sent, 40 - sent))
    assert sent == 40
    got = _recv_all(b, 41)
    assert len(got) == 41
    source = f"127.0.0.1:{lib.exon_udp_channel_local_port(a)}"
    assert {addr for _, addr, _ in got} == {source}
    assert got[0][0] == datagram
    offsets = [F.decode(data).term_offset for data, _, _ in got[1:]]
    assert offsets == [32 * i for i in range(40)]


def test_truncated_datagram_is_flagged(channel_pair) -> None:
    a, b = channel_pair
    to_b = _addr("127.0.0.1", lib.exon_udp_channel_local_port(b))
    big = bytes(2000)
    assert lib.exon_udp_channel_send(a, big, len(big), to_b) == 2000
    msgs = ffi.new("exon_udp_msg_t[]", 1)
    buf = ffi.new("uint8_t[]", 100)
    msgs[0].buffer = buf
    msgs[0].capacity = 100
    deadline = time.monotonic() + 5
    n = 0
    while n == 0 and time.monotonic() < deadline:
        n = check(lib.exon_udp_channel_recv_batch(b, msgs, 1))
    assert n == 1
    assert msgs[0].truncated


@pytest.mark.parametrize("channel_pair", ["::1"], indirect=True)
def test_ipv6_loopback(channel_pair) -> None:
    a, b = channel_pair
    port = lib.exon_udp_channel_local_port(b)
    assert _text(ffi.addressof(b, "local")) == f"[::1]:{port}"
    data = b"v6" * 16
    assert lib.exon_udp_channel_send(a, data, len(data), _addr("::1", port)) == len(data)
    got = _recv_all(b, 1)
    assert got[0][0] == data
    assert got[0][1] == f"[::1]:{lib.exon_udp_channel_local_port(a)}"


def test_interop_with_python_socket(channel_pair) -> None:
    a, _ = channel_pair
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.settimeout(5)
        port = s.getsockname()[1]
        assert lib.exon_udp_channel_send(a, b"ping", 4, _addr("127.0.0.1", port)) == 4
        data, src = s.recvfrom(100)
        assert data == b"ping"
        assert src[1] == lib.exon_udp_channel_local_port(a)
        s.sendto(b"pong", src)
    assert _recv_all(a, 1)[0][:2] == (b"pong", f"127.0.0.1:{port}")


def test_bad_addresses() -> None:
    addr = ffi.new("exon_udp_addr_t *")
    assert lib.exon_udp_addr_resolve(addr, b"127.0.0.1", 70000) == lib.EXON_E_ARGUMENT
    assert lib.exon_udp_addr_resolve(addr, b"no-such-host.invalid", 1) == lib.EXON_E_ARGUMENT
    ch = ffi.new("exon_udp_channel_t *")
    empty = ffi.new("exon_udp_addr_t *")
    assert lib.exon_udp_channel_open(ch, empty, 0, 0) == lib.EXON_E_ARGUMENT
