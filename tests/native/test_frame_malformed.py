"""The native poll's malformed-frame drop (exon_lt_frame_malformed) against its Python
twin (node_transport.is_malformed), and against what Python does with such a frame: it
would drop it too, unanswered (docs/protocol.md 2.17)."""

from __future__ import annotations

import random

import pytest

from exon.core import frames as F
from exon.errors import ExonError
from exon.middleware.frame_assembly import FrameAssembler
from exon.middleware.node_transport import (
    decode_hello,
    encode_hello,
    is_fragment,
    is_malformed,
)
from exon.native import ffi, lib


def native_malformed(data: bytes) -> bool:
    return bool(lib.exon_lt_frame_malformed(ffi.from_buffer(data), len(data)))


def _valid_frames() -> list[bytes]:
    meta = F.LinkMetadata(socket_type="push", credits=8, max_message_size=64, node_id="n",
                          reply_address="127.0.0.1:1", nonce=b"x" * 16)
    return [
        F.encode_data(1, 2, 3, b""),
        F.encode_data(1, 2, 3, b"payload"),
        F.encode_link(1, 2, 3, meta),
        F.encode_linkack(1, 2, 3, F.Decision.ACCEPTED, meta, answers=4, token=b"t" * 16),
        F.encode_linkack(1, 2, 3, F.Decision.REFUSED, answers=4, echo=b"e" * 16),
        F.encode_unlink(1, 2, 3, 9),
        F.encode_flow(1, 2, 3, 1, 2),
        F.encode_error(1, 2, 3, F.ErrorCode.SOCKET_NOT_LINKED, "x"),
        encode_hello("127.0.0.1:40123"),
    ]


def _mutations(rng: random.Random, base: list[bytes], count: int) -> list[bytes]:
    out: list[bytes] = []
    for _ in range(count):
        frame = bytearray(rng.choice(base))
        kind = rng.randrange(4)
        if kind == 0 and frame:
            frame[rng.randrange(min(len(frame), 24))] = rng.randrange(256)
        elif kind == 1:
            frame = frame[: rng.randrange(len(frame) + 1)]
        elif kind == 2:
            frame += rng.randbytes(rng.randrange(1, 8))
        else:
            frame = bytearray(rng.randbytes(rng.randrange(0, 40)))
        out.append(bytes(frame))
    return out


def python_drops(data: bytes) -> bool:
    """Whatever path Python would take (HELLO, FRAGMENT, the core's decoder), it drops."""
    if decode_hello(data) is not None:
        return False
    if is_fragment(data):
        assembler = FrameAssembler(max_total=1 << 20)
        before = assembler.dropped
        assembler.feed(0, data)
        return assembler.dropped > before
    try:
        F.decode_frame(data)
    except ExonError:
        return True
    return False


def test_valid_frames_are_never_malformed() -> None:
    for frame in _valid_frames():
        assert not native_malformed(frame)
        assert not is_malformed(frame)


@pytest.mark.parametrize("seed", range(4))
def test_native_and_python_twins_agree_and_python_drops_what_they_drop(seed: int) -> None:
    rng = random.Random(seed)
    frames = _mutations(rng, _valid_frames(), 3000)
    malformed = 0
    for frame in frames:
        verdict = native_malformed(frame)
        assert verdict == is_malformed(frame), frame
        if verdict:
            malformed += 1
            assert python_drops(frame), frame
    assert 0 < malformed < len(frames)
