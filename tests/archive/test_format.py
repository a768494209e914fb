"""The record codec: round trips, checks, the torn-tail scan."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exon.archive import ArchiveCorrupt, Record, codec
from exon.archive.format import (
    ALIGNMENT,
    HEADER,
    HEADER_LENGTH,
    decode_key,
    decode_records,
    encode_batch,
    encode_key,
    encode_pad,
    find_record,
    record_problem,
    scan_records,
    walk_headers,
)

PRODUCER = b"127.0.0.1:4000/7"


def test_header_is_32_bytes_and_aligned() -> None:
    assert HEADER.size == HEADER_LENGTH == 32 == ALIGNMENT


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(0, 1 << 40))
def test_round_trip(payloads: list[bytes], base_records: int) -> None:
    base = base_records * ALIGNMENT
    data = encode_batch(base, payloads, [PRODUCER] * len(payloads), 123)
    records, end = decode_records(data, 0, len(data), base)
    assert end == len(data)
    assert [r.payload for r in records] == payloads
    assert all(r.producer == PRODUCER.decode() and r.timestamp == 123 for r in records)
    positions = [r.position for r in records]
    assert positions == sorted(positions)
    assert all(p % ALIGNMENT == 0 for p in positions)
    assert scan_records(data, 0, len(data), base) == (len(data), len(payloads))


def test_native_and_reference_decoders_agree() -> None:
    payloads = [bytes([i % 251]) * (i * 7 % 500) for i in range(300)]
    data = bytes(encode_batch(4096, payloads, [PRODUCER] * 300, 5))
    got, end = codec.decode(data, 0, len(data), 4096, 1 << 62, True, "x", {})
    want, want_end = decode_records(data, 0, len(data), 4096)
    assert got == want
    assert end == want_end
    part, mid = codec.decode(data, 0, len(data), 4096, 10, True, "x", {})
    assert part == want[:10]
    assert mid == want[10].position - 4096


needs_native = pytest.mark.skipif(not codec.NATIVE, reason="the native codec is not built")


@needs_native
def test_native_decoder_agrees_across_timestamps_and_leaves_records_untracked() -> None:
    import gc

    # runs of records sharing a receive time (the decoder reuses one int for a run)
    data = bytearray()
    stamps = [5, 5, 7, 1 << 40, 1 << 40, 5, -3]
    for k, stamp in enumerate(stamps):
        data += encode_batch(4096 + len(data), [b"p%d" % k] * (k + 1), [PRODUCER] * (k + 1),
                             stamp)
    got, end = codec.decode_native(bytes(data), 0, len(data), 4096, 1 << 62, True, "x", {})
    want, want_end = decode_records(bytes(data), 0, len(data), 4096)
    assert [tuple(r) for r in got] == [tuple(r) for r in want]
    assert [r.timestamp for r in got] == [s for k, s in enumerate(stamps) for _ in range(k + 1)]
    assert end == want_end
    assert all(type(r) is Record and not gc.is_tracked(r) for r in got)


@needs_native
def test_native_decoder_refuses_a_record_type_it_cannot_fill() -> None:
    data = bytes(encode_batch(0, [b"a"], [PRODUCER], 1))

    class Wide(tuple):  # type: ignore[type-arg]
        pass  # has a __dict__: not a plain 4-tuple

    for bad in (Wide, dict):
        with pytest.raises(TypeError, match="tuple subclass"):
            codec._native.decode(data, 0, len(data), 0, 10, None, {}, bad)


@needs_native
@pytest.mark.parametrize("field", ["checksum", "payload", "position", "length", "cut"])
def test_native_decoder_refuses_damage_as_the_reference_does(field: str) -> None:
    data = bytearray(encode_batch(0, [b"one" * 10, b"two" * 10], [PRODUCER] * 2, 1))
    second = decode_records(data, 0, len(data), 0)[0][1].position
    if field == "checksum":
        data[second] ^= 0xFF
    elif field == "payload":
        data[second + HEADER_LENGTH + len(PRODUCER)] ^= 1
    elif field == "position":
        struct.pack_into("<q", data, second + 8, 12345 * 32)
    elif field == "length":
        struct.pack_into("<I", data, second + 4, 1 << 20)
    else:
        data = data[:second + 40]  # torn inside the second record
    with pytest.raises(ArchiveCorrupt) as info:
        codec.decode_native(bytes(data), 0, len(data), 0, 1 << 62, True, "seg.rec", {})
    assert (info.value.offset, info.value.path) == (second, "seg.rec")


@needs_native
@given(st.binary(max_size=400))
def test_native_decoder_on_garbage_matches_the_reference(blob: bytes) -> None:
    def run(decode: object) -> object:
        try:
            records, end = decode(blob, 0, len(blob), 0, 1 << 62, True, "g", {})  # type: ignore[operator]
        except ArchiveCorrupt as exc:
            return ("corrupt", exc.offset)
        return [tuple(r) for r in records], end

    assert run(codec.decode_native) == run(codec.decode_py)


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 400), st.integers(0, 400), st.integers(0, 20))
def test_native_walk_on_garbage_matches_the_reference(blob: bytes, offset: int, end: int,
                                                      limit: int) -> None:
    end = min(end, len(blob))
    assert codec.walk_native(blob, offset, end, limit) == walk_headers(blob, offset, end, limit)


@needs_native
@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=30), st.integers(0, 40),
       st.integers(0, 2000), st.data())
def test_native_walk_matches_the_reference_over_records_and_pads(
        payloads: list[bytes], limit: int, budget: int, data: st.DataObject) -> None:
    """Partitioned replay's cuts (advance, boundaries, replay chunks) walk records and PADs
    by length: the native walk stops where the reference does, on a record boundary."""
    buf = bytearray(encode_batch(0, payloads, [PRODUCER] * len(payloads), 1))
    pad_at = data.draw(st.sampled_from([r.position for r in decode_records(buf, 0, len(buf),
                                                                           0)[0]]))
    tail = bytes(buf[pad_at:])
    del buf[pad_at:]
    buf.extend(bytes(64))
    encode_pad(buf, pad_at, pad_at, 64)
    buf.extend(bytes(tail))
    # positions are checked by decode, not by the walk: shifted records still walk
    for end in (len(buf), min(len(buf), budget)):
        want = walk_headers(bytes(buf), 0, end, limit)
        assert codec.walk_native(bytes(buf), 0, end, limit) == want
        assert want[1] <= limit
    offset, count = codec.walk_native(bytes(buf), 0, len(buf), 1 << 62)
    assert (offset, count) == (len(buf), len(payloads))


def test_record_is_a_tuple_with_names() -> None:
    r = Record(64, b"x", "p", 9)
    assert r == (64, b"x", "p", 9)
    assert (r.position, r.payload, r.producer, r.timestamp) == (64, b"x", "p", 9)
    import pickle

    assert pickle.loads(pickle.dumps(r)) == r


def test_pad_records_are_skipped() -> None:
    data = bytearray(encode_batch(0, [b"a"], [PRODUCER], 1))
    first = len(data)
    data.extend(bytes(96))
    encode_pad(data, first, first, 96)
    data.extend(encode_batch(first + 96, [b"b"], [PRODUCER], 1))
    records, end = decode_records(data, 0, len(data), 0)
    assert [r.payload for r in records] == [b"a", b"b"]
    assert end == len(data)
    assert walk_headers(data, 0, len(data), 1) == (first + 96, 1)  # PAD skipped too
    assert walk_headers(data, 0, len(data), 5) == (len(data), 2)


@pytest.mark.parametrize("field", ["checksum", "payload", "position", "length"])
def test_a_damaged_record_is_refused_naming_the_offset(field: str) -> None:
    data = bytearray(encode_batch(0, [b"one" * 10, b"two" * 10], [PRODUCER] * 2, 1))
    second = decode_records(data, 0, len(data), 0)[0][1].position
    if field == "checksum":
        data[second] ^= 0xFF
    elif field == "payload":
        data[second + HEADER_LENGTH + len(PRODUCER)] ^= 1
    elif field == "position":
        struct.pack_into("<q", data, second + 8, 12345 * 32)
    else:
        struct.pack_into("<I", data, second + 4, 1 << 20)
    with pytest.raises(ArchiveCorrupt) as info:
        decode_records(data, 0, len(data), 0, path="seg.rec")
    assert info.value.offset == second
    assert info.value.path == "seg.rec"
    # the scan (recovery) stops before it instead of raising
    assert scan_records(data, 0, len(data), 0) == (second, 1)


def test_torn_tail_stops_the_scan() -> None:
    data = encode_batch(0, [b"x" * 100] * 3, [PRODUCER] * 3, 1)
    for cut in range(1, len(data)):
        end, count = scan_records(bytes(data[:cut]), 0, cut, 0)
        assert end <= cut
        assert end % ALIGNMENT == 0
        assert decode_records(bytes(data[:end]), 0, end, 0)[0][:count] is not None


@given(st.binary(max_size=400))
def test_garbage_decodes_or_raises_archive_corrupt(blob: bytes) -> None:
    try:
        decode_records(blob, 0, len(blob), 0)
    except ArchiveCorrupt:
        pass
    scan_records(blob, 0, len(blob), 0)


def test_key_round_trip() -> None:
    key = encode_key("q-1", 3, 17, 99)
    assert decode_key(key) == ("q-1", 3, 17, 99)
    data = encode_batch(0, [b"p"], [PRODUCER], 1, [key])
    seen = []
    scan_records(data, 0, len(data), 0, on_key=lambda k, p: seen.append((decode_key(k), p)))
    assert seen == [(("q-1", 3, 17, 99), 0)]
    assert decode_records(data, 0, len(data), 0)[0][0].producer == PRODUCER.decode()


def test_native_encoders_match_the_reference() -> None:
    payloads = [bytes([i % 7]) * (i * 13 % 700) for i in range(120)]
    producers = [b"h:%d/1" % (i % 3) for i in range(120)]
    keys = [encode_key("q", i, 1, i) for i in range(120)]
    for k in (None, keys):
        native, ref = bytearray(1 << 17), bytearray(1 << 17)
        got = codec.encode_span_native(native, 0, 640, payloads, producers, 3, k, 5, 40000)
        want = codec.encode_span_py(ref, 0, 640, payloads, producers, 3, k, 5, 40000)
        assert got == want
        assert native[:got[1]] == ref[:want[1]]


def test_encode_buffer_matches_encode_runs() -> None:
    """A held batch as one buffer and u64 offsets frames the same records as its payload
    list (native and reference, from any first record, cut by any room)."""
    payloads = [bytes([i % 7]) * (i * 13 % 700) for i in range(120)]
    buffer = b"".join(payloads)
    offsets = array("Q", [0])
    for p in payloads:
        offsets.append(offsets[-1] + len(p))
    runs = [(p, 8) for p in [0, 1, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 11, 1]] + [(12, 0)]

    def producer_of(peer: int) -> bytes:
        return b"p%d" % peer

    encoders = [codec.encode_buffer_py] + ([codec.encode_buffer_native] if codec.NATIVE else [])
    for first, room in ((0, 1 << 17), (13, 1 << 17), (0, 9000), (37, 4000), (120, 64)):
        ref = bytearray(1 << 17)
        want = codec.encode_runs_py(ref, 0, 32, payloads, runs, producer_of, 9, first, room)
        for encode in encoders:
            out = bytearray(1 << 17)
            got = encode(out, 0, 32, buffer, memoryview(offsets), runs, producer_of, 9, first,
                         room)
            assert got == want
            assert out[:got[1]] == ref[:want[1]]
            if first == 0 and room == 1 << 17:
                assert got[0] == len(payloads)
                records, _ = decode_records(out, 0, got[1], 32)
                assert [r.producer for r in records[:9]] == ["p0"] * 8 + ["p1"]
                assert [r.payload for r in records] == payloads


@pytest.mark.parametrize("ends", [[0, 3, 2, 4], [0, 2, 9], []])
def test_encode_buffer_refuses_offsets_out_of_order_or_past_the_buffer(ends: list[int]) -> None:
    encoders = [codec.encode_buffer_py] + ([codec.encode_buffer_native] if codec.NATIVE else [])
    runs = [(0, max(0, len(ends) - 1))]
    for encode in encoders:
        with pytest.raises(ValueError, match="offsets"):
            encode(bytearray(4096), 0, 0, b"abcd", memoryview(array("Q", ends)), runs,
                   lambda p: b"p", 1, 0, 4096)


@pytest.mark.parametrize("runs", [[(0, 5)], [(0, 3), (1, 5)], [(0, -1), (1, 6)]])
def test_run_counts_that_disagree_with_the_payloads_are_refused(
        runs: list[tuple[int, int]]) -> None:
    offsets = memoryview(array("Q", [0, 1, 2, 3, 4]))
    encoders = [codec.encode_buffer_py] + ([codec.encode_buffer_native] if codec.NATIVE else [])
    for encode in encoders:
        with pytest.raises(ValueError, match="run counts"):
            encode(bytearray(4096), 0, 0, b"xxxx", offsets, runs, lambda p: b"p", 1, 0, 4096)


@pytest.mark.skipif(not codec.NATIVE, reason="the native codec is not built")
def test_native_encode_buffer_refuses_malformed_runs() -> None:
    out = bytearray(4096)
    one = memoryview(array("Q", [0, 1]))
    with pytest.raises(TypeError):
        codec.encode_buffer_native(out, 0, 0, b"x", one, [0], lambda p: b"p", 1, 0, 4096)
    with pytest.raises(TypeError):  # producer_of must give bytes
        codec.encode_buffer_native(out, 0, 0, b"x", one, [(0, 1)], lambda p: "p", 1, 0, 4096)
    with pytest.raises(ValueError, match="first"):
        codec.encode_buffer_native(out, 0, 0, b"x", one, [(0, 1)], lambda p: b"p", 1, 2, 4096)
    with pytest.raises(ZeroDivisionError):  # producer_of's own error comes through
        codec.encode_buffer_native(out, 0, 0, b"x", one, [(0, 1)], lambda p: 1 // 0, 1, 0,
                                   4096)


def test_native_scan_matches_the_reference() -> None:
    data = bytearray(encode_batch(0, [b"x" * n for n in range(0, 900, 37)], [PRODUCER] * 25, 1))
    for cut in (len(data), len(data) - 1, 700, 100, 0):
        head = bytes(data[:cut])
        assert codec.scan_native(head, 0, cut, 0) == scan_records(head, 0, cut, 0)
    data[500] ^= 1
    whole = bytes(data)
    assert codec.scan_native(whole, 0, len(whole), 0) == scan_records(whole, 0, len(whole), 0)


@given(st.binary(max_size=3000))
def test_the_native_checksum_is_the_crc32c_packages(data: bytes) -> None:
    from crc32c import crc32c

    if not codec.NATIVE:
        pytest.skip("the native codec is not built")
    # direct routine (DIRECT_CRC) or one Python call: either way crc32c's own result
    assert codec._native.checksum(crc32c, data) == crc32c(data)


NEGATIVE_OFFSETS = """
from exon.archive import codec
buf = bytearray(4096)
one = (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
calls = {
    "decode": lambda f: f(bytes(buf), -64, 4096, 0, 10, False, "p", {}),
    "scan": lambda f: f(bytes(buf), -64, 4096, 0),
    "encode": lambda f: f(buf, -64, 0, [b"x"], [b"p"], 0, None, 0, 1 << 20),
    "encode first": lambda f: f(buf, 0, 0, [b"x"], [b"p"], 0, None, -1, 1 << 20),
    "encode_buffer": lambda f: f(buf, -64, 0, b"x", one, [(1, 1)], lambda p: b"p", 0, 0, 1 << 20),
}
twins = {"decode": (codec.decode_native, codec.decode_py),
         "scan": (codec.scan_native, codec.scan_py),
         "encode": (codec.encode_span_native, codec.encode_span_py),
         "encode first": (codec.encode_span_native, codec.encode_span_py),
         "encode_buffer": (codec.encode_buffer_native, codec.encode_buffer_py)}
for name, call in calls.items():
    for f in twins[name]:
        try:
            call(f)
        except ValueError as e:
            print(name, f.__name__, "ValueError", e, flush=True)
        else:
            print(name, f.__name__, "accepted", flush=True)
assert buf == bytearray(4096)
print("ok", flush=True)
"""


@needs_native
def test_negative_offsets_are_refused_not_read_or_written_out_of_bounds() -> None:
    # the native codec read (decode, scan) and wrote (encode, encode_buffer) before its
    # buffer at a negative offset (ASan: heap-buffer-overflow); the Python twins returned
    # nonsense or wrote from the end. A child process, as it may crash.
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.run([sys.executable, "-c", NEGATIVE_OFFSETS], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stdout.splitlines()
    assert lines[-1] == "ok"
    assert len(lines) == 11, lines
    assert all("ValueError" in line for line in lines[:-1]), lines


def test_find_record_finds_the_next_valid_record_past_damage() -> None:
    data = encode_batch(0, [b"\x01" * 100, b"\x01\x02" * 200, b"x" * 30], [PRODUCER] * 3, 1)
    second = ALIGNMENT * ((HEADER_LENGTH + len(PRODUCER) + 100 + 31) // 32)
    third = scan_records(bytes(data), second, len(data), 0, limit=1)[0]
    assert find_record(data, 0, len(data), 0) == 0
    # a search from inside a record (its payload is all type/version look-alikes) skips it
    assert find_record(data, 32, len(data), 0) == second
    assert find_record(data, second + 32, len(data), 0) == third
    data[second + 40] ^= 1  # a bad checksum: not a record
    assert find_record(data, 32, len(data), 0) == third
    assert record_problem(data, second, len(data), 0) == "checksum mismatch"
    # a torn tail: nothing valid after the damage
    assert find_record(data, third + 32, len(data), 0) == -1
    assert find_record(data[:third + 40], second + 32, third + 40, 0) == -1
    assert find_record(bytes(4096), 0, 4096, 0) == -1
    assert record_problem(bytes(4096), 64, 4096, 0).startswith("zero record length")
    # the same record moved elsewhere: its position gives it away
    moved = bytes(64) + bytes(data)
    assert find_record(moved, 0, len(moved), 0) == -1
    assert find_record(moved, 0, len(moved), -64) == 64


@given(st.binary(max_size=600), st.integers(0, 700))
def test_find_record_on_garbage_finds_only_records_that_scan(blob: bytes, offset: int) -> None:
    at = find_record(blob, offset, len(blob), 0)
    if at >= 0:
        assert at >= offset
        assert at % ALIGNMENT == 0
        assert scan_records(blob, at, len(blob), 0)[0] > at
