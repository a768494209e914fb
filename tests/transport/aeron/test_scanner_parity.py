"""The C scanner and its pure-Python twin (exon/transport/aeron/fragments.py) agree."""

from __future__ import annotations

import random

import pytest

from exon.native import ffi, lib
from exon.transport.aeron import fragments as F
from exon.transport.aeron import layout as L
from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import (
    ADMIN_ACTION,
    BACK_PRESSURED,
    ClaimRefused,
    Publication,
)

TERM = 64 * 1024


def c_scan(term: bytes, start: int, limit: int, max_frames: int) -> tuple[list[F.FrameInfo], int]:
    buf = ffi.from_buffer("uint8_t[]", term)
    out = ffi.new("exon_frame_info_t[]", max(max_frames, 1))
    nxt = ffi.new("int32_t *")
    n = lib.exon_term_scan(buf, start, limit, out, max_frames, nxt)
    frames = [F.FrameInfo(out[i].term_offset, out[i].frame_length, out[i].type, out[i].flags)
              for i in range(n)]
    return frames, nxt[0]


def random_term(rng: random.Random, size: int = 8192) -> bytes:
    """Frames of random kinds: committed, uncommitted (negative), zero, bogus lengths."""
    term = bytearray(size)
    off = 0
    while off < size - 32:
        kind = rng.random()
        length = rng.randrange(32, 600)
        if kind < 0.03:
            length = -length  # in flight
        elif kind < 0.05:
            length = rng.choice([0, 1, 31, size * 2])
        ftype = L.HDR_TYPE_PAD if rng.random() < 0.1 else L.HDR_TYPE_DATA
        flags = rng.choice([0xC0, 0x80, 0x00, 0x40])
        L.DATA_HEADER.pack_into(term, off, length, 0, flags, ftype, off, 1, 2, 3, 0)
        off += L.align(abs(length) if length else 32, 32)
    return bytes(term)


@pytest.mark.parametrize("seed", range(40))
def test_term_scan_parity_on_random_terms(seed: int) -> None:
    rng = random.Random(seed)
    term = random_term(rng)
    for _ in range(10):
        start = rng.randrange(0, len(term) // 32) * 32
        limit = rng.randrange(start, len(term) + 1)
        max_frames = rng.randrange(0, 50)
        assert c_scan(term, start, limit, max_frames) == F.scan_term(term, start, limit,
                                                                     max_frames)


def _fill_log(log: LogBuffer, rng: random.Random, count: int) -> None:
    """Write a random log: random sizes, aborted claims (PAD), rotations."""
    pub = Publication.standalone(log, limit=2 * TERM)
    for i in range(count):
        if rng.random() < 0.1:
            try:
                claim = pub.try_claim(rng.randrange(0, pub.max_payload_length + 1))
            except ClaimRefused:
                pass
            else:
                claim.abort()
            continue
        data = rng.randbytes(rng.choice([rng.randrange(0, 200), rng.randrange(0, TERM // 8)]))
        for _ in range(100):
            rc = pub.offer(data, reserved_value=i)
            if rc > 0:
                break
            assert rc in (BACK_PRESSURED, ADMIN_ACTION)
            if rc == BACK_PRESSURED:
                return  # the log is full for this reader: stop here, keep it readable


@pytest.mark.parametrize("seed", range(12))
def test_image_poll_parity_with_python_reader(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    with LogBuffer.create(tmp_path / f"{seed}.logbuffer", term_length=TERM, mtu=rng.choice(
            [128, 1408, 4096]), initial_term_id=rng.randrange(-(2**31), 2**31),
            is_connected=True) as log:
        _fill_log(log, rng, 400)
        file_bytes = bytes(ffi.buffer(log.cdata.addr, log.length))
        img = Image.standalone(log)
        assembler = F.FragmentAssembler(log.max_message_length)
        py_position = 0
        for _ in range(1000):
            limit = rng.randrange(1, 40)
            c_msgs: list[tuple] = []

            def handler(d: bytes, h, out: list[tuple] = c_msgs) -> None:
                out.append((d, h.position, h.fragments, h.reserved_value, h.term_id,
                            h.term_offset))

            img.poll(handler, limit)
            py, py_position = F.read_messages(
                file_bytes, py_position, term_length=TERM, initial_term_id=log.initial_term_id,
                fragment_limit=limit, assembler=assembler)
            assert c_msgs == [(m.data, m.position, m.fragments, m.reserved_value, m.term_id,
                               m.term_offset) for m in py]
            assert img.position == py_position
            if not c_msgs and not img.available:
                break
        assert img.position == log.producer_position
