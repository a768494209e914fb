"""Pure codecs for Aeron's UDP frames (wire-compatible with Aeron 1.15.1 and later).

Every frame kind is a frozen dataclass. ``encode(frame)`` (or the keyword helpers
``encode_data``, ``encode_setup``, ...) gives the exact bytes that travel in a datagram;
``decode(buf)`` turns the bytes of exactly one frame back into a dataclass and
``split_datagram(buf)`` the bytes of a whole datagram, which may carry several DATA frames
packed back to back at 32-byte alignment, optionally closed by a PAD header.

Decoding never trusts a length field: anything short, oversized, of the wrong version, of
an unknown type, or whose lengths disagree with the bytes present raises
:class:`exon.errors.FrameDecodeError` and nothing else. The layouts come from
:mod:`exon.transport.aeron.layout` (declared once, checked against C).

Wire facts worth knowing (see docs/protocol.md, "Frames"):

* a DATA frame's ``frame_length`` is the unaligned length (32 + payload) but on the wire
  the frame is followed by zero bytes up to the next multiple of 32;
* a heartbeat is a DATA header alone with ``frame_length`` 0 (32 bytes on the wire);
* a PAD frame's ``frame_length`` covers the rest of its term, yet only its 32-byte header
  is sent, always as the last frame of its datagram;
* control frames (SETUP, SM, NAK, RTTM, ERR, RES) travel one per datagram.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from exon.errors import FrameDecodeError
from exon.transport.aeron import layout as L

__all__ = [
    "DataFrame",
    "ErrorFrame",
    "Frame",
    "NakFrame",
    "PadFrame",
    "ResFrame",
    "RttmFrame",
    "SetupFrame",
    "StatusMessage",
    "decode",
    "encode",
    "encode_data",
    "encode_datagram",
    "encode_err",
    "encode_heartbeat",
    "encode_nak",
    "encode_pad",
    "encode_rttm",
    "encode_setup",
    "encode_sm",
    "split_datagram",
]

_ZEROS = bytes(L.FRAME_ALIGNMENT)
_FRAME_HEADER_LENGTH = L.FRAME_HEADER.size


# ---- frame kinds ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DataFrame:
    """A DATA frame: one message fragment, or a heartbeat when ``frame_length`` is 0."""

    frame_length: int  #: 32 + len(payload), or 0 for a heartbeat
    flags: int  #: BEGIN 0x80, END 0x40, EOS 0x20
    term_offset: int
    session_id: int
    stream_id: int
    term_id: int
    reserved_value: int = 0
    payload: bytes = b""

    @property
    def is_heartbeat(self) -> bool:
        return self.frame_length == 0

    @property
    def is_eos(self) -> bool:
        return bool(self.flags & L.DATA_FLAG_EOS)

    @property
    def aligned_length(self) -> int:
        """Bytes this frame takes on the wire and in a term (32 for a heartbeat)."""
        return L.align(max(self.frame_length, L.DATA_HEADER_LENGTH), L.FRAME_ALIGNMENT)


@dataclass(frozen=True, slots=True, kw_only=True)
class PadFrame:
    """A PAD frame header; ``frame_length`` covers the padded rest of the term."""

    frame_length: int
    flags: int
    term_offset: int
    session_id: int
    stream_id: int
    term_id: int
    reserved_value: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupFrame:
    """SETUP (sender -> receiver): what a receiver needs to create an image."""

    flags: int
    term_offset: int
    session_id: int
    stream_id: int
    initial_term_id: int
    active_term_id: int
    term_length: int
    mtu: int
    ttl: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusMessage:
    """SM (receiver -> sender): consumption position and receiver window."""

    flags: int  #: SEND_SETUP 0x80, EOS 0x40
    session_id: int
    stream_id: int
    consumption_term_id: int
    consumption_term_offset: int
    receiver_window: int
    receiver_id: int
    group_tag: int | None = None  #: present iff frame_length is 44


@dataclass(frozen=True, slots=True, kw_only=True)
class NakFrame:
    """NAK (receiver -> sender): the byte range ``[term_offset, term_offset + length)``."""

    flags: int
    session_id: int
    stream_id: int
    term_id: int
    term_offset: int
    length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RttmFrame:
    """RTTM: a request carries REPLY 0x80; the answer echoes it without the flag."""

    flags: int
    session_id: int
    stream_id: int
    echo_timestamp: int
    reception_delta: int
    receiver_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorFrame:
    """ERR (receiver -> sender): an error code and at most 1023 bytes of text."""

    flags: int
    session_id: int
    stream_id: int
    receiver_id: int
    group_tag: int
    error_code: int
    message: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResFrame:
    """RES (name resolution); exon does not use it and keeps its body opaque."""

    flags: int
    body: bytes = b""


Frame = (
    DataFrame | PadFrame | SetupFrame | StatusMessage | NakFrame | RttmFrame | ErrorFrame | ResFrame
)


# ---- encoding --------------------------------------------------------------------------


def _pack(st: struct.Struct, *values: int) -> bytes:
    try:
        return st.pack(*values)
    except struct.error as exc:
        raise ValueError(f"frame field out of range: {exc}") from exc


def encode_data(
    *,
    flags: int,
    term_offset: int,
    session_id: int,
    stream_id: int,
    term_id: int,
    payload: bytes = b"",
    reserved_value: int = 0,
) -> bytes:
    """Wire bytes of a DATA frame carrying ``payload`` (zero-filled to 32-byte alignment)."""
    return encode(
        DataFrame(
            frame_length=L.DATA_HEADER_LENGTH + len(payload),
            flags=flags,
            term_offset=term_offset,
            session_id=session_id,
            stream_id=stream_id,
            term_id=term_id,
            reserved_value=reserved_value,
            payload=bytes(payload),
        )
    )


def encode_heartbeat(
    *, term_offset: int, session_id: int, stream_id: int, term_id: int, eos: bool = False
) -> bytes:
    """Wire bytes of a heartbeat (flags 0xC0, 0xE0 with ``eos``)."""
    flags = L.DATA_FLAG_UNFRAGMENTED | (L.DATA_FLAG_EOS if eos else 0)
    return _pack(
        L.DATA_HEADER, 0, L.FRAME_VERSION, flags, L.HDR_TYPE_DATA,
        term_offset, session_id, stream_id, term_id, 0,
    )


def encode_pad(
    *, frame_length: int, term_offset: int, session_id: int, stream_id: int, term_id: int,
    flags: int = L.DATA_FLAG_UNFRAGMENTED,
) -> bytes:
    """Wire bytes of a PAD header (only the header is ever sent)."""
    return encode(
        PadFrame(
            frame_length=frame_length, flags=flags, term_offset=term_offset,
            session_id=session_id, stream_id=stream_id, term_id=term_id,
        )
    )


def encode_setup(
    *, term_offset: int, session_id: int, stream_id: int, initial_term_id: int,
    active_term_id: int, term_length: int, mtu: int, ttl: int = 0, flags: int = 0,
) -> bytes:
    return encode(
        SetupFrame(
            flags=flags, term_offset=term_offset, session_id=session_id, stream_id=stream_id,
            initial_term_id=initial_term_id, active_term_id=active_term_id,
            term_length=term_length, mtu=mtu, ttl=ttl,
        )
    )


def encode_sm(
    *, session_id: int, stream_id: int, consumption_term_id: int, consumption_term_offset: int,
    receiver_window: int, receiver_id: int, flags: int = 0, group_tag: int | None = None,
) -> bytes:
    return encode(
        StatusMessage(
            flags=flags, session_id=session_id, stream_id=stream_id,
            consumption_term_id=consumption_term_id,
            consumption_term_offset=consumption_term_offset,
            receiver_window=receiver_window, receiver_id=receiver_id, group_tag=group_tag,
        )
    )


def encode_nak(
    *, session_id: int, stream_id: int, term_id: int, term_offset: int, length: int,
    flags: int = 0,
) -> bytes:
    return encode(
        NakFrame(
            flags=flags, session_id=session_id, stream_id=stream_id, term_id=term_id,
            term_offset=term_offset, length=length,
        )
    )


def encode_rttm(
    *, session_id: int, stream_id: int, echo_timestamp: int, reception_delta: int,
    receiver_id: int, flags: int = 0,
) -> bytes:
    return encode(
        RttmFrame(
            flags=flags, session_id=session_id, stream_id=stream_id,
            echo_timestamp=echo_timestamp, reception_delta=reception_delta,
            receiver_id=receiver_id,
        )
    )


def encode_err(
    *, session_id: int, stream_id: int, receiver_id: int, error_code: int, message: bytes,
    group_tag: int = 0, flags: int = 0,
) -> bytes:
    return encode(
        ErrorFrame(
            flags=flags, session_id=session_id, stream_id=stream_id, receiver_id=receiver_id,
            group_tag=group_tag, error_code=error_code, message=bytes(message),
        )
    )


def encode(frame: Frame) -> bytes:
    """Exact wire bytes of ``frame``; ``ValueError`` if its fields are inconsistent."""
    if isinstance(frame, DataFrame):
        if frame.frame_length == 0:
            if frame.payload:
                raise ValueError("a heartbeat (frame_length 0) carries no payload")
        elif frame.frame_length != L.DATA_HEADER_LENGTH + len(frame.payload):
            raise ValueError(
                f"DATA frame_length {frame.frame_length} != 32 + payload {len(frame.payload)}"
            )
        head = _pack(
            L.DATA_HEADER, frame.frame_length, L.FRAME_VERSION, frame.flags, L.HDR_TYPE_DATA,
            frame.term_offset, frame.session_id, frame.stream_id, frame.term_id,
            frame.reserved_value,
        )
        tail = -len(frame.payload) % L.FRAME_ALIGNMENT
        return head + frame.payload + _ZEROS[:tail]
    if isinstance(frame, PadFrame):
        if frame.frame_length < L.DATA_HEADER_LENGTH:
            raise ValueError(f"PAD frame_length {frame.frame_length} < 32")
        return _pack(
            L.DATA_HEADER, frame.frame_length, L.FRAME_VERSION, frame.flags, L.HDR_TYPE_PAD,
            frame.term_offset, frame.session_id, frame.stream_id, frame.term_id,
            frame.reserved_value,
        )
    if isinstance(frame, SetupFrame):
        return _pack(
            L.SETUP_HEADER, L.SETUP_LENGTH, L.FRAME_VERSION, frame.flags, L.HDR_TYPE_SETUP,
            frame.term_offset, frame.session_id, frame.stream_id, frame.initial_term_id,
            frame.active_term_id, frame.term_length, frame.mtu, frame.ttl,
        )
    if isinstance(frame, StatusMessage):
        length = L.SM_LENGTH if frame.group_tag is None else L.SM_WITH_GROUP_TAG_LENGTH
        out = _pack(
            L.SM_HEADER, length, L.FRAME_VERSION, frame.flags, L.HDR_TYPE_SM,
            frame.session_id, frame.stream_id, frame.consumption_term_id,
            frame.consumption_term_offset, frame.receiver_window, frame.receiver_id,
        )
        if frame.group_tag is not None:
            out += _pack(L.SM_GROUP_TAG, frame.group_tag)
        return out
    if isinstance(frame, NakFrame):
        return _pack(
            L.NAK_HEADER, L.NAK_LENGTH, L.FRAME_VERSION, frame.flags, L.HDR_TYPE_NAK,
            frame.session_id, frame.stream_id, frame.term_id, frame.term_offset, frame.length,
        )
    if isinstance(frame, RttmFrame):
        return _pack(
            L.RTTM_HEADER, L.RTTM_LENGTH, L.FRAME_VERSION, frame.flags, L.HDR_TYPE_RTTM,
            frame.session_id, frame.stream_id, frame.echo_timestamp, frame.reception_delta,
            frame.receiver_id,
        )
    if isinstance(frame, ErrorFrame):
        if len(frame.message) > L.ERR_MAX_TEXT_LENGTH:
            raise ValueError(f"ERR text of {len(frame.message)} bytes > {L.ERR_MAX_TEXT_LENGTH}")
        return _pack(
            L.ERR_HEADER, L.ERR_HEADER_LENGTH + len(frame.message), L.FRAME_VERSION,
            frame.flags, L.HDR_TYPE_ERR, frame.session_id, frame.stream_id, frame.receiver_id,
            frame.group_tag, frame.error_code, len(frame.message),
        ) + frame.message
    if isinstance(frame, ResFrame):
        return _pack(
            L.FRAME_HEADER, _FRAME_HEADER_LENGTH + len(frame.body), L.FRAME_VERSION,
            frame.flags, L.HDR_TYPE_RES,
        ) + frame.body
    raise TypeError(f"not an Aeron frame: {type(frame).__name__}")


def encode_datagram(frames: Iterable[Frame]) -> bytes:
    """Wire bytes of a datagram carrying ``frames`` back to back."""
    return b"".join(encode(f) for f in frames)


# ---- decoding --------------------------------------------------------------------------

_CONTROL_TYPES = {
    L.HDR_TYPE_SETUP: "SETUP",
    L.HDR_TYPE_SM: "SM",
    L.HDR_TYPE_NAK: "NAK",
    L.HDR_TYPE_RTTM: "RTTM",
    L.HDR_TYPE_ERR: "ERR",
    L.HDR_TYPE_RES: "RES",
}


def _header(buf: memoryview, offset: int) -> tuple[int, int, int, int]:
    if len(buf) - offset < _FRAME_HEADER_LENGTH:
        raise FrameDecodeError(
            f"frame at {offset} is short: {len(buf) - offset} bytes < {_FRAME_HEADER_LENGTH}"
        )
    frame_length, version, flags, type_ = L.FRAME_HEADER.unpack_from(buf, offset)
    if version != L.FRAME_VERSION:
        raise FrameDecodeError(f"frame at {offset}: version {version & 0xFF}, expected 0")
    if frame_length < 0:
        raise FrameDecodeError(f"frame at {offset}: negative frame_length {frame_length}")
    return frame_length, flags, type_ & 0xFFFF, version


def _decode_data_or_pad(buf: memoryview, offset: int) -> tuple[DataFrame | PadFrame, int]:
    """Decode the DATA/PAD frame at ``offset``; return it and its length on the wire."""
    available = len(buf) - offset
    if available < L.DATA_HEADER_LENGTH:
        raise FrameDecodeError(f"DATA/PAD frame at {offset} is short: {available} bytes < 32")
    (frame_length, _v, flags, type_, term_offset, session_id, stream_id, term_id,
     reserved) = L.DATA_HEADER.unpack_from(buf, offset)
    if type_ == L.HDR_TYPE_PAD:
        if frame_length < L.DATA_HEADER_LENGTH:
            raise FrameDecodeError(f"PAD frame at {offset}: frame_length {frame_length} < 32")
        pad = PadFrame(
            frame_length=frame_length, flags=flags, term_offset=term_offset,
            session_id=session_id, stream_id=stream_id, term_id=term_id, reserved_value=reserved,
        )
        return pad, L.DATA_HEADER_LENGTH
    if frame_length == 0:
        wire = L.DATA_HEADER_LENGTH
        payload = b""
    else:
        if frame_length < L.DATA_HEADER_LENGTH:
            raise FrameDecodeError(f"DATA frame at {offset}: frame_length {frame_length} < 32")
        wire = L.align(frame_length, L.FRAME_ALIGNMENT)
        if wire > available:
            raise FrameDecodeError(
                f"DATA frame at {offset}: frame_length {frame_length} (aligned {wire}) "
                f"exceeds the {available} bytes present"
            )
        payload = bytes(buf[offset + L.DATA_HEADER_LENGTH : offset + frame_length])
    data = DataFrame(
        frame_length=frame_length, flags=flags, term_offset=term_offset, session_id=session_id,
        stream_id=stream_id, term_id=term_id, reserved_value=reserved, payload=payload,
    )
    return data, wire


def _decode_control(buf: memoryview, type_: int, frame_length: int, flags: int) -> Frame:
    """Decode a control frame that must fill ``buf`` exactly."""
    name = _CONTROL_TYPES[type_]
    if frame_length != len(buf):
        raise FrameDecodeError(
            f"{name} frame_length {frame_length} disagrees with the {len(buf)} bytes present"
        )
    if type_ == L.HDR_TYPE_SETUP:
        if frame_length != L.SETUP_LENGTH:
            raise FrameDecodeError(f"SETUP frame_length {frame_length}, expected 40")
        v = L.SETUP_HEADER.unpack_from(buf)
        return SetupFrame(
            flags=flags, term_offset=v[4], session_id=v[5], stream_id=v[6],
            initial_term_id=v[7], active_term_id=v[8], term_length=v[9], mtu=v[10], ttl=v[11],
        )
    if type_ == L.HDR_TYPE_SM:
        if frame_length not in (L.SM_LENGTH, L.SM_WITH_GROUP_TAG_LENGTH):
            raise FrameDecodeError(f"SM frame_length {frame_length}, expected 36 or 44")
        v = L.SM_HEADER.unpack_from(buf)
        tag = None
        if frame_length == L.SM_WITH_GROUP_TAG_LENGTH:
            (tag,) = L.SM_GROUP_TAG.unpack_from(buf, L.SM_GROUP_TAG_OFFSET)
        return StatusMessage(
            flags=flags, session_id=v[4], stream_id=v[5], consumption_term_id=v[6],
            consumption_term_offset=v[7], receiver_window=v[8], receiver_id=v[9], group_tag=tag,
        )
    if type_ == L.HDR_TYPE_NAK:
        if frame_length != L.NAK_LENGTH:
            raise FrameDecodeError(f"NAK frame_length {frame_length}, expected 28")
        v = L.NAK_HEADER.unpack_from(buf)
        return NakFrame(
            flags=flags, session_id=v[4], stream_id=v[5], term_id=v[6], term_offset=v[7],
            length=v[8],
        )
    if type_ == L.HDR_TYPE_RTTM:
        if frame_length != L.RTTM_LENGTH:
            raise FrameDecodeError(f"RTTM frame_length {frame_length}, expected 40")
        v = L.RTTM_HEADER.unpack_from(buf)
        return RttmFrame(
            flags=flags, session_id=v[4], stream_id=v[5], echo_timestamp=v[6],
            reception_delta=v[7], receiver_id=v[8],
        )
    if type_ == L.HDR_TYPE_ERR:
        if frame_length < L.ERR_HEADER_LENGTH:
            raise FrameDecodeError(f"ERR frame_length {frame_length} < 40")
        v = L.ERR_HEADER.unpack_from(buf)
        text_length = v[9]
        if not 0 <= text_length <= L.ERR_MAX_TEXT_LENGTH:
            raise FrameDecodeError(f"ERR error_length {text_length} outside [0, 1023]")
        if L.ERR_HEADER_LENGTH + text_length != frame_length:
            raise FrameDecodeError(
                f"ERR error_length {text_length} disagrees with frame_length {frame_length}"
            )
        return ErrorFrame(
            flags=flags, session_id=v[4], stream_id=v[5], receiver_id=v[6], group_tag=v[7],
            error_code=v[8], message=bytes(buf[L.ERR_HEADER_LENGTH:frame_length]),
        )
    # RES: opaque body
    return ResFrame(flags=flags, body=bytes(buf[_FRAME_HEADER_LENGTH:frame_length]))


def _as_view(data: bytes | bytearray | memoryview) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    if len(view) > L.MAX_UDP_PAYLOAD_LENGTH:
        raise FrameDecodeError(
            f"datagram of {len(view)} bytes exceeds the UDP payload limit "
            f"{L.MAX_UDP_PAYLOAD_LENGTH}"
        )
    return view


def split_datagram(data: bytes | bytearray | memoryview) -> list[Frame]:
    """Decode every frame of one datagram.

    A datagram is either one control frame, or DATA frames back to back at 32-byte
    alignment; a PAD header may close it, and a heartbeat travels alone.
    """
    buf = _as_view(data)
    frame_length, flags, type_, _ = _header(buf, 0)
    if type_ in _CONTROL_TYPES:
        return [_decode_control(buf, type_, frame_length, flags)]
    if type_ not in (L.HDR_TYPE_DATA, L.HDR_TYPE_PAD):
        raise FrameDecodeError(f"unknown frame type 0x{type_:04x}")
    frames: list[Frame] = []
    offset = 0
    while offset < len(buf):
        _, _, type_, _ = _header(buf, offset)
        if type_ not in (L.HDR_TYPE_DATA, L.HDR_TYPE_PAD):
            raise FrameDecodeError(
                f"frame at {offset}: type 0x{type_:04x} cannot follow DATA in a datagram"
            )
        frame, wire = _decode_data_or_pad(buf, offset)
        if isinstance(frame, DataFrame) and frame.is_heartbeat and len(buf) != wire:
            raise FrameDecodeError("a heartbeat must travel alone in its datagram")
        if isinstance(frame, PadFrame) and offset + wire != len(buf):
            raise FrameDecodeError(f"PAD header at {offset} is not the last frame of its datagram")
        frames.append(frame)
        offset += wire
    return frames


def decode(data: bytes | bytearray | memoryview) -> Frame:
    """Decode ``data`` holding exactly one frame (its bytes on the wire)."""
    frames = split_datagram(data)
    if len(frames) != 1:
        raise FrameDecodeError(f"expected one frame, found {len(frames)}")
    return frames[0]
