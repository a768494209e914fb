"""Publications: positions, outcomes, back pressure, claims, concurrency (threads, processes)."""

from __future__ import annotations

import mmap
import os
import struct
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from exon import errors
from exon.native import ffi
from exon.transport.aeron import layout as L
from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import (
    ADMIN_ACTION,
    BACK_PRESSURED,
    CLOSED,
    MAX_POSITION_EXCEEDED,
    NOT_CONNECTED,
    ClaimRefused,
    ExclusivePublication,
    Publication,
)

TERM = 64 * 1024


@pytest.fixture
def log(tmp_path):
    lb = LogBuffer.create(tmp_path / "1.logbuffer", term_length=TERM, mtu=1408, session_id=7,
                          stream_id=9, initial_term_id=100, is_connected=True)
    yield lb
    lb.close()


def test_offer_returns_aligned_positions(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    assert pub.offer(b"") == 32
    assert pub.offer(b"a") == 96
    assert pub.offer(bytearray(b"b" * 32)) == 160
    assert pub.offer(memoryview(b"c" * 33)) == 160 + 96
    assert pub.position == 256
    term = log.term_buffer(0)
    hdr = L.DATA_HEADER.unpack_from(term, 32)
    assert hdr == (33, 0, 0xC0, L.HDR_TYPE_DATA, 32, 7, 9, 100, 0)
    assert bytes(term[64:65]) == b"a"


@pytest.mark.parametrize("cls", [Publication, ExclusivePublication])
def test_fragmented_message_frames(log: LogBuffer, cls) -> None:
    pub = cls.standalone(log)
    payload = bytes(range(256)) * 12  # 3072 bytes: 1376 + 1376 + 320
    assert pub.offer(payload, reserved_value=5) == 1408 + 1408 + 352
    term = log.term_buffer(0)
    flags = [L.DATA_HEADER.unpack_from(term, off)[2] for off in (0, 1408, 2816)]
    assert flags == [0x80, 0x00, 0x40]
    lengths = [L.DATA_HEADER.unpack_from(term, off)[0] for off in (0, 1408, 2816)]
    assert lengths == [1408, 1408, 352]
    assert all(L.DATA_HEADER.unpack_from(term, off)[8] == 5 for off in (0, 1408, 2816))
    joined = bytes(term[32:1408]) + bytes(term[1440:2816]) + bytes(term[2848:3168])
    assert joined == payload


def test_message_too_large_raises_and_leaves_log_intact(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    pub.offer(b"before")
    snapshot = [bytes(log.term_buffer(i)) for i in range(3)]
    tails = list(log.meta.term_tail_counters)
    with pytest.raises(errors.MessageTooLarge, match="maximum message length"):
        pub.offer(b"x" * (pub.max_message_length + 1))
    with pytest.raises(errors.MessageTooLarge):
        pub.offer2(b"x" * pub.max_message_length, b"y")
    with pytest.raises(errors.MessageTooLarge):
        pub.try_claim(pub.max_payload_length + 1)
    assert [bytes(log.term_buffer(i)) for i in range(3)] == snapshot
    assert list(log.meta.term_tail_counters) == tails
    assert pub.offer(b"x" * pub.max_message_length) > 0  # the maximum itself is fine


def test_slow_subscriber_back_pressures_and_is_never_overwritten(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    sent = []
    seq = 0
    # The subscriber never polls: the publisher must stop at the limit (half a term).
    while True:
        rc = pub.offer(struct.pack("<I", seq) * 50)
        if rc == BACK_PRESSURED:
            break
        assert rc > 0
        sent.append(seq)
        seq += 1
        assert seq < 10_000
    assert pub.position >= pub.position_limit
    assert pub.position < pub.position_limit + pub.max_message_length
    assert pub.offer(b"more") == BACK_PRESSURED  # stays refused, nothing overwritten
    # Now the subscriber catches up; the driver raises the limit; all data is intact.
    got = [struct.unpack_from("<I", m)[0] for m in img.poll_messages(10_000)]
    assert got == sent
    log.update_limit(pub._limit, img.position)
    assert pub.offer(b"after") > 0
    assert img.poll_messages() == [b"after"]


def test_not_connected_when_limit_reached_and_no_subscriber(tmp_path) -> None:
    with LogBuffer.create(tmp_path / "2.logbuffer", term_length=TERM) as lb:
        pub = Publication.standalone(lb, limit=0)
        assert not pub.is_connected
        assert pub.offer(b"x") == NOT_CONNECTED
        lb.is_connected = True
        assert pub.offer(b"x") == BACK_PRESSURED
        pub.position_limit = 1024
        assert pub.offer(b"x") == 64


def test_closed_publication(log: LogBuffer) -> None:
    closed = []
    pub = Publication(log, ffi.new("int64_t[1]", [TERM]), on_close=closed.append)
    pub.close()
    pub.close()
    assert closed == [pub]
    assert pub.offer(b"x") == CLOSED
    assert pub.is_closed
    assert not pub.is_connected
    with pytest.raises(errors.ClosedError):
        pub.try_claim(8)


def test_try_claim_commit_abort_and_exception(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    with pub.try_claim(5) as buf:
        buf[:] = b"hello"
    claim = pub.try_claim(3)
    claim.buffer[:] = b"bad"
    claim.abort()
    with pytest.raises(errors.StateError):
        claim.commit()
    def half_write() -> None:
        with pub.try_claim(4) as buf:
            buf[:2] = b"ha"
            raise ValueError("half written")

    with pytest.raises(ValueError, match="half"):
        half_write()
    claim = pub.try_claim(2)
    claim.set_reserved_value(77)
    claim.buffer[:] = b"ok"
    assert claim.commit() == pub.position
    headers = []
    n = img.poll(lambda data, h: headers.append((data, h.reserved_value)), 10)
    assert n == 2
    assert headers == [(b"hello", 0), (b"ok", 77)]
    # aborted frames are PAD in the log
    assert L.FRAME_HEADER.unpack_from(log.term_buffer(0), 64)[3] == L.HDR_TYPE_PAD


def test_try_claim_refused_when_back_pressured(log: LogBuffer) -> None:
    pub = Publication.standalone(log, limit=0)
    with pytest.raises(ClaimRefused) as info:
        pub.try_claim(8)
    assert info.value.code == BACK_PRESSURED
    assert isinstance(info.value, errors.BackPressured)


def test_offer2_joins_pieces(log: LogBuffer) -> None:
    pub = ExclusivePublication.standalone(log)
    img = Image.standalone(log)
    big = bytes(range(256)) * 20
    pub.offer2(b"head", b"body")
    pub.offer2(b"", big)
    pub.offer2(big[:1000], bytearray(big))
    pub.offer2(memoryview(b"x" * 3000), b"")
    assert img.poll_messages() == [b"headbody", big, big[:1000] + big, b"x" * 3000]


@pytest.mark.parametrize("cls", [Publication, ExclusivePublication])
def test_rotation_pads_term_end_and_returns_admin_action(log: LogBuffer, cls) -> None:
    pub = cls.standalone(log, limit=10 * TERM)
    msg = b"m" * 1000  # frames of 1056 bytes: 62 fit in a term, then a pad
    outcomes = []
    for _ in range(70):
        outcomes.append(pub.offer(msg))
    assert outcomes[:62] == [1056 * (i + 1) for i in range(62)]
    assert outcomes[62] == ADMIN_ACTION
    assert outcomes[63] == TERM + 1056
    pad = L.FRAME_HEADER.unpack_from(log.term_buffer(0), 62 * 1056)
    assert pad[0] == TERM - 62 * 1056
    assert pad[3] == L.HDR_TYPE_PAD
    assert log.active_term_count == 1
    assert log.meta.term_tail_counters[1] >> 32 == 101


def test_two_threads_offer_concurrently(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    per_thread = 3000
    lock = threading.Lock()

    def writer(tid: int) -> None:
        for seq in range(per_thread):
            size = 8 + (seq * 37) % 2500  # some fragmented
            data = struct.pack("<II", tid, seq) + bytes([seq % 251]) * (size - 8)
            end = time.monotonic() + 10
            while True:
                rc = pub.offer(data)
                if rc > 0:
                    break
                assert rc in (BACK_PRESSURED, ADMIN_ACTION)
                assert time.monotonic() < end
                time.sleep(0)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    seen: dict[int, list[int]] = {0: [], 1: []}
    end = time.monotonic() + 20
    while sum(len(v) for v in seen.values()) < 2 * per_thread:
        for m in img.poll_messages(256):
            tid, seq = struct.unpack_from("<II", m)
            assert len(m) == 8 + (seq * 37) % 2500
            assert m[8:] == bytes([seq % 251]) * (len(m) - 8)
            seen[tid].append(seq)
        with lock:
            log.update_limit(pub._limit, img.position)
        assert time.monotonic() < end, "timed out"
    for t in threads:
        t.join(5)
    assert seen == {0: list(range(per_thread)), 1: list(range(per_thread))}


CHILD = textwrap.dedent(
    """
    import mmap, struct, sys, time
    from exon.native import ffi
    from exon.transport.aeron.logbuffer import LogBuffer
    from exon.transport.aeron.publication import Publication, BACK_PRESSURED, ADMIN_ACTION
    log_path, counters_path = sys.argv[1], sys.argv[2]
    writer, count = int(sys.argv[3]), int(sys.argv[4])
    log = LogBuffer.open(log_path)
    with open(counters_path, "r+b") as f:
        counters = mmap.mmap(f.fileno(), 4096)
    limit = ffi.cast("int64_t *", ffi.from_buffer(counters))
    pub = Publication(log, limit)
    end = time.monotonic() + 20
    for seq in range(count):
        size = 8 + (seq * 53) % 3000
        data = struct.pack("<II", writer, seq) + bytes([(seq + writer) % 251]) * (size - 8)
        while True:
            rc = pub.offer(data)
            if rc > 0:
                break
            if rc not in (BACK_PRESSURED, ADMIN_ACTION):
                sys.exit(f"offer failed: {rc}")
            if time.monotonic() > end:
                sys.exit("timed out")
            time.sleep(0)
    """
)


def test_two_processes_offer_concurrently(log: LogBuffer, tmp_path) -> None:
    counters_path = tmp_path / "counters"
    counters_path.write_bytes(bytes(4096))
    with open(counters_path, "r+b") as f:
        counters = mmap.mmap(f.fileno(), 4096)
    limit = ffi.cast("int64_t *", ffi.from_buffer(counters))
    img = Image.standalone(log)
    log.update_limit(limit, 0)
    per_child = 2000
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, log.path, str(counters_path), str(w),
                          str(per_child)], env=env)
        for w in range(2)
    ]
    try:
        seen: dict[int, list[int]] = {0: [], 1: []}
        end = time.monotonic() + 40
        while sum(len(v) for v in seen.values()) < 2 * per_child:
            for m in img.poll_messages(256):
                writer, seq = struct.unpack_from("<II", m)
                assert len(m) == 8 + (seq * 53) % 3000
                assert m[8:] == bytes([(seq + writer) % 251]) * (len(m) - 8)
                seen[writer].append(seq)
            log.update_limit(limit, img.position)
            if time.monotonic() > end:
                pytest.fail(f"timed out: {[len(v) for v in seen.values()]}")
            if all(p.poll() is not None for p in procs) and not img.available:
                break
            time.sleep(0.0005)
        assert [p.wait(10) for p in procs] == [0, 0]
        assert seen == {0: list(range(per_child)), 1: list(range(per_child))}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        del limit


@pytest.mark.parametrize("cls", [Publication, ExclusivePublication])
def test_offer_at_the_end_of_the_position_space_is_max_position_exceeded(log, cls) -> None:
    # Put the log in its last term (term count 2^31 - 1), one frame short of the end of the
    # stream's position space (term_length << 31), as if it had been written that far.
    last_term_count = 2**31 - 1
    index = last_term_count % L.LOG_PARTITION_COUNT
    term_id = (log.initial_term_id + last_term_count) & 0xFFFFFFFF
    offset = TERM - 64
    meta = log.meta
    meta.active_term_count = last_term_count
    raw_tail = struct.unpack("<q", struct.pack("<Q", (term_id << 32) | offset))[0]
    meta.term_tail_counters[index] = raw_tail
    position = (last_term_count << (TERM.bit_length() - 1)) + offset
    pub = cls.standalone(log, limit=position)
    assert pub.position == position
    assert pub.offer(b"m" * 100) == MAX_POSITION_EXCEEDED
    assert pub.position == position  # nothing was written


AFTER_CLOSE = textwrap.dedent(
    """
    import sys
    from exon.transport.aeron.image import Image
    from exon.transport.aeron.logbuffer import LogBuffer
    from exon.transport.aeron.publication import CLOSED, Publication
    log = LogBuffer.create(sys.argv[1], term_length=64 * 1024, is_connected=True)
    pub = Publication.standalone(log, owns_log=True)
    reader = Image.standalone(LogBuffer.open(sys.argv[1]), owns_log=True)
    assert pub.offer(b"before") > 0
    at_close = pub.position
    claim = pub.try_claim(5)
    pub.close()  # owns the log: unmaps it, but only once the open claim is done
    assert not pub.log.closed
    claim.buffer[:] = b"after"  # the claim's frame is still mapped memory
    claim.commit()
    assert pub.log.closed  # the last use out unmapped it
    assert pub.position == at_close + 64  # where it stopped, read before the unmap
    assert pub.offer2(b"a", b"b") == CLOSED
    assert not pub.is_connected
    print(repr(pub), flush=True)
    assert [bytes(m) for m in reader.poll_messages(10)] == [b"before", b"after"]
    reader.close()
    assert reader.end_of_stream_position == (1 << 63) - 1  # as at close (not set)
    assert not reader.is_end_of_stream
    dropped = Publication.standalone(LogBuffer.open(sys.argv[1]), owns_log=True)
    unfinished = dropped.try_claim(8)
    dropped.close()
    assert not dropped.log.closed
    del unfinished  # collected unfinished: gives its use back
    assert dropped.log.closed
    print("ok", flush=True)
    """
)


def test_a_closed_publication_and_image_answer_without_their_log(tmp_path) -> None:
    # reading a position or committing a claim after close read the unmapped log
    # (a segmentation fault): a child process, as it may crash
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.run([sys.executable, "-c", AFTER_CLOSE, str(tmp_path / "c.logbuffer")],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.splitlines()[-1] == "ok"
    assert "position=128" in proc.stdout  # the repr of a closed publication works too
