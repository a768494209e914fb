"""The replication stream's messages (docs/protocol.md 3.7): pure codecs.

Stream (the primary's PUSH -> the replica's PULL), little-endian::

    0  u8   kind        1 RECORDS, 2 CATALOG, 3 HEARTBEAT, 4 ERROR
    1  u8[3] reserved
    4  u32  session
    8  u32  recording_id (RECORDS; else 0)
    12 u32  flags       RECORDS: bit 0 KEYED (the recording takes keyed ingest: the
                        replica reads the records' dedup keys); else 0
    16 i64  position    RECORDS: the position of the first record byte
    24 .    RECORDS: whole records exactly as on disk; CATALOG, HEARTBEAT, ERROR: msgpack

Acknowledgement (the replica's PUSH -> the primary's ack PULL): msgpack
``{"session": N, "positions": {recording_id: durable position}}``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from exon.archive.errors import ControlError

STREAM_HEADER: Final = struct.Struct("<B3xIIIq")
RECORDS: Final = 1
CATALOG: Final = 2
HEARTBEAT: Final = 3
ERROR: Final = 4
KINDS: Final = (RECORDS, CATALOG, HEARTBEAT, ERROR)
FLAG_KEYED: Final = 1
#: the largest acknowledgement message (a map of at most a few thousand recordings)
MAX_ACK_LENGTH: Final = 256 * 1024


@dataclass(frozen=True, slots=True)
class StreamMessage:
    kind: int
    session: int
    recording_id: int
    flags: int
    position: int
    #: RECORDS: the records' bytes; else the decoded msgpack body
    body: Any


def encode_records(session: int, recording_id: int, position: int, data: bytes, *,
                   keyed: bool = False) -> bytes:
    return STREAM_HEADER.pack(RECORDS, session, recording_id, FLAG_KEYED if keyed else 0,
                              position) + data


def encode_body(kind: int, session: int, body: Any) -> bytes:
    return STREAM_HEADER.pack(kind, session, 0, 0, 0) + bytes(msgpack.packb(body))


def decode_stream(data: bytes | memoryview) -> StreamMessage:
    """Raises ControlError on a message too short, of an unknown kind, or whose body does
    not decode."""
    if len(data) < STREAM_HEADER.size:
        raise ControlError(f"a {len(data)}-byte replication message (header is "
                           f"{STREAM_HEADER.size})")
    kind, session, rid, flags, position = STREAM_HEADER.unpack_from(data, 0)
    if kind not in KINDS:
        raise ControlError(f"replication message of unknown kind {kind}")
    rest = bytes(data[STREAM_HEADER.size:])
    if kind == RECORDS:
        if position < 0:
            raise ControlError(f"replication records at negative position {position}")
        return StreamMessage(kind, session, rid, flags, position, rest)
    try:
        body = msgpack.unpackb(rest, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several types on garbage
        raise ControlError(f"replication message body does not decode ({exc})") from None
    if not isinstance(body, dict):
        raise ControlError("a replication message body is a msgpack map")
    return StreamMessage(kind, session, rid, flags, position, body)


def encode_ack(session: int, positions: dict[int, int]) -> bytes:
    return msgpack.packb({"session": session, "positions": positions})  # type: ignore[no-any-return]


def decode_ack(data: bytes) -> tuple[int, dict[int, int]]:
    """-> (session, {recording id: position}); ControlError on anything else."""
    if len(data) > MAX_ACK_LENGTH:
        raise ControlError(f"a replication ack of {len(data)} bytes (max {MAX_ACK_LENGTH})")
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:
        raise ControlError(f"replication ack does not decode ({exc})") from None
    if not isinstance(doc, dict):
        raise ControlError("a replication ack is a msgpack map")
    return doc_session(doc), positions_map(doc.get("positions"), "positions")


def doc_session(doc: dict[str, Any]) -> int:
    session = doc.get("session")
    if type(session) is not int or not 0 <= session < 2**32:
        raise ControlError(f"replication session must be a u32, not {session!r:.64}")
    return session


def positions_map(value: Any, name: str) -> dict[int, int]:
    """``{recording id: position}`` with ids and positions integers 0..2**63-1."""
    if not isinstance(value, dict):
        raise ControlError(f"{name} must be a map of recording id -> position")
    out: dict[int, int] = {}
    for k, v in value.items():
        if isinstance(k, str) and k.isdigit():
            k = int(k)
        if type(k) is not int or type(v) is not int or not 0 <= k < 2**63 or \
                not 0 <= v < 2**63:
            raise ControlError(f"{name}: {k!r:.32} -> {v!r:.32} is not recording id -> "
                               f"position (integers 0..2**63-1)")
        out[k] = v
    return out
