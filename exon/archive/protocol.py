"""The archive's messages on the wire: control requests/responses, replay stream messages
and keyed-ingest messages. Pure codecs (docs/protocol.md, section 3.4-3.6).

Control (REQ -> the service's REP on tag 1): a msgpack map ``{"op": NAME, ...}``; the answer
is ``{"ok": true, ...}`` or ``{"ok": false, "error": CLASS, "message": TEXT}`` where CLASS
names an :mod:`exon.archive.errors` class.

Replay stream (the service's PUSH -> the client's PULL), little-endian::

    0  u8   kind        1 RECORDS, 2 END, 3 ERROR, 4 KEEPALIVE
    1  u8[3] reserved
    4  u32  replay_id
    8  i64  position    RECORDS: position of the first record byte; END: the end position
    16 .    RECORDS: whole records as on disk; ERROR: msgpack {"error", "message"}

Keyed ingest (a KeyedWriter's PUSH -> the service's keyed PULL)::

    0  u32  recording_id
    4  i32  partition
    8  i64  batch
    16 i64  seq
    24 u16  query_length
    26 .    query (UTF-8), then the payload
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from exon.archive.catalog import NAME_MAX
from exon.archive.errors import (
    BY_NAME,
    ArchiveCorrupt,
    ArchiveError,
    ControlError,
    RecordingNotFound,
)
from exon.archive.replication_wire import positions_map

#: the service's tags: its control REP, and its keyed-ingest PULL unless it is given another
CONTROL_TAG: Final = 1
KEYED_TAG: Final = 2
#: record bytes a replay sends per message (or one record, when larger): with its headers
#: one unfragmented transport message on any term of 512 KiB or more (a message is at most
#: an eighth of a term: docs/protocol.md 2.14). 256 KiB chunks were just above the default
#: 2 MiB term's 256 KiB and went as two FRAGMENTs each: remote replay of 64 B records ran
#: at 5.7-6.1 M/s (IPC) and 4.2 M/s (UDP); 63 KiB: 9.1-10.5 and 7.4; 127 KiB: 8.2-8.8
REPLAY_CHUNK: Final = 63 * 1024
#: credits of the replay links (x REPLAY_CHUNK bounds what a slow reader holds: 1 MiB)
REPLAY_CREDITS: Final = 16
#: seconds without records after which a replay sends a KEEPALIVE (docs/protocol.md 3.5)
KEEPALIVE_INTERVAL: Final = 1.0
REPLAY_HEADER: Final = struct.Struct("<B3xIq")
REPLAY_RECORDS: Final = 1
REPLAY_END: Final = 2
REPLAY_ERROR: Final = 3
REPLAY_KEEPALIVE: Final = 4
KEYED_HEADER: Final = struct.Struct("<IiqqH")
#: the largest control message either side accepts
MAX_CONTROL_LENGTH: Final = 64 * 1024
#: the largest encoded answer: the REP puts the request's 8-byte envelope in front of it
#: (exon.sockets.req), and the client's REQ takes MAX_CONTROL_LENGTH
MAX_REPLY_LENGTH: Final = MAX_CONTROL_LENGTH - 8
#: characters of an error message an answer carries at most
MAX_ERROR_MESSAGE: Final = 2048
#: characters of a request's value that an error message quotes at most
MAX_QUOTED: Final = 64
#: integer fields are signed 64-bit on disk and in native code
I64_MAX: Final = 2**63 - 1
#: bytes a keyed ingest message's query id holds at most (protocol 3.6)
MAX_QUERY: Final = 128

#: operation -> (required fields, optional fields with defaults)
OPERATIONS: Final[dict[str, tuple[tuple[str, ...], dict[str, Any]]]] = {
    "info": ((), {}),
    "recordings": ((), {}),
    "recording": (("recording",), {}),
    "stop_position": (("recording",), {}),
    "replay": (("recording", "reply_to"), {"start": 0, "end": None, "follow": False}),
    "stop_replay": (("replay_id",), {}),
    "boundaries": (("recording", "start", "max_records"), {"end": None}),
    "advance": (("recording", "start", "max_records"), {}),
    "count": (("recording", "start", "max_records"), {"end": None}),
    "position_at": (("recording", "timestamp"), {}),
    "commit": (("recording", "consumer", "position"), {"truncate": False}),
    "truncate": (("recording", "before"), {}),
    # replication (3.7)
    "replicate": (("member", "instance", "reply_to", "epoch", "positions"), {}),
    "promote": ((), {}),
    "fence": (("epoch", "primary"), {}),
}


@dataclass(frozen=True)
class Request:
    op: str
    args: dict[str, Any]


def encode_request(op: str, **args: Any) -> bytes:
    """A request's bytes; ControlError (naming the field) for a value msgpack cannot carry,
    such as an integer beyond 64 bits."""
    try:
        return msgpack.packb({"op": op, **args})  # type: ignore[no-any-return]
    except (OverflowError, TypeError, ValueError):
        for name, value in args.items():
            try:
                msgpack.packb(value)
            except (OverflowError, TypeError, ValueError) as exc:
                raise ControlError(f"{op}: {name} cannot be sent ({exc}): {value!r:.64}") \
                    from None
        raise


def decode_request(data: bytes) -> Request:
    """Raises ControlError (never anything else) on a request that does not decode, an
    unknown operation, a missing field or a field of the wrong type."""
    if len(data) > MAX_CONTROL_LENGTH:
        raise ControlError(f"control request of {len(data)} bytes (max {MAX_CONTROL_LENGTH})")
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several types on garbage
        raise ControlError(f"control request does not decode as msgpack ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("op"), str):
        raise ControlError("a control request is a msgpack map with a string 'op'")
    op = doc.pop("op")
    spec = OPERATIONS.get(op)
    if spec is None:
        raise ControlError(f"unknown control operation {_quote(op)} "
                           f"(known: {', '.join(sorted(OPERATIONS))})")
    required, optional = spec
    args: dict[str, Any] = dict(optional)
    for name in required:
        if name not in doc:
            raise ControlError(f"{op}: missing field {name!r}")
    for name, value in doc.items():
        if name not in required and name not in optional:
            raise ControlError(f"{op}: unknown field {_quote(name)}")
        args[name] = value
    for name, value in args.items():
        _check_field(op, name, value)
    return Request(op, args)


_INT_FIELDS = {"start", "end", "max_records", "position", "before", "replay_id", "epoch",
               "timestamp"}
#: (op, field) -> the smallest value, where it is not 0
_INT_MINIMUM = {("boundaries", "max_records"): 1}
#: string field -> its longest value (a consumer name is kept in the catalog and comes back
#: in every RecordingInfo; reply_to is HOST:PORT/TAG)
_STR_FIELDS = {"reply_to": 512, "consumer": NAME_MAX, "member": 512, "primary": 512,
               "instance": 64}


def _quote(value: Any) -> str:
    """``repr(value)``, cut to MAX_QUOTED characters: an error message never echoes a
    request's value whole."""
    text = repr(value)
    return text if len(text) <= MAX_QUOTED else text[:MAX_QUOTED - 3] + "..."


