"""Codecs for the exon frame: pure functions from values to bytes and back.

Every exon message travels as one Aeron message on the node-to-node stream::

    offset size field
         0    2 version           u16  (EXON_VERSION = 1)
         2    1 protocol          u8   (PROTOCOL_SOCKETS = 0x01)
         3    1 type              u8   (FrameType)
         4    4 remaining_length  u32  (bytes after this field: 12 + payload length)
         8    4 source_tag        u32
        12    4 destination_tag   u32
        16    4 incarnation       u32  (the sender's link incarnation; ERROR echoes the
                                        incarnation of the frame it answers)
        20    . payload (per type, below)

All integers are little-endian. Payloads:

* DATA    : the application's bytes, as is.
* LINK    : a msgpack map, the sender's :class:`LinkMetadata`.
* LINKACK : decision u8 (:class:`Decision`), flags u8 (bit 0: metadata present, bit 1:
            ``token`` present, bit 2: ``echo`` present), answers u32 (the incarnation of
            the LINK this answers), ``token`` 16 bytes when flag bit 1 is set, ``echo``
            16 bytes when flag bit 2 is set, then a msgpack map: the metadata keys when
            flag bit 0 is set, plus an optional ``"reason"`` text; an empty map is allowed.
            (The address-validation token, docs/protocol.md 2.6.1.)
* UNLINK  : sent u64, the number of DATA frames the sender sent on this link incarnation.
* FLOW    : delivered u64, limit u64 (AMQP-style absolute credit; see ``credits.py``).
* ERROR   : code u8 (:class:`ErrorCode`), then optional UTF-8 text.

``decode_frame`` raises :class:`exon.errors.FrameDecodeError` (a ``ProtocolError``) on
anything short, oversized, of another version or protocol, of unknown type or with a
malformed payload, and never anything else. This is the one Python declaration of the
header; ``exon.transport.aeron.layout`` names it beside the other layouts, where a test checks
it against the C struct. ``exon.core`` imports nothing from the transport.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack

from exon.errors import FrameDecodeError

EXON_VERSION: Final = 1
PROTOCOL_SOCKETS: Final = 0x01
PROTOCOL_NODES: Final = 0x02  # node-level frames (HELLO), handled by the Node

HEADER = struct.Struct("<HBBIIII")
HEADER_LENGTH: Final = HEADER.size  # 20
FIXED_HEADER_LENGTH: Final = 8
TAG_MAX: Final = 0xFFFF_FFFF
U64_MAX: Final = 0xFFFF_FFFF_FFFF_FFFF
#: Largest frame the decoder accepts: the largest ``max_message_size`` a socket may have
#: (``LinkSettings``, 1 GiB) plus the header. A frame longer than the transport's largest
#: message arrives in node-level FRAGMENTs (docs/protocol.md 2.14), joined again by the
#: Node within its sockets' largest ``max_message_size``; the decoder allocates nothing
#: from a length field.
MAX_FRAME_LENGTH: Final = HEADER_LENGTH + (1 << 30)

_U64 = struct.Struct("<Q")
_FLOW = struct.Struct("<QQ")
_ACK_PREFIX = struct.Struct("<BBI")
ACK_FLAG_METADATA: Final = 0x01
ACK_FLAG_TOKEN: Final = 0x02  #: a ``token`` follows ``answers``
ACK_FLAG_ECHO: Final = 0x04  #: an ``echo`` follows (after the token, if any)
_ACK_FLAGS: Final = ACK_FLAG_METADATA | ACK_FLAG_TOKEN | ACK_FLAG_ECHO
TOKEN_LENGTH: Final = 16  #: bytes of an address-validation token (LINKACK token / echo)


class FrameType(enum.IntEnum):
    """Message types of the sockets protocol (0x01)."""

    ERROR = 0x01
    DATA = 0x02
    LINK = 0x03
    LINKACK = 0x04
    UNLINK = 0x05
    FLOW = 0x06


class ErrorCode(enum.IntEnum):
    """Codes carried by ERROR frames."""

    SOCKET_NOT_FOUND = 0x01  #: no socket with the destination tag on this node
    SOCKET_NOT_LINKED = 0x02  #: non-LINK frame from a socket that is not linked
    CREDIT_EXCEEDED = 0x03  #: DATA beyond the granted credit; the link is closed
    MESSAGE_TOO_LARGE = 0x04  #: DATA larger than the advertised max size; link closed
    PROTOCOL_VIOLATION = 0x05  #: frame not allowed in the link's state; link closed


class Decision(enum.IntEnum):
    """A socket's decision in LINKACK. Bit 7 set means *temporary* (retrying may help)."""

    ACCEPTED = 0x00
    INCOMPATIBLE = 0x01  #: socket types cannot talk (static: never retried)
    UNAUTHORIZED = 0x02  #: the link policy's authentication failed
    REFUSED = 0x03  #: a custom policy refused, permanently
    CANCELLED = 0x04  #: the socket gave up the handshake (unlink/close)
    TEMPORARY = 0x80  #: a custom policy refused, for now
    LINK_LIMIT = 0x81  #: the socket has reached its maximum number of links
    SOCKET_NOT_FOUND = 0x82  #: local only: the peer answered ERROR SOCKET_NOT_FOUND

    @property
    def accepted(self) -> bool:
        """True for :attr:`ACCEPTED`."""
        return self is Decision.ACCEPTED

    @property
    def permanent(self) -> bool:
        """False for temporary refusals (bit 7 set); ACCEPTED counts as permanent."""
        return not (self.value & 0x80)


