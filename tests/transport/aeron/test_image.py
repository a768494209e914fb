"""Images: reassembly, rotation across many terms, padding, limits, end of stream, waiting."""

from __future__ import annotations

import random
import struct
import threading
import time

import pytest

from exon import errors
from exon.native import ffi, lib
from exon.transport.aeron import layout as L
from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import ADMIN_ACTION, BACK_PRESSURED, Publication

TERM = 64 * 1024


@pytest.fixture
def log(tmp_path):
    lb = LogBuffer.create(tmp_path / "1.logbuffer", term_length=TERM, mtu=1408, session_id=3,
                          stream_id=4, initial_term_id=-2, is_connected=True)
    yield lb
    lb.close()


def send(pub, img, data: bytes, received: list[bytes]) -> int:
    """Offer, polling and driving on back pressure/rotation."""
    for _ in range(10_000):
        rc = pub.offer(data)
        if rc > 0:
            return rc
        assert rc in (BACK_PRESSURED, ADMIN_ACTION)
        received.extend(img.poll_messages(1000))
        img.log.update_limit(pub._limit, img.position)
    raise AssertionError("never accepted")


def test_rotation_across_many_terms_with_padding(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    rng = random.Random(1)
    sent, received = [], []
    pads_seen = 0
    for i in range(3000):
        data = struct.pack("<I", i) + rng.randbytes(rng.randrange(0, 700))
        sent.append(data)
        before = log.active_term_count
        send(pub, img, data, received)
        if log.active_term_count != before:
            # the term just left ends with a PAD frame up to the term end
            term = log.term_buffer(before % 3)
            off = 0
            while True:
                length, _, _, ftype = L.FRAME_HEADER.unpack_from(term, off)
                if off + L.align(length, 32) >= TERM:
                    break
                off += L.align(length, 32)
            if ftype == L.HDR_TYPE_PAD:
                pads_seen += 1
                assert off + length == TERM
    received.extend(img.poll_messages(10_000))
    assert received == sent
    assert log.active_term_count >= 10  # many terms, every partition reused
    assert pads_seen >= 5
    assert img.position == pub.position


def test_fragmented_messages_of_random_sizes_up_to_the_maximum(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    rng = random.Random(2)
    sizes = [0, 1, 1376, 1377, 2752, 2753, pub.max_message_length, pub.max_message_length - 1]
    sizes += [rng.randrange(0, pub.max_message_length + 1) for _ in range(60)]
    sent, received = [], []
    for size in sizes:
        data = rng.randbytes(size)
        sent.append(data)
        send(pub, img, data, received)
    received.extend(img.poll_messages(10_000))
    assert received == sent


def test_large_messages_grow_the_copy_buffer(tmp_path) -> None:
    with LogBuffer.create(tmp_path / "big.logbuffer", term_length=4 * 1024 * 1024,
                          mtu=8192, is_connected=True) as lb:
        pub = Publication.standalone(lb)
        img = Image.standalone(lb)
        data = bytes(range(256)) * (lb.max_message_length // 256)
        assert len(data) == 512 * 1024
        pub.offer(data)
        pub.offer(b"small")
        got = img.poll_messages()
        got += img.poll_messages()  # the batch may end where the copy buffer is full
        assert got == [data, b"small"]


def test_poll_handler_headers_and_fragment_limit(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    pub.offer(b"a", reserved_value=11)
    big = b"b" * 3000  # 3 frames
    pub.offer(big)
    pub.offer(b"c")
    got = []

    def handler(data: bytes, h) -> None:
        got.append((data, h.position, h.session_id, h.stream_id, h.fragments,
                    h.reserved_value, h.term_id, h.flags & 0xC0))

    assert img.poll(handler, 1) == 1
    assert got == [(b"a", 64, 3, 4, 1, 11, -2, 0xC0)]
    assert img.poll(handler, 1) == 1  # the limit never cuts a committed message in two
    assert got[1][0] == big
    assert got[1][4] == 3
    assert img.poll(handler, 10) == 1
    assert got[2][0] == b"c"
    assert img.position == pub.position


def test_poll_stops_inside_a_message_whose_rest_is_not_committed(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    pub.offer(b"b" * 3000)  # 3 frames at 0, 1408, 2816
    term = log.term_buffer(0)
    (length,) = struct.unpack_from("<i", term, 2816)
    struct.pack_into("<i", term, 2816, -length)  # the END frame looks in flight
    assert img.poll_messages() == []
    assert img.position == 2816
    struct.pack_into("<i", term, 2816, length)
    assert img.poll_messages() == [b"b" * 3000]


def test_scan_stops_at_uncommitted_frame(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    pub.offer(b"one")
    claim = pub.try_claim(8)  # header written with a negative length: in flight
    pub.offer(b"three")
    assert img.poll_messages() == [b"one"]
    assert img.position == 64
    claim.buffer[:] = b"two.two."
    claim.commit()
    assert img.poll_messages() == [b"two.two.", b"three"]


def test_frame_from_older_term_is_not_read(log: LogBuffer) -> None:
    img = Image.standalone(log)
    term = log.term_buffer(0)
    # a committed-looking frame with the wrong term id (stale data) must not be delivered
    L.DATA_HEADER.pack_into(term, 0, 40, 0, 0xC0, L.HDR_TYPE_DATA, 0, 3, 4, 1234, 0)
    assert img.poll_messages() == []
    assert img.position == 0


def test_corrupt_frame_length_is_reported(log: LogBuffer) -> None:
    img = Image.standalone(log)
    L.DATA_HEADER.pack_into(log.term_buffer(0), 0, 8, 0, 0xC0, L.HDR_TYPE_DATA, 0, 3, 4, -2, 0)
    with pytest.raises(errors.LogBufferError, match=r"1\.logbuffer"):
        img.poll_messages()
    assert img.position == 0


def test_end_of_stream_and_close(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    closed = []
    img = Image(log, ffi.new("int64_t[1]"), on_close=closed.append)
    assert not img.is_end_of_stream
    position = pub.offer(b"last")
    log.end_of_stream_position = position
    assert not img.is_end_of_stream
    assert img.poll_messages() == [b"last"]
    assert img.is_end_of_stream
    img.close()
    img.close()
    assert closed == [img]
    assert img.poll_messages() == []


def test_poll_count_and_set_position(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    img = Image.standalone(log)
    for i in range(10):
        pub.offer(b"x" * i)
    assert img.poll_count(1000) == (10, 45)
    img.position = 0
    assert len(img.poll_messages()) == 10
    with pytest.raises(errors.ConfigurationError):
        img.position = 33


def test_wait_times_out_then_is_woken_by_a_writer(log: LogBuffer) -> None:
    counters = ffi.new("uint8_t[4096]")
    doorbell = lib.exon_doorbell_word(counters, 2)
    log.add_doorbell(2)
    pub = Publication(log, ffi.new("int64_t[1]", [TERM // 2]), counters)
    img = Image.standalone(log)
    t0 = time.monotonic()
    assert img.wait(doorbell, 0.05) is False
    assert time.monotonic() - t0 >= 0.04
    assert log.waiters == 0

    def later() -> None:
        time.sleep(0.1)
        pub.offer(b"wake")

    t = threading.Thread(target=later)
    t.start()
    t0 = time.monotonic()
    assert img.wait(doorbell, 5.0) is True
    woke = time.monotonic() - t0
    t.join(5)
    assert woke < 4.0
    assert doorbell[0] >= 1  # the writer rang it
    assert log.waiters == 0
    assert img.poll_messages() == [b"wake"]
    assert img.wait(doorbell, 0) is False


def test_doorbell_wait_and_ring_directly() -> None:
    word = ffi.new("int32_t[1]")
    assert lib.exon_doorbell_wait(word, 1, 1000) == 0  # value differs: returns at once
    assert lib.exon_doorbell_wait(word, 0, 1000) == lib.EXON_E_TIMEOUT
    assert lib.exon_doorbell_ring(word) == 0
    assert word[0] == 1


def test_a_burst_of_commits_rings_a_sleeping_reader_once(log: LogBuffer) -> None:
    counters = ffi.new("uint8_t[4096]")
    doorbell = lib.exon_doorbell_word(counters, 2)
    log.add_doorbell(2)
    pub = Publication(log, ffi.new("int64_t[1]", [TERM // 2]), counters)
    log.meta.exon_waiters = 1  # a reader counted asleep...
    pub.offer(b"a")
    assert doorbell[0] == 0  # ...but it did not arm the doorbell: nobody to wake
    lib.exon_doorbell_arm(doorbell)  # as exon_image_wait does before it sleeps
    for _ in range(10):
        pub.offer(b"b")
    assert (doorbell[0], doorbell[1]) == (1, 0)  # rung once, and disarmed
    lib.exon_doorbell_arm(doorbell)
    pub.offer(b"c")
    assert (doorbell[0], doorbell[1]) == (2, 0)
    assert lib.exon_doorbell_ring_armed(doorbell) == 0
    log.meta.exon_waiters = 0


WAITER = """
import mmap, sys, time
from exon.native import ffi, lib
from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
log = LogBuffer.open(sys.argv[1])
with open(sys.argv[2], "r+b") as f:
    counters = mmap.mmap(f.fileno(), 4096)
base = ffi.cast("uint8_t *", ffi.from_buffer(counters))
img = Image.standalone(log)
print("ready", flush=True)
t0 = time.monotonic()
ok = img.wait(lib.exon_doorbell_word(base, 1), 10.0)
print(ok, img.poll_messages(), round(time.monotonic() - t0, 3), flush=True)
"""


def test_a_writer_wakes_a_reader_in_another_process(log: LogBuffer, tmp_path) -> None:
    import mmap
    import os
    import subprocess
    import sys

    counters_path = tmp_path / "counters"
    counters_path.write_bytes(bytes(4096))
    with open(counters_path, "r+b") as f:
        counters = mmap.mmap(f.fileno(), 4096)
    base = ffi.cast("uint8_t *", ffi.from_buffer(counters))
    log.add_doorbell(1)
    pub = Publication(log, ffi.new("int64_t[1]", [TERM // 2]), base)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    child = subprocess.Popen([sys.executable, "-c", WAITER, log.path, str(counters_path)],
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "ready"
        end = time.monotonic() + 10
        while log.waiters == 0:  # the child is asleep on the doorbell
            assert time.monotonic() < end
            time.sleep(0.005)
        time.sleep(0.1)  # past the 50 us first wait: now in a long futex wait
        pub.offer(b"ding")
        out, _ = child.communicate(timeout=10)
        assert out.startswith("True [b'ding']"), out
        assert lib.exon_doorbell_word(base, 1)[0] >= 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5)
        del base