def _check_field(op: str, name: str, value: Any) -> None:
    if name in _INT_FIELDS:
        if value is None and name == "end":
            return
        low = _INT_MINIMUM.get((op, name), 0)
        if type(value) is not int or not low <= value <= I64_MAX:
            raise ControlError(f"{op}: {name} must be an integer {low}..2**63-1, "
                               f"not {_quote(value)}")
    elif name in _STR_FIELDS:
        longest = _STR_FIELDS[name]
        if not isinstance(value, str) or not 1 <= len(value) <= longest:
            raise ControlError(f"{op}: {name} must be a string of 1..{longest} characters, "
                               f"not {_quote(value)}")
    elif name == "recording":
        if isinstance(value, str):
            if not 1 <= len(value) <= NAME_MAX:
                raise ControlError(f"{op}: recording must be a name of 1..{NAME_MAX} "
                                   f"characters or an id, not {_quote(value)}")
        elif type(value) is not int or not 0 <= value <= I64_MAX:
            raise ControlError(f"{op}: recording must be a name or an id (an integer "
                               f"0..2**63-1), not {_quote(value)}")
    elif name == "positions":
        try:
            positions_map(value, name)
        except ControlError as exc:
            raise ControlError(f"{op}: {exc}") from None
    elif name in ("follow", "truncate") and not isinstance(value, bool):
        raise ControlError(f"{op}: {name} must be true or false, not {_quote(value)}")