def decision_from_wire(value: int) -> Decision:
    """Unknown codes map to REFUSED or TEMPORARY by their bit 7, so newer peers interoperate."""
    try:
        return Decision(value)
    except ValueError:
        return Decision.TEMPORARY if value & 0x80 else Decision.REFUSED


# ---- metadata -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkMetadata:
    """What a socket tells its counterpart in LINK (and LINKACK with metadata).

    msgpack keys: ``type`` str, ``credits`` int, ``max_size`` int, ``node`` str,
    ``reply`` str, ``nonce`` bin, ``custom`` map (optional; policy fields).
    """

    socket_type: str  #: e.g. "req", "rep", "push", "pull"
    credits: int  #: initial credits the sender of this metadata grants its peer
    max_message_size: int  #: largest DATA payload the sender of this metadata accepts
    node_id: str  #: identity of the sender's node (changes when the node restarts)
    reply_address: str  #: where frames for the sender's node must be sent
    nonce: bytes = b""  #: fresh random bytes, a challenge for link policies
    custom: dict[str, Any] = field(default_factory=dict)  #: link-policy fields

    def to_wire(self) -> dict[str, Any]:
        """The msgpack map (string keys) that carries this metadata."""
        out: dict[str, Any] = {
            "type": self.socket_type,
            "credits": self.credits,
            "max_size": self.max_message_size,
            "node": self.node_id,
            "reply": self.reply_address,
            "nonce": self.nonce,
        }
        if self.custom:
            out["custom"] = self.custom
        return out

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> LinkMetadata:
        """Metadata from a decoded msgpack map; :class:`exon.ProtocolError` (a
        ``FrameDecodeError``) when a field is missing or of the wrong type."""
        try:
            socket_type = data["type"]
            credits = data["credits"]
            max_size = data["max_size"]
            node_id = data["node"]
            reply = data["reply"]
        except KeyError as exc:
            raise FrameDecodeError(f"link metadata lacks key {exc.args[0]!r}") from None
        nonce = data.get("nonce", b"")
        custom = data.get("custom", {})
        if not isinstance(socket_type, str) or not isinstance(node_id, str):
            raise FrameDecodeError("link metadata 'type' and 'node' must be strings")
        if not isinstance(reply, str):
            raise FrameDecodeError("link metadata 'reply' must be a string")
        for name, value in (("credits", credits), ("max_size", max_size)):
            if type(value) is not int or not 0 <= value <= U64_MAX:
                raise FrameDecodeError(f"link metadata {name!r} must be an unsigned integer")
        if not isinstance(nonce, bytes):
            raise FrameDecodeError("link metadata 'nonce' must be binary")
        if not isinstance(custom, dict):
            raise FrameDecodeError("link metadata 'custom' must be a map")
        return cls(
            socket_type=socket_type,
            credits=credits,
            max_message_size=max_size,
            node_id=node_id,
            reply_address=reply,
            nonce=nonce,
            custom=custom,
        )


# ---- decoded frames -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """A decoded frame. Exactly the fields of its type are meaningful."""

    type: FrameType
    source_tag: int
    destination_tag: int
    incarnation: int
    payload: bytes = b""  #: DATA only
    metadata: LinkMetadata | None = None  #: LINK; LINKACK when sent with metadata
    decision: Decision = Decision.ACCEPTED  #: LINKACK
    reason: str = ""  #: LINKACK refusal text, ERROR text
    count: int = 0  #: UNLINK: DATA frames sent
    delivered: int = 0  #: FLOW
    limit: int = 0  #: FLOW
    answers: int = 0  #: LINKACK: the incarnation of the LINK it answers
    error: ErrorCode | int = 0  #: ERROR (unknown codes kept as int)
    token: bytes = b""  #: LINKACK: address-validation token its receiver must echo
    echo: bytes = b""  #: LINKACK: the token of the receiver's LINKACK, echoed


