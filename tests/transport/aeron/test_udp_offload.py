"""UDP segmentation offload (issue 11): GSO sends, GRO receives, the splitter, the fallback.

The wire must not change: a GSO send of a run of datagrams arrives, at a plain socket, as
exactly the datagrams a plain sendmmsg would have sent. A GRO buffer splits back into them.
"""

from __future__ import annotations

import os
import socket
import time
from contextlib import ExitStack

import pytest

from exon.native import check, ffi, lib
from exon.transport.aeron.counters import SystemCounter
from tests.transport.aeron.driver_fixtures import wait_until
from tests.transport.aeron.test_udp import STREAM, connect, launch, payload, pump

pytestmark = pytest.mark.net

SO_NO_CHECK = getattr(socket, "SO_NO_CHECK", 11)


# ---- the splitter (pure) ---------------------------------------------------------------


def _split(length: int, segment_size: int, *, truncated: bool = False) -> tuple[int, int, int, int]:
    msg = ffi.new("exon_udp_msg_t *")
    msg.length = length
    msg.segment_size = segment_size
    msg.truncated = truncated
    out = ffi.new("exon_udp_segments_t *")
    lib.exon_udp_msg_split(msg, out)
    return out.count, out.segment_size, out.last_length, out.dropped


@pytest.mark.parametrize(
    ("length", "segment_size", "truncated", "expected"),
    [
        (1056, 0, False, (1, 1056, 1056, 0)),  # no GRO: one datagram
        (1056, 0, True, (0, 1056, 1056, 1)),  # a cut datagram: dropped, counted
        (3 * 1056, 1056, False, (3, 1056, 1056, 0)),  # whole segments
        (5 * 1056 + 96, 1056, False, (6, 1056, 96, 0)),  # odd count, short last segment
        (1, 1056, False, (1, 1, 1, 0)),  # segment size above the length
        (1056, 1056, False, (1, 1056, 1056, 0)),
        (4000, 1056, True, (3, 1056, 1056, 1)),  # cut buffer: whole ones pass, tail dropped
        (2112, 1056, True, (2, 1056, 1056, 1)),  # cut exactly at a boundary: still a drop
        (0, 1056, False, (1, 0, 0, 0)),  # an empty datagram stays one
        (64, -5, False, (1, 64, 64, 0)),  # nonsense size: one datagram
        (65535, 1, False, (65535, 1, 1, 0)),  # tiny segments: counted, not capped
    ],
)
def test_split_cuts_a_buffer_into_its_datagrams(
    length: int, segment_size: int, truncated: bool, expected: tuple[int, int, int, int]
) -> None:
    count, size, last, dropped = _split(length, segment_size, truncated=truncated)
    assert (count, size, last, dropped) == expected
    if count and not truncated:
        assert (count - 1) * size + last == max(length, 0)


# ---- real sockets on loopback --------------------------------------------------------


def _addr(host: str, port: int):
    addr = ffi.new("exon_udp_addr_t *")
    check(lib.exon_udp_addr_resolve(addr, host.encode(), port))
    return addr


@pytest.fixture
def sender():
    ch = ffi.new("exon_udp_channel_t *")
    check(lib.exon_udp_channel_open(ch, _addr("127.0.0.1", 0), 0, 1024 * 1024))
    yield ch
    lib.exon_udp_channel_close(ch)


@pytest.fixture
def receiver():
    ch = ffi.new("exon_udp_channel_t *")
    check(lib.exon_udp_channel_open(ch, _addr("127.0.0.1", 0), 4 * 1024 * 1024, 0))
    yield ch
    lib.exon_udp_channel_close(ch)


def _gso(ch) -> None:
    if not lib.exon_udp_channel_enable_gso(ch):
        pytest.skip("this kernel has no UDP GSO (UDP_SEGMENT): the fallback path is the only one")


def _gro(ch) -> None:
    if not lib.exon_udp_channel_enable_gro(ch):
        pytest.skip("this kernel has no UDP GRO: the fallback path is the only one")


def _datagrams(lengths: list[int]) -> list[bytes]:
    return [bytes([i & 0xFF]) * n for i, n in enumerate(lengths)]


def _send(ch, to_port: int, datagrams: list[bytes]) -> int:
    """send_batch all of them (one call while the kernel takes them); returns datagrams sent."""
    msgs = ffi.new("exon_udp_msg_t[]", len(datagrams))
    keep = []
    to = _addr("127.0.0.1", to_port)
    for m, d in zip(msgs, datagrams, strict=True):
        buf = ffi.from_buffer(d)
        keep.append(buf)
        m.buffer = ffi.cast("uint8_t *", buf)
        m.length = len(d)
        m.addr = to[0]
    sent = 0
    deadline = time.monotonic() + 5.0
    while sent < len(datagrams) and time.monotonic() < deadline:
        sent += check(lib.exon_udp_channel_send_batch(ch, msgs + sent, len(datagrams) - sent))
    return sent


