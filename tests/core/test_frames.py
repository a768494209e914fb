"""Codec round trips and the fuzz invariant: any bytes decode or raise FrameDecodeError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exon.core import frames as F
from exon.errors import FrameDecodeError

tags = st.integers(0, F.TAG_MAX)
u64 = st.integers(0, F.U64_MAX)
text = st.text(max_size=40)
metadata = st.builds(
    F.LinkMetadata,
    socket_type=st.sampled_from(["req", "rep", "push", "pull", "x"]),
    credits=u64,
    max_message_size=u64,
    node_id=text,
    reply_address=text,
    nonce=st.binary(max_size=32),
    custom=st.dictionaries(
        st.text(max_size=8), st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=8), max_size=3
    ),
)


@st.composite
def any_frame(draw: st.DrawFn) -> F.Frame:
    t = draw(st.sampled_from(list(F.FrameType)))
    common = {"type": t, "source_tag": draw(tags), "destination_tag": draw(tags),
              "incarnation": draw(tags)}
    if t is F.FrameType.DATA:
        return F.Frame(**common, payload=draw(st.binary(max_size=64)))
    if t is F.FrameType.LINK:
        return F.Frame(**common, metadata=draw(metadata))
    if t is F.FrameType.LINKACK:
        return F.Frame(**common, decision=draw(st.sampled_from(list(F.Decision))),
                       metadata=draw(st.none() | metadata), reason=draw(text),
                       answers=draw(tags))
    if t is F.FrameType.UNLINK:
        return F.Frame(**common, count=draw(u64))
    if t is F.FrameType.FLOW:
        d = draw(u64)
        return F.Frame(**common, delivered=d, limit=draw(st.integers(d, F.U64_MAX)))
    return F.Frame(**common, error=draw(st.sampled_from(list(F.ErrorCode))), reason=draw(text))


@given(any_frame())
@settings(max_examples=300, deadline=None)
def test_round_trip(frame: F.Frame) -> None:
    data = F.encode_frame(frame)
    assert F.decode_frame(data) == frame
    assert F.decode_frame(memoryview(data)) == frame
    version, proto, ftype, remaining = struct.unpack_from("<HBBI", data)
    assert (version, proto, ftype, remaining) == (1, 1, frame.type, len(data) - 8)


@given(st.binary(max_size=128))
@settings(max_examples=500, deadline=None)
def test_any_bytes_decode_or_raise_frame_decode_error(data: bytes) -> None:
    try:
        F.decode_frame(data)
    except FrameDecodeError:
        pass


@given(any_frame(), st.data())
@settings(max_examples=300, deadline=None)
def test_mutated_frames_decode_or_raise_frame_decode_error(frame: F.Frame, data: st.DataObject
                                                           ) -> None:
    raw = bytearray(F.encode_frame(frame))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for candidate in (bytes(raw), bytes(raw[:cut])):
        try:
            F.decode_frame(candidate)
        except FrameDecodeError:  # a ProtocolError; anything else fails the test
            pass


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\x01\x00", "shorter"),
        (struct.pack("<HBBIIII", 2, 1, 2, 12, 0, 0, 0), "version"),
        (struct.pack("<HBBIIII", 1, 2, 2, 12, 0, 0, 0), "protocol"),
        (struct.pack("<HBBIIII", 1, 1, 9, 12, 0, 0, 0), "unknown message type"),
        (struct.pack("<HBBIIII", 1, 1, 2, 13, 0, 0, 0), "remaining length"),
        (struct.pack("<HBBIIII", 1, 1, 6, 12, 0, 0, 0), "FLOW payload"),
        (struct.pack("<HBBIIII", 1, 1, 3, 13, 0, 0, 0) + b"\x01", "not a map"),
        (struct.pack("<HBBIIII", 1, 1, 3, 13, 0, 0, 0) + b"\x80", "lacks key"),
    ],
)
def test_malformed_frames_name_the_problem(data: bytes, match: str) -> None:
    with pytest.raises(FrameDecodeError, match=match):
        F.decode_frame(data)


def test_decision_permanence_comes_from_bit_7() -> None:
    assert F.Decision.INCOMPATIBLE.permanent
    assert not F.Decision.LINK_LIMIT.permanent
    assert F.decision_from_wire(0x7E) is F.Decision.REFUSED
    assert F.decision_from_wire(0xFE) is F.Decision.TEMPORARY