# ---- encoders -----------------------------------------------------------------------------


def _header(ftype: int, src: int, dst: int, inc: int, payload_length: int) -> bytes:
    return HEADER.pack(
        EXON_VERSION, PROTOCOL_SOCKETS, ftype, 12 + payload_length, src, dst, inc
    )


def _pack_map(data: dict[str, Any]) -> bytes:
    return msgpack.packb(data, use_bin_type=True)  # type: ignore[no-any-return]


def encode_data(src: int, dst: int, incarnation: int, payload: bytes) -> bytes:
    return _header(FrameType.DATA, src, dst, incarnation, len(payload)) + payload


def encode_link(src: int, dst: int, incarnation: int, metadata: LinkMetadata) -> bytes:
    body = _pack_map(metadata.to_wire())
    return _header(FrameType.LINK, src, dst, incarnation, len(body)) + body


def encode_linkack(
    src: int,
    dst: int,
    incarnation: int,
    decision: Decision,
    metadata: LinkMetadata | None = None,
    reason: str = "",
    *,
    answers: int,
    token: bytes = b"",
    echo: bytes = b"",
) -> bytes:
    fields: dict[str, Any] = metadata.to_wire() if metadata is not None else {}
    if reason:
        fields["reason"] = reason
    for name, value in (("token", token), ("echo", echo)):
        if value and len(value) != TOKEN_LENGTH:
            raise ValueError(f"a LINKACK {name} is {TOKEN_LENGTH} bytes, not {len(value)}")
    flags = ((ACK_FLAG_METADATA if metadata else 0) | (ACK_FLAG_TOKEN if token else 0)
             | (ACK_FLAG_ECHO if echo else 0))
    body = _ACK_PREFIX.pack(int(decision), flags, answers) + token + echo
    body += _pack_map(fields)
    return _header(FrameType.LINKACK, src, dst, incarnation, len(body)) + body


def encode_unlink(src: int, dst: int, incarnation: int, sent: int) -> bytes:
    return _header(FrameType.UNLINK, src, dst, incarnation, 8) + _U64.pack(sent)


def encode_flow(src: int, dst: int, incarnation: int, delivered: int, limit: int) -> bytes:
    return _header(FrameType.FLOW, src, dst, incarnation, 16) + _FLOW.pack(delivered, limit)


def encode_error(src: int, dst: int, incarnation: int, code: int, text: str = "") -> bytes:
    body = bytes([code]) + text.encode("utf-8")
    return _header(FrameType.ERROR, src, dst, incarnation, len(body)) + body


def encode_frame(frame: Frame) -> bytes:
    """Encode any :class:`Frame` (the inverse of :func:`decode_frame`)."""
    s, d, i = frame.source_tag, frame.destination_tag, frame.incarnation
    t = frame.type
    if t is FrameType.DATA:
        return encode_data(s, d, i, frame.payload)
    if t is FrameType.LINK:
        if frame.metadata is None:
            raise ValueError("a LINK frame needs metadata")
        return encode_link(s, d, i, frame.metadata)
    if t is FrameType.LINKACK:
        return encode_linkack(s, d, i, frame.decision, frame.metadata, frame.reason,
                              answers=frame.answers, token=frame.token, echo=frame.echo)
    if t is FrameType.UNLINK:
        return encode_unlink(s, d, i, frame.count)
    if t is FrameType.FLOW:
        return encode_flow(s, d, i, frame.delivered, frame.limit)
    return encode_error(s, d, i, int(frame.error), frame.reason)


# ---- decoder ------------------------------------------------------------------------------


