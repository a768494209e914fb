"""Aeron frame codecs: round trips, exact bytes, and the fuzz invariant."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exon.errors import FrameDecodeError
from exon.transport.aeron import frames as F
from exon.transport.aeron import layout as L

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
u8 = st.integers(0, 255)

# Bytes of real frames from the Aeron 1.15.1 capture (research/aeron-wire-frames.md).
SETUP_HEX = (
    "28000000000005000000000001 19c499e9030000704b507c704b507c00000001800500000000 0000"
)
SM_HEX = "240000000000030001 19c499e9030000704b507c0000000000000200 1cbc6e2227a453ad"
NAK_HEX = "1c00000000000200 0219c499ea030000 01381dd6c03f0000 40010000"


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_real_setup_decodes() -> None:
    frame = F.decode(_hex(SETUP_HEX))
    assert frame == F.SetupFrame(
        flags=0, term_offset=0, session_id=-1715201791, stream_id=1001,
        initial_term_id=2085636976, active_term_id=2085636976, term_length=16777216,
        mtu=1408, ttl=0,
    )
    assert F.encode(frame) == _hex(SETUP_HEX)


def test_real_sm_and_nak_decode() -> None:
    sm = F.decode(_hex(SM_HEX))
    assert isinstance(sm, F.StatusMessage)
    assert sm.receiver_window == 131072
    assert sm.receiver_id == -5957237394092671972
    assert sm.group_tag is None
    nak = F.decode(_hex(NAK_HEX))
    assert nak == F.NakFrame(
        flags=0, session_id=-1715201790, stream_id=1002, term_id=-702728191,
        term_offset=16320, length=320,
    )


def test_data_frame_is_aligned_on_the_wire() -> None:
    raw = F.encode_data(
        flags=0xC0, term_offset=0, session_id=1, stream_id=2, term_id=3, payload=b"Hello World! 1"
    )
    assert len(raw) == 64
    assert struct.unpack_from("<i", raw)[0] == 46
    assert raw[46:] == bytes(18)
    frame = F.decode(raw)
    assert isinstance(frame, F.DataFrame)
    assert frame.payload == b"Hello World! 1"
    assert frame.aligned_length == 64


def test_heartbeat_and_eos() -> None:
    raw = F.encode_heartbeat(term_offset=256, session_id=1, stream_id=2, term_id=3, eos=True)
    assert len(raw) == 32
    frame = F.decode(raw)
    assert isinstance(frame, F.DataFrame)
    assert frame.is_heartbeat
    assert frame.is_eos
    assert frame.flags == 0xE0


def test_batched_datagram_with_pad() -> None:
    frames = [
        F.DataFrame(frame_length=132, flags=0xC0, term_offset=64160 + 160 * i, session_id=7,
                    stream_id=1002, term_id=9, payload=bytes([i]) * 100)
        for i in range(8)
    ]
    pad = F.PadFrame(frame_length=96, flags=0xC0, term_offset=65440, session_id=7,
                     stream_id=1002, term_id=9)
    raw = F.encode_datagram([*frames, pad])
    assert len(raw) == 1312
    assert F.split_datagram(raw) == [*frames, pad]


def test_sm_with_group_tag_and_err_round_trip() -> None:
    sm = F.StatusMessage(flags=L.SM_FLAG_SEND_SETUP, session_id=1, stream_id=2,
                         consumption_term_id=0, consumption_term_offset=0, receiver_window=0,
                         receiver_id=5, group_tag=-9)
    raw = F.encode(sm)
    assert len(raw) == 44
    assert F.decode(raw) == sm
    err = F.ErrorFrame(flags=8, session_id=1, stream_id=2, receiver_id=3, group_tag=4,
                       error_code=13, message=b"image rejected")
    assert F.decode(F.encode(err)) == err
    res = F.ResFrame(flags=0, body=b"\x01\x80\x00\x01")
    assert F.decode(F.encode(res)) == res


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"", "short"),
        (b"\x28\x00\x00\x00\x00\x00\x05", "short"),
        (_hex(SETUP_HEX)[:39], "disagrees"),
        (_hex(SETUP_HEX) + b"\x00", "disagrees"),
        (b"\x28\x00\x00\x00\x01" + _hex(SETUP_HEX)[5:], "version"),
        (b"\x08\x00\x00\x00\x00\x00\x08\x00", "unknown frame type"),
        (b"\x08\x00\x00\x00\x00\x00\xff\xff", "unknown frame type"),
        (struct.pack("<ibBhiiiiq", 4000, 0, 0xC0, 1, 0, 1, 2, 3, 0) + bytes(32), "exceeds"),
        (struct.pack("<ibBhiiiiq", 20, 0, 0xC0, 1, 0, 1, 2, 3, 0), "< 32"),
        (struct.pack("<ibBhiiiiq", -5, 0, 0xC0, 1, 0, 1, 2, 3, 0), "negative"),
        (struct.pack("<ibBhiiiiq", 96, 0, 0xC0, 0, 0, 1, 2, 3, 0) + bytes(32), "last frame"),
        (struct.pack("<ibBhiiiiq", 0, 0, 0xC0, 1, 0, 1, 2, 3, 0) * 2, "alone"),
        (struct.pack("<ibBhiiqqii", 50, 0, 0, 4, 1, 2, 3, 4, 5, 2000) + bytes(10), "error_length"),
        (bytes(70000), "exceeds the UDP payload limit"),
    ],
)
def test_bad_input_raises_frame_decode_error(raw: bytes, why: str) -> None:
    with pytest.raises(FrameDecodeError, match=why):
        F.split_datagram(raw)


data_frames = st.builds(
    lambda payload, **kw: F.DataFrame(frame_length=32 + len(payload), payload=payload, **kw),
    payload=st.binary(max_size=200), flags=u8, term_offset=i32, session_id=i32,
    stream_id=i32, term_id=i32, reserved_value=i64,
)
control_frames = st.one_of(
    st.builds(F.SetupFrame, flags=u8, term_offset=i32, session_id=i32, stream_id=i32,
              initial_term_id=i32, active_term_id=i32, term_length=i32, mtu=i32, ttl=i32),
    st.builds(F.StatusMessage, flags=u8, session_id=i32, stream_id=i32,
              consumption_term_id=i32, consumption_term_offset=i32, receiver_window=i32,
              receiver_id=i64, group_tag=st.none() | i64),
    st.builds(F.NakFrame, flags=u8, session_id=i32, stream_id=i32, term_id=i32,
              term_offset=i32, length=i32),
    st.builds(F.RttmFrame, flags=u8, session_id=i32, stream_id=i32, echo_timestamp=i64,
              reception_delta=i64, receiver_id=i64),
    st.builds(F.ErrorFrame, flags=u8, session_id=i32, stream_id=i32, receiver_id=i64,
              group_tag=i64, error_code=i32, message=st.binary(max_size=1023)),
)


@given(control_frames)
def test_control_round_trip(frame: F.Frame) -> None:
    raw = F.encode(frame)
    assert F.decode(raw) == frame
    assert F.encode(F.decode(raw)) == raw


@given(st.lists(data_frames, min_size=1, max_size=6))
def test_data_datagram_round_trip(frames: list[F.Frame]) -> None:
    raw = F.encode_datagram(frames)
    assert len(raw) % 32 == 0
    assert F.split_datagram(raw) == frames


def _check_invariant(raw: bytes) -> None:
    try:
        frames = F.split_datagram(raw)
    except FrameDecodeError:
        return
    assert frames
    for frame in frames:  # whatever decodes re-encodes without error
        F.encode(frame)


@settings(max_examples=400)
@given(st.binary(max_size=300))
def test_fuzz_any_bytes_decode_or_raise_frame_decode_error(raw: bytes) -> None:
    _check_invariant(raw)


@settings(max_examples=400)
@given(st.one_of(control_frames, st.lists(data_frames, min_size=1, max_size=3)), st.data())
def test_fuzz_mutated_frames(frame: F.Frame | list[F.Frame], data: st.DataObject) -> None:
    raw = bytearray(F.encode_datagram(frame) if isinstance(frame, list) else F.encode(frame))
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
        if action == "flip" and raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(u8)
        elif action == "truncate":
            del raw[data.draw(st.integers(0, len(raw))):]
        else:
            raw += data.draw(st.binary(max_size=40))
    _check_invariant(bytes(raw))