def encode_ok(**fields: Any) -> bytes:
    return msgpack.packb({"ok": True, **fields})  # type: ignore[no-any-return]


def encode_error(exc: BaseException) -> bytes:
    """An error answer naming ``exc``'s class (ArchiveError if it is not an archive error's)
    with its message cut to MAX_ERROR_MESSAGE characters: always far below
    MAX_REPLY_LENGTH."""
    return msgpack.packb({"ok": False, **error_fields(exc)})  # type: ignore[no-any-return]


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``{"error": CLASS, "message": TEXT}`` for ``exc`` (ArchiveError if it is not an
    archive error's class, the text cut to MAX_ERROR_MESSAGE characters), and for
    ArchiveCorrupt its ``"path"`` and ``"offset"``: an error answer's, and a replay ERROR's
    body."""
    name = type(exc).__name__ if type(exc).__name__ in BY_NAME else "ArchiveError"
    message = str(exc)
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE - 3] + "..."
    fields: dict[str, Any] = {"error": name, "message": message}
    if isinstance(exc, ArchiveCorrupt):
        fields["path"] = exc.path[:MAX_ERROR_MESSAGE]
        fields["offset"] = exc.offset
    return fields


def decode_response(data: bytes) -> dict[str, Any]:
    """The fields of an ok response; raises the archive error the service reported, or
    ControlError if the response does not decode."""
    try:
        doc = msgpack.unpackb(data, raw=False)
    except Exception as exc:
        raise ControlError(f"control response does not decode ({exc})") from None
    if not isinstance(doc, dict) or "ok" not in doc:
        raise ControlError("a control response is a msgpack map with 'ok'")
    if doc["ok"]:
        doc.pop("ok")
        return doc
    raise error_from(doc)


def error_from(fields: dict[str, Any]) -> ArchiveError:
    """The archive error an error answer (or a replay ERROR's body) names: its class, its
    message, and an ArchiveCorrupt's path and offset ("" and -1 when not given)."""
    name = fields.get("error")
    message = fields.get("message", "")
    if not isinstance(message, str):
        message = repr(message)
    cls = BY_NAME.get(name) if isinstance(name, str) else None
    if cls is RecordingNotFound:
        exc = RecordingNotFound.__new__(RecordingNotFound)
        ArchiveError.__init__(exc, message)
        exc.recording = message.removeprefix("no recording ").strip("'\"")
        return exc
    if cls is ArchiveCorrupt:
        exc2 = ArchiveCorrupt.__new__(ArchiveCorrupt)
        ArchiveError.__init__(exc2, message)
        path, offset = fields.get("path", ""), fields.get("offset", -1)
        exc2.path = path if isinstance(path, str) else ""
        exc2.offset = offset if isinstance(offset, int) else -1
        return exc2
    return (cls or ArchiveError)(message)


def encode_replay(kind: int, replay_id: int, position: int, body: bytes = b"") -> bytes:
    return REPLAY_HEADER.pack(kind, replay_id, position) + body


def encode_keyed(recording_id: int, partition: int, batch: int, seq: int, query: bytes,
                 payload: bytes) -> bytes:
    return KEYED_HEADER.pack(recording_id, partition, batch, seq, len(query)) + query + payload


def decode_keyed(data: bytes) -> tuple[int, bytes, bytes]:
    """-> (recording_id, key as recorded, payload); raises ControlError when the message is
    short or its query id is not 1..MAX_QUERY bytes of UTF-8 (protocol 3.6)."""
    n = KEYED_HEADER.size
    if len(data) < n:
        raise ControlError(f"keyed ingest message of {len(data)} bytes (header is {n})")
    recording_id, partition, batch, seq, qlen = KEYED_HEADER.unpack_from(data, 0)
    if not 1 <= qlen <= MAX_QUERY:
        raise ControlError(f"keyed ingest query id of {qlen} bytes (1..{MAX_QUERY})")
    if len(data) < n + qlen:
        raise ControlError("keyed ingest message shorter than its query id")
    query = data[n:n + qlen]
    try:
        query.decode("utf-8")
    except UnicodeDecodeError:
        raise ControlError("keyed ingest query id is not UTF-8") from None
    key = struct.pack("<iqq", partition, batch, seq) + query
    return recording_id, key, data[n + qlen:]