def _unpack_map(body: bytes | memoryview) -> dict[str, Any]:
    if len(body) == 0:
        raise FrameDecodeError("missing msgpack map")
    try:
        value = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises many types; all mean "malformed"
        raise FrameDecodeError(f"malformed msgpack: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise FrameDecodeError("msgpack payload is not a map")
    return value


def peek_header(data: bytes | memoryview) -> tuple[int, int, int, int, int, int, int]:
    """Validate and unpack the 20-byte header; returns the raw tuple."""
    if len(data) < HEADER_LENGTH:
        raise FrameDecodeError(f"frame of {len(data)} bytes is shorter than the 20-byte header")
    if len(data) > MAX_FRAME_LENGTH:
        raise FrameDecodeError(f"frame of {len(data)} bytes exceeds {MAX_FRAME_LENGTH}")
    fields = HEADER.unpack_from(data, 0)
    version, protocol, ftype, remaining = fields[0], fields[1], fields[2], fields[3]
    if version != EXON_VERSION:
        raise FrameDecodeError(f"unsupported exon version {version} (expected {EXON_VERSION})")
    if protocol != PROTOCOL_SOCKETS:
        raise FrameDecodeError(f"unsupported middleware protocol 0x{protocol:02x}")
    if remaining != len(data) - FIXED_HEADER_LENGTH:
        raise FrameDecodeError(
            f"remaining length {remaining} does not match the {len(data) - 8} bytes present"
        )
    if not FrameType.ERROR.value <= ftype <= FrameType.FLOW.value:
        raise FrameDecodeError(f"unknown message type 0x{ftype:02x}")
    return fields


def decode_frame(data: bytes | memoryview) -> Frame:
    """Decode one frame; raises :class:`FrameDecodeError` on anything malformed."""
    _v, _p, ftype, _r, src, dst, inc = peek_header(data)
    body = bytes(data[HEADER_LENGTH:])
    t = FrameType(ftype)
    if t is FrameType.DATA:
        return Frame(type=t, source_tag=src, destination_tag=dst, incarnation=inc, payload=body)
    if t is FrameType.LINK:
        meta = LinkMetadata.from_wire(_unpack_map(body))
        return Frame(type=t, source_tag=src, destination_tag=dst, incarnation=inc, metadata=meta)
    if t is FrameType.LINKACK:
        if len(body) < _ACK_PREFIX.size:
            raise FrameDecodeError(f"LINKACK payload shorter than {_ACK_PREFIX.size} bytes")
        code, flags, answers = _ACK_PREFIX.unpack_from(body, 0)
        if flags & ~_ACK_FLAGS:
            raise FrameDecodeError(f"LINKACK has unknown flags 0x{flags:02x}")
        at = _ACK_PREFIX.size
        token = echo = b""
        if flags & ACK_FLAG_TOKEN:
            token, at = body[at : at + TOKEN_LENGTH], at + TOKEN_LENGTH
        if flags & ACK_FLAG_ECHO:
            echo, at = body[at : at + TOKEN_LENGTH], at + TOKEN_LENGTH
        if at > len(body):
            raise FrameDecodeError("LINKACK payload shorter than its token and echo")
        fields = _unpack_map(body[at:])
        reason = fields.get("reason", "")
        if not isinstance(reason, str):
            raise FrameDecodeError("LINKACK 'reason' must be a string")
        ack_meta = LinkMetadata.from_wire(fields) if flags & ACK_FLAG_METADATA else None
        return Frame(
            type=t,
            source_tag=src,
            destination_tag=dst,
            incarnation=inc,
            decision=decision_from_wire(code),
            metadata=ack_meta,
            reason=reason,
            answers=answers,
            token=token,
            echo=echo,
        )
    if t is FrameType.UNLINK:
        if len(body) != _U64.size:
            raise FrameDecodeError(f"UNLINK payload must be 8 bytes, got {len(body)}")
        (sent,) = _U64.unpack(body)
        return Frame(type=t, source_tag=src, destination_tag=dst, incarnation=inc, count=sent)
    if t is FrameType.FLOW:
        if len(body) != _FLOW.size:
            raise FrameDecodeError(f"FLOW payload must be 16 bytes, got {len(body)}")
        delivered, limit = _FLOW.unpack(body)
        if delivered > limit:
            raise FrameDecodeError(f"FLOW delivered {delivered} exceeds limit {limit}")
        return Frame(
            type=t,
            source_tag=src,
            destination_tag=dst,
            incarnation=inc,
            delivered=delivered,
            limit=limit,
        )
    # ERROR
    if len(body) < 1:
        raise FrameDecodeError("ERROR payload lacks the error code")
    try:
        text = body[1:].decode("utf-8")
    except UnicodeDecodeError:
        raise FrameDecodeError("ERROR text is not valid UTF-8") from None
    error: ErrorCode | int
    try:
        error = ErrorCode(body[0])
    except ValueError:
        error = body[0]
    return Frame(type=t, source_tag=src, destination_tag=dst, incarnation=inc, error=error,
                 reason=text)
