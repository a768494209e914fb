"""Term rebuilder: any arrival order with duplicates rebuilds the exact term (C and Python)."""

from __future__ import annotations

import random

import pytest

from exon.native import ffi, lib
from exon.transport.aeron import frames as F
from exon.transport.aeron.policies import term_gap_scan, term_rebuilder_insert
from tests.transport.aeron.helpers import TERM_LENGTH, datagrams_for_term


def _c_insert(term, offset: int, packet: bytes) -> int:
    return lib.exon_term_rebuilder_insert(term, TERM_LENGTH, offset, packet, len(packet))


@pytest.mark.parametrize("seed", range(6))
def test_any_order_with_duplicates_rebuilds_the_term(seed: int) -> None:
    rng = random.Random(seed)
    datagrams, expected = datagrams_for_term(rng)
    arrivals = datagrams + rng.sample(datagrams, k=len(datagrams) // 3)  # duplicates
    rng.shuffle(arrivals)
    c_term = ffi.new("uint8_t[]", TERM_LENGTH)
    py_term = bytearray(TERM_LENGTH)
    c_total = py_total = 0
    for offset, packet in arrivals:
        c_total += _c_insert(c_term, offset, packet)
        py_total += term_rebuilder_insert(py_term, offset, packet)
        assert bytes(ffi.buffer(c_term)) == bytes(py_term)
    frame_count = sum(len(F.split_datagram(p)) for _, p in datagrams)
    assert c_total == py_total == frame_count  # each frame inserted exactly once
    assert bytes(py_term) == expected


def test_duplicate_does_not_overwrite() -> None:
    term = ffi.new("uint8_t[]", TERM_LENGTH)
    first = F.encode_data(flags=0xC0, term_offset=0, session_id=1, stream_id=2, term_id=3,
                          payload=b"a" * 10)
    second = F.encode_data(flags=0xC0, term_offset=0, session_id=1, stream_id=2, term_id=3,
                           payload=b"b" * 10)
    assert _c_insert(term, 0, first) == 1
    assert _c_insert(term, 0, second) == 0
    assert bytes(ffi.buffer(term, 64)) == first


def test_heartbeat_inserts_nothing_and_bad_placement_is_refused() -> None:
    term = ffi.new("uint8_t[]", TERM_LENGTH)
    hb = F.encode_heartbeat(term_offset=0, session_id=1, stream_id=2, term_id=3)
    assert _c_insert(term, 0, hb) == 0
    assert bytes(ffi.buffer(term, 32)) == bytes(32)
    data = F.encode_data(flags=0xC0, term_offset=0, session_id=1, stream_id=2, term_id=3)
    assert _c_insert(term, 16, data) == lib.EXON_E_ARGUMENT
    assert _c_insert(term, TERM_LENGTH - 0, data) == lib.EXON_E_ARGUMENT
    assert _c_insert(term, 0, data[:20]) == lib.EXON_E_ARGUMENT
    with pytest.raises(ValueError, match="does not fit"):
        term_rebuilder_insert(bytearray(TERM_LENGTH), TERM_LENGTH, data)


def test_pad_header_closes_the_term_for_the_scanner() -> None:
    term = ffi.new("uint8_t[]", TERM_LENGTH)
    pad = F.encode_pad(frame_length=96, term_offset=TERM_LENGTH - 96, session_id=1, stream_id=2,
                       term_id=3)
    assert _c_insert(term, TERM_LENGTH - 96, pad) == 1
    gap = ffi.new("int32_t *")
    end = lib.exon_term_gap_scan(term, TERM_LENGTH, TERM_LENGTH - 96, TERM_LENGTH - 64, gap)
    assert (end, gap[0]) == (TERM_LENGTH, 0)


@pytest.mark.parametrize("seed", range(20))
def test_gap_scan_parity(seed: int) -> None:
    rng = random.Random(100 + seed)
    datagrams, _ = datagrams_for_term(rng)
    term = bytearray(TERM_LENGTH)
    for offset, packet in rng.sample(datagrams, k=rng.randint(0, len(datagrams))):
        term_rebuilder_insert(term, offset, packet)
    c_term = ffi.from_buffer("uint8_t[]", term)
    gap = ffi.new("int32_t *")
    boundaries = [off for off, packet in datagrams]
    for i in range(50):
        start = rng.choice(boundaries) if i % 2 else rng.randrange(0, TERM_LENGTH, 32)
        limit = rng.randrange(start, TERM_LENGTH + 1, 32)
        end = lib.exon_term_gap_scan(c_term, TERM_LENGTH, start, limit, gap)
        assert (end, gap[0]) == term_gap_scan(term, start, limit)
        if gap[0] and start in boundaries:
            assert end < limit
            assert term[end : end + 4] == b"\0\0\0\0"
