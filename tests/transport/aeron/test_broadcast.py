"""The one-to-many broadcast buffer (exon_broadcast.c): catch-up, wrap, lapping."""

from __future__ import annotations

import itertools
import struct
import threading
import time

from exon.native import ffi, lib

TRAILER = lib.EXON_BROADCAST_TRAILER_LENGTH


class Buffer:
    def __init__(self, capacity: int) -> None:
        self.length = capacity + TRAILER
        self._keep = ffi.new("uint64_t[]", self.length // 8)
        self.base = ffi.cast("uint8_t *", self._keep)
        self.tx = ffi.new("exon_broadcast_transmitter_t *")
        assert lib.exon_broadcast_transmitter_init(self.tx, self.base, self.length) == 0

    def send(self, type_: int, data: bytes) -> int:
        return lib.exon_broadcast_transmit(self.tx, type_, data, len(data))

    def receiver(self) -> Receiver:
        return Receiver(self)


class Receiver:
    def __init__(self, buf: Buffer) -> None:
        self.rx = ffi.new("exon_broadcast_receiver_t *")
        assert lib.exon_broadcast_receiver_init(self.rx, buf.base, buf.length) == 0
        self.dst = ffi.new("uint8_t[]", self.rx.max_message_length)
        self.type = ffi.new("int32_t *")
        self.len = ffi.new("int32_t *")

    def receive(self) -> tuple[int, bytes] | None:
        rc = lib.exon_broadcast_receive(
            self.rx, self.type, self.dst, self.rx.max_message_length, self.len
        )
        assert rc >= 0
        if rc == 0:
            return None
        return self.type[0], bytes(ffi.buffer(self.dst, self.len[0]))

    def drain(self, limit: int = 100_000) -> list[tuple[int, bytes]]:
        out = []
        for _ in range(limit):
            got = self.receive()
            if got is None:
                break
            out.append(got)
        return out

    @property
    def lapped(self) -> int:
        return lib.exon_broadcast_receiver_lapped_count(self.rx)


def test_round_trip_and_late_receiver_sees_only_new_messages() -> None:
    buf = Buffer(1024)
    early = buf.receiver()
    assert buf.send(1, b"one") == 0
    late = buf.receiver()
    assert buf.send(2, b"") == 0
    assert buf.send(3, b"three") == 0
    assert early.drain() == [(1, b"one"), (2, b""), (3, b"three")]
    assert late.drain() == [(2, b""), (3, b"three")]
    assert early.receive() is None
    assert early.lapped == 0


def test_bad_arguments() -> None:
    buf = Buffer(1024)
    assert buf.send(0, b"x") == lib.EXON_E_ARGUMENT
    assert buf.send(1, b"x" * (buf.tx.max_message_length + 1)) == lib.EXON_E_MESSAGE_TOO_LARGE
    rx = buf.receiver()
    small = ffi.new("uint8_t[]", 4)
    t, n = ffi.new("int32_t *"), ffi.new("int32_t *")
    assert lib.exon_broadcast_receive(rx.rx, t, small, 4, n) == lib.EXON_E_ARGUMENT
    bad = ffi.new("exon_broadcast_receiver_t *")
    assert lib.exon_broadcast_receiver_init(bad, buf.base, 1000) == lib.EXON_E_ARGUMENT


def test_receivers_keeping_up_see_everything_across_wraps() -> None:
    buf = Buffer(256)  # max payload 24: wraps every few messages
    a, b = buf.receiver(), buf.receiver()
    sent = []
    got_a, got_b = [], []
    for i in range(500):
        data = struct.pack("<i", i) + b"w" * (i % 21)
        assert buf.send(1 + i % 3, data) == 0
        sent.append((1 + i % 3, data))
        got_a += a.drain()
        if i % 2:
            got_b += b.drain()
    got_b += b.drain()
    assert got_a == sent
    assert got_b == sent
    assert a.lapped == 0
    assert b.lapped == 0


def test_lapped_receiver_knows_counts_and_catches_up() -> None:
    buf = Buffer(256)
    rx = buf.receiver()
    for i in range(100):  # far more than 256 bytes behind
        assert buf.send(1, struct.pack("<i", i) + b"x" * 12) == 0
    got = rx.drain()
    assert rx.lapped >= 1
    seqs = [struct.unpack_from("<i", m)[0] for _, m in got]
    assert seqs, "a lapped receiver resumes at the latest message"
    assert seqs[-1] == 99
    assert seqs == sorted(set(seqs))
    assert len(seqs) < 100
    # after catching up it sees everything again
    assert buf.send(2, b"next") == 0
    assert rx.drain() == [(2, b"next")]


def test_zero_copy_level_validate() -> None:
    buf = Buffer(256)
    rx = buf.receiver()
    assert buf.send(5, b"abc") == 0
    assert lib.exon_broadcast_receive_next(rx.rx) == 1
    assert lib.exon_broadcast_receiver_type(rx.rx) == 5
    off = lib.exon_broadcast_receiver_offset(rx.rx)
    n = lib.exon_broadcast_receiver_length(rx.rx)
    assert bytes(ffi.buffer(buf.base + off, n)) == b"abc"
    assert lib.exon_broadcast_receiver_validate(rx.rx)
    for i in range(40):  # overwrite the record we are looking at
        buf.send(1, bytes([i]) * 16)
    assert not lib.exon_broadcast_receiver_validate(rx.rx)


def test_concurrent_transmitter_receivers_never_see_torn_messages() -> None:
    buf = Buffer(1024)
    receivers = [buf.receiver() for _ in range(2)]
    stop = threading.Event()
    results: list[list[int]] = [[] for _ in receivers]
    bad: list[bytes] = []

    def receive(i: int) -> None:
        rx = receivers[i]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            finished = stop.is_set()  # read before receiving: no message can follow it
            got = rx.receive()
            if got is None:
                if finished:
                    return
                continue
            _, m = got
            seq = struct.unpack_from("<i", m)[0]
            if m[4:] != bytes([seq % 251]) * (seq % 100):
                bad.append(m)
            results[i].append(seq)

    threads = [threading.Thread(target=receive, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    total = 20_000
    for seq in range(total):
        assert buf.send(1, struct.pack("<i", seq) + bytes([seq % 251]) * (seq % 100)) == 0
    stop.set()
    for th in threads:
        th.join(timeout=20)
    assert not bad
    for i, seqs in enumerate(results):
        assert seqs, f"receiver {i} got nothing"
        assert all(b > a for a, b in itertools.pairwise(seqs))
        assert seqs[-1] == total - 1
        # every gap is explained by a counted lap
        gaps = sum(1 for a, b in itertools.pairwise(seqs) if b != a + 1)
        assert gaps <= receivers[i].lapped
