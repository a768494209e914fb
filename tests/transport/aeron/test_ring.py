"""The many-to-one ring buffer (exon_ring.c): records, wrap, concurrency, stuck writers."""

from __future__ import annotations

import mmap
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from exon.native import ffi, lib

TRAILER = lib.EXON_RING_TRAILER_LENGTH
REC = struct.Struct("<ii")


class Ring:
    """Test helper: a ring over ``capacity`` bytes of local or mapped memory."""

    def __init__(self, capacity: int, memory=None) -> None:
        length = capacity + TRAILER
        if memory is None:
            self._keep = ffi.new("uint64_t[]", length // 8)
            self.base = ffi.cast("uint8_t *", self._keep)
        else:
            self._keep = memory
            self.base = ffi.cast("uint8_t *", ffi.from_buffer(memory))
        self.ring = ffi.new("exon_ring_t *")
        assert lib.exon_ring_init(self.ring, self.base, length) == 0
        self.capacity = capacity

    def write(self, type_: int, data: bytes) -> int:
        return lib.exon_ring_write(self.ring, type_, data, len(data))

    def read(self, limit: int = 0, dst_size: int = 1 << 16) -> list[tuple[int, bytes]]:
        dst = ffi.new("uint8_t[]", dst_size)
        n = lib.exon_ring_read_copy(self.ring, dst, dst_size, limit)
        return parse(bytes(ffi.buffer(dst, n)))

    def read_all(self) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        for _ in range(100):
            got = self.read()
            if not got and lib.exon_ring_size(self.ring) == 0:
                break
            out += got
        return out


def parse(raw: bytes) -> list[tuple[int, bytes]]:
    out = []
    offset = 0
    while offset < len(raw):
        length, type_ = REC.unpack_from(raw, offset)
        out.append((type_, raw[offset + 8 : offset + length]))
        offset += (length + 7) & ~7
    return out


def test_init_rejects_bad_lengths() -> None:
    ring = ffi.new("exon_ring_t *")
    mem = ffi.new("uint64_t[]", 1024)
    assert lib.exon_ring_init(ring, mem, 1000 + TRAILER) == lib.EXON_E_ARGUMENT
    assert lib.exon_ring_init(ring, mem, 32 + TRAILER) == lib.EXON_E_ARGUMENT
    assert lib.exon_ring_init(ring, mem, 4096 + TRAILER) == 0
    assert ring.max_message_length == 4096 // 8 - 8


def test_write_then_read_in_order_with_types() -> None:
    r = Ring(4096)
    msgs = [(1, b""), (2, b"a"), (3, b"hello world"), (7, bytes(range(100)))]
    for t, m in msgs:
        assert r.write(t, m) == 0
    assert lib.exon_ring_size(r.ring) == sum((len(m) + 8 + 7) & ~7 for _, m in msgs)
    assert r.read() == msgs
    assert r.read() == []
    assert lib.exon_ring_size(r.ring) == 0
    assert lib.exon_ring_consumer_position(r.ring) == lib.exon_ring_producer_position(r.ring)


def test_read_limit_and_small_destination_leave_records_for_later() -> None:
    r = Ring(4096)
    for i in range(5):
        assert r.write(1, bytes([i]) * 20) == 0
    assert [m[0] for _, m in r.read(limit=2)] == [0, 1]
    assert [m[0] for _, m in r.read(dst_size=40)] == [2]  # one 28 -> 32-byte record fits
    assert [m[0] for _, m in r.read()] == [3, 4]


def test_bad_arguments_and_too_large_and_full() -> None:
    r = Ring(1024)
    assert r.write(0, b"x") == lib.EXON_E_ARGUMENT
    assert r.write(-1, b"x") == lib.EXON_E_ARGUMENT
    assert r.write(1, b"x" * (r.ring.max_message_length + 1)) == lib.EXON_E_MESSAGE_TOO_LARGE
    assert r.write(1, b"x" * r.ring.max_message_length) == 0
    written = 1
    while r.write(1, b"y" * 100) == 0:
        written += 1
        assert written < 100
    assert r.write(1, b"y" * 100) == lib.EXON_E_FULL
    assert len(r.read_all()) == written
    assert r.write(1, b"y" * 100) == 0


def test_try_claim_commit_and_abort() -> None:
    r = Ring(1024)
    off = lib.exon_ring_try_claim(r.ring, 5, 4)
    assert off >= 8
    ffi.buffer(lib.exon_ring_payload(r.ring, off), 4)[:] = b"abcd"
    assert r.read() == []  # not committed: invisible
    assert lib.exon_ring_commit(r.ring, off) == 0
    assert lib.exon_ring_commit(r.ring, off) == lib.EXON_E_ARGUMENT  # already committed
    off2 = lib.exon_ring_try_claim(r.ring, 6, 10)
    assert lib.exon_ring_abort(r.ring, off2) == 0
    assert r.write(7, b"z") == 0
    assert r.read() == [(5, b"abcd"), (7, b"z")]


def test_batch_iterator_api() -> None:
    r = Ring(1024)
    for i in range(3):
        r.write(10 + i, bytes([i]) * (i + 1))
    batch = ffi.new("exon_ring_batch_t *")
    t, o, n = ffi.new("int32_t *"), ffi.new("int32_t *"), ffi.new("int32_t *")
    lib.exon_ring_read_begin(r.ring, batch, 0)
    seen = []
    while lib.exon_ring_read_next(r.ring, batch, t, o, n) == 1:
        seen.append((t[0], bytes(ffi.buffer(r.base + o[0], n[0]))))
    assert seen == [(10, b"\x00"), (11, b"\x01\x01"), (12, b"\x02\x02\x02")]
    consumed = lib.exon_ring_read_end(r.ring, batch)
    assert consumed == 3 * 16
    assert lib.exon_ring_size(r.ring) == 0


def test_wrap_inserts_padding_and_keeps_order() -> None:
    r = Ring(256)
    expected = []
    got = []
    for round_ in range(200):
        size = (round_ * 7) % 21  # max payload of a 256-byte ring is 24
        data = round_.to_bytes(4, "little") + b"p" * size
        for _ in range(3):
            if (rc := r.write(1, data)) == 0:
                break
            assert rc == lib.EXON_E_FULL
            got += r.read()
        assert rc == 0
        expected.append(data)
        if round_ % 3 == 0:
            got += r.read(limit=1)
    got += r.read_all()
    assert [m for _, m in got] == expected
    assert all(t == 1 for t, _ in got)  # padding never surfaces
    assert lib.exon_ring_producer_position(r.ring) > 10 * 256  # it wrapped many times


def test_correlation_ids_unique_across_threads() -> None:
    r = Ring(1024)
    out: list[list[int]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        out[i] = [lib.exon_ring_next_correlation_id(r.ring) for _ in range(2000)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=20)
    ids = [x for ids in out for x in ids]
    assert len(ids) == 8000
    assert len(set(ids)) == 8000


def test_consumer_heartbeat_round_trip() -> None:
    r = Ring(1024)
    assert lib.exon_ring_consumer_heartbeat_time(r.ring) == 0
    lib.exon_ring_set_consumer_heartbeat_time(r.ring, 1234567)
    assert lib.exon_ring_consumer_heartbeat_time(r.ring) == 1234567


def _check_per_writer_order(records: list[tuple[int, bytes]], writers: int, count: int) -> None:
    next_seq = {w: 0 for w in range(writers)}
    for type_, payload in records:
        w, seq = struct.unpack_from("<ii", payload)
        assert type_ == 100 + w
        assert seq == next_seq[w], f"writer {w}: got {seq}, expected {next_seq[w]}"
        assert payload[8:] == bytes([w]) * (seq % 50)
        next_seq[w] += 1
    assert next_seq == {w: count for w in range(writers)}


def test_many_writer_threads_every_record_once_in_per_writer_order() -> None:
    r = Ring(4096)
    writers, count = 4, 3000
    deadline = time.monotonic() + 20
    errors: list[str] = []

    def writer(w: int) -> None:
        for seq in range(count):
            data = struct.pack("<ii", w, seq) + bytes([w]) * (seq % 50)
            while (rc := r.write(100 + w, data)) == lib.EXON_E_FULL:
                if time.monotonic() > deadline:
                    errors.append(f"writer {w} timed out")
                    return
            if rc != 0:
                errors.append(f"writer {w}: rc {rc}")
                return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for th in threads:
        th.start()
    records: list[tuple[int, bytes]] = []
    while len(records) < writers * count and time.monotonic() < deadline:
        records += r.read()
    for th in threads:
        th.join(timeout=5)
    assert not errors
    _check_per_writer_order(records, writers, count)


WRITER_SCRIPT = r"""
import mmap, struct, sys, time
from exon.native import ffi, lib
path, w, count, capacity = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(path, "r+b") as f:
    mem = mmap.mmap(f.fileno(), 0)
ring = ffi.new("exon_ring_t *")
assert lib.exon_ring_init(ring, ffi.from_buffer(mem), len(mem)) == 0
deadline = time.monotonic() + 20
for seq in range(count):
    data = struct.pack("<ii", w, seq) + bytes([w]) * (seq % 50)
    while (rc := lib.exon_ring_write(ring, 100 + w, data, len(data))) == lib.EXON_E_FULL:
        if time.monotonic() > deadline:
            sys.exit(3)
    if rc != 0:
        sys.exit(4)
"""


def test_two_writer_processes_every_record_once_in_per_writer_order(tmp_path: Path) -> None:
    capacity, count = 8192, 2000
    path = tmp_path / "ring.dat"
    path.write_bytes(bytes(capacity + TRAILER))
    with path.open("r+b") as f:
        mem = mmap.mmap(f.fileno(), 0)
    r = Ring(capacity, memory=mem)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER_SCRIPT, str(path), str(w), str(count), str(capacity)],
            cwd=Path(__file__).resolve().parents[3],
        )
        for w in range(2)
    ]
    records: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while len(records) < 2 * count and time.monotonic() < deadline:
            got = r.read()
            records += got
            if not got:
                time.sleep(0.0005)
        for p in procs:
            assert p.wait(timeout=10) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
    _check_per_writer_order(records, 2, count)
    del r
    mem.close()