def _recv_split(ch, want: int, capacity: int = 65536, timeout: float = 5.0):
    """Datagrams received (split per GRO segment), the messages they came in, and drops."""
    msgs = ffi.new("exon_udp_msg_t[]", 16)
    buffers = [ffi.new("uint8_t[]", capacity) for _ in range(16)]
    for m, b in zip(msgs, buffers, strict=True):
        m.buffer = b
        m.capacity = capacity
    got: list[bytes] = []
    segment_sizes: list[int] = []
    dropped = 0
    out = ffi.new("exon_udp_segments_t *")
    deadline = time.monotonic() + timeout
    while len(got) + dropped < want and time.monotonic() < deadline:
        n = check(lib.exon_udp_channel_recv_batch(ch, msgs, 16))
        for i in range(n):
            m = msgs[i]
            segment_sizes.append(m.segment_size)
            lib.exon_udp_msg_split(msgs + i, out)
            dropped += out.dropped
            for k in range(out.count):
                length = out.last_length if k + 1 == out.count else out.segment_size
                got.append(bytes(ffi.buffer(m.buffer + k * out.segment_size, length)))
        if n == 0:
            time.sleep(0.001)
    return got, segment_sizes, dropped


# runs of equal lengths, a shorter tail on a run, lone datagrams, more than 64 in a row
LENGTHS = [1056] * 10 + [500] + [1056] * 3 + [32, 32, 64, 1408] + [1056] * 70 + [96]


def test_gso_send_arrives_as_the_same_datagrams_at_a_plain_socket(sender) -> None:
    _gso(sender)
    plain = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    plain.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    plain.bind(("127.0.0.1", 0))
    plain.settimeout(5.0)
    try:
        datagrams = _datagrams(LENGTHS)
        assert _send(sender, plain.getsockname()[1], datagrams) == len(datagrams)
        got = [plain.recv(65536) for _ in datagrams]
    finally:
        plain.close()
    assert got == datagrams
    assert sender.gso  # nothing forced it off
    assert sender.gso_fallbacks == 0


def test_gro_receive_splits_back_into_the_sent_datagrams(sender, receiver) -> None:
    _gso(sender)
    _gro(receiver)
    datagrams = _datagrams(LENGTHS)
    assert _send(sender, lib.exon_udp_channel_local_port(receiver), datagrams) == len(datagrams)
    got, segment_sizes, dropped = _recv_split(receiver, len(datagrams))
    assert dropped == 0
    assert got == datagrams
    # on loopback a GSO run reaches a GRO socket whole: fewer messages than datagrams
    assert any(size > 0 for size in segment_sizes)
    assert len(segment_sizes) < len(datagrams)


def test_gro_receive_into_a_short_buffer_counts_the_cut_tail(sender, receiver) -> None:
    _gso(sender)
    _gro(receiver)
    datagrams = _datagrams([1056] * 10)
    assert _send(sender, lib.exon_udp_channel_local_port(receiver), datagrams) == 10
    got, segment_sizes, dropped = _recv_split(receiver, 10, capacity=4000, timeout=0.5)
    assert segment_sizes  # something arrived
    # every whole datagram that fit is intact; the rest are one counted drop per buffer
    assert len(set(got)) == len(got)
    assert all(d in datagrams for d in got)
    assert dropped >= 1
    assert len(got) < 10


def test_gso_refused_at_send_time_falls_back_for_good(sender, receiver) -> None:
    """SO_NO_CHECK makes the kernel refuse GSO sends (EINVAL) while plain ones pass: the
    batch is resent plainly, nothing is lost and GSO stays off for the channel."""
    _gso(sender)
    probe = socket.socket(fileno=os.dup(sender.fd))
    try:
        probe.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
    finally:
        probe.close()
    datagrams = _datagrams(LENGTHS)
    assert _send(sender, lib.exon_udp_channel_local_port(receiver), datagrams) == len(datagrams)
    got, _, dropped = _recv_split(receiver, len(datagrams))
    assert dropped == 0
    assert got == datagrams
    assert not sender.gso
    assert sender.gso_fallbacks == 1


def test_without_offload_every_message_is_one_datagram(sender, receiver) -> None:
    assert not sender.gso  # off until asked for
    assert not receiver.gro
    datagrams = _datagrams(LENGTHS)
    assert _send(sender, lib.exon_udp_channel_local_port(receiver), datagrams) == len(datagrams)
    got, segment_sizes, dropped = _recv_split(receiver, len(datagrams))
    assert (got, dropped) == (datagrams, 0)
    assert segment_sizes == [0] * len(datagrams)


