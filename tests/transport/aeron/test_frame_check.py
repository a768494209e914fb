"""The receiver's C datagram check accepts exactly what the Python codec decodes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from exon.errors import FrameDecodeError
from exon.native import ffi, lib
from exon.transport.aeron import frames as F
from tests.transport.aeron.test_frames import control_frames, data_frames


def _both(raw: bytes) -> None:
    info = ffi.new("exon_datagram_info_t *")
    rc = lib.exon_datagram_check(raw, len(raw), info)
    try:
        frames: list[F.Frame] | None = F.split_datagram(raw)
    except FrameDecodeError:
        frames = None
    if frames is None:
        assert rc == lib.EXON_E_ARGUMENT, f"C accepted what Python refused: {raw.hex()}"
        assert info.reason != lib.EXON_FRAME_OK
        return
    assert rc == 0, f"C refused (reason {info.reason}) what Python decoded: {raw.hex()}"
    assert info.frame_count == len(frames)


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_random_bytes(raw: bytes) -> None:
    _both(raw)


@settings(max_examples=500)
@given(st.one_of(control_frames, st.lists(data_frames, min_size=1, max_size=3)), st.data())
def test_mutated_frames(frame, data: st.DataObject) -> None:
    raw = bytearray(F.encode_datagram(frame) if isinstance(frame, list) else F.encode(frame))
    _both(bytes(raw))
    for _ in range(data.draw(st.integers(1, 3))):
        choice = data.draw(st.sampled_from(["flip", "cut", "grow", "len"]))
        if choice == "flip" and raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        elif choice == "cut":
            del raw[data.draw(st.integers(0, len(raw))):]
        elif choice == "grow":
            raw += data.draw(st.binary(max_size=64))
        elif len(raw) >= 4:
            value = data.draw(st.integers(-(2**31), 2**31 - 1))
            raw[0:4] = value.to_bytes(4, "little", signed=True)
    _both(bytes(raw))


def test_reasons() -> None:
    info = ffi.new("exon_datagram_info_t *")
    cases = {
        b"": lib.EXON_FRAME_SHORT,
        bytes(70000): lib.EXON_FRAME_OVERSIZED,
        b"\x08\x00\x00\x00\x01\x00\x05\x00": lib.EXON_FRAME_BAD_VERSION,
        b"\x08\x00\x00\x00\x00\x00\x09\x00": lib.EXON_FRAME_UNKNOWN_TYPE,
        b"\x09\x00\x00\x00\x00\x00\x05\x00": lib.EXON_FRAME_BAD_LENGTH,
    }
    for raw, reason in cases.items():
        assert lib.exon_datagram_check(raw, len(raw), info) == lib.EXON_E_ARGUMENT
        assert info.reason == reason
    hb = F.encode_heartbeat(term_offset=0, session_id=1, stream_id=2, term_id=3)
    assert lib.exon_datagram_check(hb, len(hb), info) == 0
    assert (info.type, info.frame_count) == (1, 1)