def test_writer_dead_mid_claim_is_unblocked_after_timeout() -> None:
    r = Ring(1024)
    assert r.write(1, b"before") == 0
    dead = lib.exon_ring_try_claim(r.ring, 2, 30)  # a writer that dies before commit
    assert dead > 0
    assert r.write(3, b"after") == 0
    assert r.read() == [(1, b"before")]
    assert r.read() == []  # stuck behind the in-progress record

    timeout = 1_000_000_000
    assert lib.exon_ring_check_unblock(r.ring, 10, timeout) == 0  # timer starts
    assert lib.exon_ring_check_unblock(r.ring, 10 + timeout // 2, timeout) == 0
    assert r.read() == []
    assert lib.exon_ring_check_unblock(r.ring, 10 + timeout + 1, timeout) == 1
    assert r.read() == [(3, b"after")]
    assert lib.exon_ring_size(r.ring) == 0


def test_writer_dead_between_cas_and_header_is_unblocked() -> None:
    r = Ring(1024)
    tail = ffi.cast("int64_t *", r.base + 1024 + lib.EXON_RING_TAIL_POSITION_OFFSET)
    tail[0] += 24  # a claim whose header was never written
    assert r.write(3, b"after") == 0
    assert r.read() == []
    assert lib.exon_ring_check_unblock(r.ring, 0, 100) == 0
    assert lib.exon_ring_check_unblock(r.ring, 101, 100) == 1
    assert r.read() == [(3, b"after")]


def test_progress_resets_the_unblock_timer() -> None:
    r = Ring(1024)
    assert lib.exon_ring_check_unblock(r.ring, 0, 100) == 0
    r.write(1, b"x")
    assert lib.exon_ring_check_unblock(r.ring, 50, 100) == 0  # pending, timer from 50
    r.read()
    off = lib.exon_ring_try_claim(r.ring, 1, 1)  # slow but alive writer
    assert lib.exon_ring_check_unblock(r.ring, 120, 100) == 0  # head moved at 120: restart
    assert lib.exon_ring_commit(r.ring, off) == 0
    assert r.read() == [(1, b"\x00")]


@pytest.mark.parametrize("capacity", [128, 256, 1024])
def test_max_message_fits_at_any_position(capacity: int) -> None:
    r = Ring(capacity)
    big = b"m" * r.ring.max_message_length
    for i in range(20):
        assert r.write(1, b"s" * (i % 5)) == 0
        assert r.write(2, big) == 0
        assert r.read_all() == [(1, b"s" * (i % 5)), (2, big)]


DYING_WRITER = r"""
import mmap, os, sys
from exon.native import ffi, lib
with open(sys.argv[1], "r+b") as f:
    mem = mmap.mmap(f.fileno(), 0)
ring = ffi.new("exon_ring_t *")
assert lib.exon_ring_init(ring, ffi.from_buffer(mem), len(mem)) == 0
assert lib.exon_ring_try_claim(ring, 9, 40) > 0
os._exit(0)  # dies holding the claim: its record keeps a negative length
"""


def test_writer_process_dying_mid_claim_is_unblocked(tmp_path: Path) -> None:
    path = tmp_path / "ring.dat"
    path.write_bytes(bytes(1024 + TRAILER))
    with path.open("r+b") as f:
        mem = mmap.mmap(f.fileno(), 0)
    r = Ring(1024, memory=mem)
    proc = subprocess.run(
        [sys.executable, "-c", DYING_WRITER, str(path)],
        cwd=Path(__file__).resolve().parents[3],
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0
    length = ffi.cast("int32_t *", r.base)[0]
    assert length == -(40 + 8)  # in progress, forever
    assert r.write(1, b"survivor") == 0
    assert r.read() == []
    assert lib.exon_ring_check_unblock(r.ring, 1_000, 5_000) == 0
    assert lib.exon_ring_check_unblock(r.ring, 7_000, 5_000) == 1
    assert r.read() == [(1, b"survivor")]
    del r
    mem.close()