# ---- two drivers, each combination of the driver settings ---------------------------


@pytest.mark.parametrize(
    ("gso", "gro"), [(True, True), (False, False), (True, False), (False, True)]
)
def test_two_drivers_deliver_everything_with_and_without_offload(gso: bool, gro: bool) -> None:
    """udp_gso / udp_gro off is the fallback a kernel without them gets; every mix of the
    two ends delivers every message, and the byte counters match across the wire."""
    with ExitStack() as stack:
        # a window the default receive buffer holds: no kernel drops, so bytes match exactly
        _, rx = launch(
            stack,
            udp_gso=gso,
            udp_gro=gro,
            term_buffer_length=1024 * 1024,
            initial_window_length=32 * 1024,
        )
        _, tx = launch(stack, udp_gso=gso, udp_gro=gro, term_buffer_length=1024 * 1024)
        sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
        port = int(sub.bound_endpoint.rsplit(":", 1)[1])
        pub = tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{port}", STREAM)
        connect(pub)
        assert wait_until(lambda: sub.image_count == 1)
        # uniform 1 KiB messages (full runs of equal datagrams), then mixed sizes
        messages = [i.to_bytes(4, "little") * 256 for i in range(2000)]
        messages += [payload(i) for i in range(350)]
        assert pump(pub, sub, messages) == messages
        assert rx.counter_value(SystemCounter.INVALID_PACKETS) == 0
        assert rx.counter_value(SystemCounter.NAK_MESSAGES_SENT) == 0
        # every byte the publication sent was counted received, datagram by datagram
        assert wait_until(
            lambda: (
                tx.counter_value(SystemCounter.BYTES_SENT)
                == rx.counter_value(SystemCounter.BYTES_RECEIVED)
            ),
            2.0,
        )


@pytest.mark.parametrize("offload", [True, False])
def test_resends_under_loss_deliver_everything(offload: bool) -> None:
    """Resends go as batches too (GSO runs where on): with 5% of data dropped at the
    receiver, every message still arrives in order."""
    with ExitStack() as stack:
        _, rx = launch(
            stack, udp_gso=offload, udp_gro=offload, receive_loss_rate=0.05, receive_loss_seed=7
        )
        _, tx = launch(stack, udp_gso=offload, udp_gro=offload)
        sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
        port = int(sub.bound_endpoint.rsplit(":", 1)[1])
        pub = tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{port}", STREAM)
        connect(pub)
        assert wait_until(lambda: sub.image_count == 1)
        messages = [i.to_bytes(4, "little") * 256 for i in range(3000)]
        assert pump(pub, sub, messages) == messages
        assert tx.counter_value(SystemCounter.RETRANSMITS_SENT) > 0
        assert rx.counter_value(SystemCounter.INVALID_PACKETS) == 0


def _udp_sockets_of_this_process() -> list[int]:
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            probe = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if probe.family == socket.AF_INET and probe.type == socket.SOCK_DGRAM:
                fds.append(int(name))
        finally:
            probe.close()
    return fds


def test_a_driver_whose_gso_send_is_refused_falls_back_and_counts_it() -> None:
    """The kernel refuses the publication's GSO sends (SO_NO_CHECK on its socket, EINVAL):
    the driver resends plainly, counts one fallback, and every message arrives."""
    probe_channel = ffi.new("exon_udp_channel_t *")
    check(lib.exon_udp_channel_open(probe_channel, _addr("127.0.0.1", 0), 0, 0))
    try:
        _gso(probe_channel)
    finally:
        lib.exon_udp_channel_close(probe_channel)
    with ExitStack() as stack:
        _, rx = launch(stack, initial_window_length=32 * 1024)
        _, tx = launch(stack)
        sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
        port = int(sub.bound_endpoint.rsplit(":", 1)[1])
        pub = tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{port}", STREAM)
        connect(pub)
        assert wait_until(lambda: sub.image_count == 1)
        for fd in _udp_sockets_of_this_process():  # both drivers run in this process
            probe = socket.socket(fileno=os.dup(fd))
            try:
                probe.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
            finally:
                probe.close()
        messages = [i.to_bytes(4, "little") * 256 for i in range(2000)]
        assert pump(pub, sub, messages) == messages
        assert tx.counter_value(SystemCounter.UDP_GSO_FALLBACKS) == 1
        assert rx.counter_value(SystemCounter.UDP_GSO_FALLBACKS) == 0
        assert rx.counter_value(SystemCounter.INVALID_PACKETS) == 0
