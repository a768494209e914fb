"""Helpers shared by the Aeron transport tests: build terms and datagrams from messages."""

from __future__ import annotations

import random

from exon.transport.aeron import frames as F
from exon.transport.aeron import layout as L

TERM_LENGTH = 64 * 1024
SESSION, STREAM, TERM_ID = 77, 1001, 5


def datagrams_for_term(
    rng: random.Random, *, term_length: int = TERM_LENGTH, mtu: int = 1408, fill: int | None = None,
    term_id: int = TERM_ID,
) -> tuple[list[tuple[int, bytes]], bytes]:
    """Random messages packed like Aeron's sender: [(term_offset, datagram)] and the term.

    Fills the term up to ``fill`` bytes (default: the whole term, closed by a PAD header).
    """
    limit = term_length if fill is None else fill
    frames: list[tuple[int, F.Frame]] = []
    offset = 0
    while True:
        size = rng.choice([0, 1, 14, 100, 200, 500, 1000, mtu - 32])
        frame = F.DataFrame(frame_length=32 + size, flags=0xC0, term_offset=offset,
                            session_id=SESSION, stream_id=STREAM, term_id=term_id,
                            payload=rng.randbytes(size))
        if offset + frame.aligned_length > limit:
            break
        frames.append((offset, frame))
        offset += frame.aligned_length
    if fill is None and offset < term_length:
        frames.append((offset, F.PadFrame(frame_length=term_length - offset, flags=0xC0,
                                          term_offset=offset, session_id=SESSION,
                                          stream_id=STREAM, term_id=term_id)))
    term = bytearray(term_length)
    for off, frame in frames:
        raw = F.encode(frame)
        term[off : off + len(raw)] = raw
    datagrams: list[tuple[int, bytes]] = []
    batch: list[F.Frame] = []
    start = 0
    used = 0
    for off, frame in frames:
        wire = len(F.encode(frame))
        if batch and used + wire > mtu:
            datagrams.append((start, F.encode_datagram(batch)))
            batch, used = [], 0
        if not batch:
            start = off
        batch.append(frame)
        used += wire
    if batch:
        datagrams.append((start, F.encode_datagram(batch)))
    return datagrams, bytes(term)


def position(term_id: int, offset: int, *, initial_term_id: int = TERM_ID,
             term_length: int = TERM_LENGTH) -> int:
    bits = term_length.bit_length() - 1
    return ((term_id - initial_term_id) << bits) + offset


__all__ = ["L", "datagrams_for_term", "position"]
