"""From archive records to the rows of ``format("exon")``: the schema and its Arrow batches.

The output schema is a list of columns. A column named after a record field is filled from
the record (``META``: ``position``, ``payload``, ``producer``, ``timestamp``, and
``recording`` when several recordings are read); ``_corrupt`` holds a payload that did not
decode; every other column is a field of the decoded payload (``format`` ``json`` or
``msgpack``), found by name.

Decoding follows Spark's JSON reader in PERMISSIVE mode: a payload that is not a JSON
object (a msgpack map), or whose field does not convert to its column's type, yields a row
whose decoded columns are all null and whose ``_corrupt`` holds the payload (a string for
JSON, like Spark's ``_corrupt_record``; the bytes for msgpack). A missing field is null,
an unknown field is ignored. It never raises: one bad event does not stop a query.

Conversions (JSON / msgpack value -> column type): integers must be integral and in range;
floats take any number; strings take a string (JSON: any other value as its JSON text, as
Spark does); booleans a boolean; timestamps an ISO-8601 string (no zone: UTC) or a number
of seconds since the epoch (msgpack: also its Timestamp extension); dates an ISO date;
decimals a number or numeric string that fits; binary a base64 string (JSON) or bytes
(msgpack); arrays, maps and structs recursively.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

__all__ = [
    "CORRUPT",
    "META",
    "BatchBuilder",
    "default_ddl",
    "payload_columns",
]

#: record fields and their Spark types (DDL)
META: dict[str, str] = {
    "recording": "string",
    "position": "bigint",
    "payload": "binary",
    "producer": "string",
    "timestamp": "timestamp",
}
CORRUPT = "_corrupt"

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MIN_MICROS = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
_MAX_MICROS = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
_INT_RANGES = {
    "ByteType": (-(1 << 7), (1 << 7) - 1),
    "ShortType": (-(1 << 15), (1 << 15) - 1),
    "IntegerType": (-(1 << 31), (1 << 31) - 1),
    "LongType": (-(1 << 63), (1 << 63) - 1),
}
_FAST_JSON_TYPES = frozenset({"ByteType", "ShortType", "IntegerType", "LongType", "DoubleType",
                              "StringType", "BooleanType", "TimestampType"})
_CORRUPT_IN_DDL = re.compile(r"(^|,)\s*`?_corrupt`?\s", re.IGNORECASE)


def default_ddl(fmt: str, payload_ddl: str | None, *, multiple: bool) -> str:
    """The schema ``load()`` reports when the caller gives none (``.schema(...)``).

    raw: ``position, payload, producer, timestamp``; decoded: ``position, producer,
    timestamp``, the payload's columns, then ``_corrupt`` (unless the DDL names it).
    Several recordings add ``recording string`` in front."""
    columns = ["recording string"] if multiple else []
    if fmt == "raw":
        columns += ["position bigint", "payload binary", "producer string",
                    "timestamp timestamp"]
        return ", ".join(columns)
    assert payload_ddl is not None
    columns += ["position bigint", "producer string", "timestamp timestamp",
                payload_ddl.strip().rstrip(",")]
    if not _CORRUPT_IN_DDL.search(payload_ddl.strip() + " "):
        columns.append(f"{CORRUPT} {'string' if fmt == 'json' else 'binary'}")
    return ", ".join(columns)


def payload_columns(schema: Any) -> list[str]:
    """The columns of ``schema`` (a StructType) that come from the decoded payload."""
    return [f.name for f in schema.fields if f.name not in META and f.name != CORRUPT]


class _Bad(Exception):
    """A value that does not convert to its column's type (the row is corrupt)."""


# ---- converters: a decoded value -> what pyarrow takes for the column's Arrow type ------


def _converter(data_type: Any, fmt: str) -> Callable[[Any], Any]:
    name = type(data_type).__name__
    if name in _INT_RANGES:
        low, high = _INT_RANGES[name]

        def to_int(v: Any) -> Any:
            if type(v) is not int or not low <= v <= high:
                raise _Bad
            return v

        return to_int
    if name in ("FloatType", "DoubleType"):

        def to_float(v: Any) -> Any:
            if type(v) is float:
                return v
            if type(v) is int:
                return float(v)
            raise _Bad

        return to_float
    if name in ("StringType", "VarcharType", "CharType"):
        if fmt == "json":
            return lambda v: v if type(v) is str else json.dumps(v, separators=(",", ":"))

        def to_str(v: Any) -> Any:
            if type(v) is not str:
                raise _Bad
            return v

        return to_str
    if name == "BooleanType":

        def to_bool(v: Any) -> Any:
            if type(v) is not bool:
                raise _Bad
            return v

        return to_bool
    if name == "BinaryType":

        def to_bytes(v: Any) -> Any:
            if isinstance(v, bytes):
                return v
            if type(v) is str and fmt == "json":
                try:
                    return base64.b64decode(v, validate=True)
                except ValueError:
                    raise _Bad from None
            raise _Bad

        return to_bytes
    if name in ("TimestampType", "TimestampNTZType"):
        return _to_micros
    if name == "DateType":
        return _to_date
    if name == "DecimalType":
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)
        limit = decimal.Decimal(10) ** (data_type.precision - data_type.scale)

        def to_decimal(v: Any) -> Any:
            if type(v) is bool or not isinstance(v, (int, float, str)):
                raise _Bad
            try:
                d = decimal.Decimal(str(v) if type(v) is float else v).quantize(
                    quantum, rounding=decimal.ROUND_HALF_UP)
            except (decimal.InvalidOperation, ValueError):
                raise _Bad from None
            if not d.is_finite() or abs(d) >= limit:
                raise _Bad
            return d

        return to_decimal
    if name == "ArrayType":
        element = _converter(data_type.elementType, fmt)

        def to_list(v: Any) -> Any:
            if not isinstance(v, list):
                raise _Bad
            return [None if x is None else element(x) for x in v]

        return to_list
    if name == "MapType":
        key = _converter(data_type.keyType, fmt)
        value = _converter(data_type.valueType, fmt)

        def to_map(v: Any) -> Any:
            if not isinstance(v, dict):
                raise _Bad
            return [(key(k), None if x is None else value(x)) for k, x in v.items()]

        return to_map
    if name == "StructType":
        fields = [(f.name, _converter(f.dataType, fmt)) for f in data_type.fields]

        def to_struct(v: Any) -> Any:
            if not isinstance(v, dict):
                raise _Bad
            out = {}
            for field, convert in fields:
                x = v.get(field)
                out[field] = None if x is None else convert(x)
            return out

        return to_struct
    raise ValueError(f"exon: a decoded payload column cannot have type {data_type.simpleString()}")


def _to_micros(v: Any) -> int:
    micros = _micros_of(v)
    if not _MIN_MICROS <= micros <= _MAX_MICROS:
        raise _Bad  # outside Spark's timestamps (years 1..9999)
    return micros


def _micros_of(v: Any) -> int:
    if type(v) is str:
        text = v.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            stamp = dt.datetime.fromisoformat(text)
        except ValueError:
            raise _Bad from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)
        delta = stamp - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if type(v) is int:
        return v * 1_000_000
    if type(v) is float:
        return round(v * 1_000_000)
    if isinstance(v, msgpack.Timestamp):
        seconds: int = v.seconds
        nanoseconds: int = v.nanoseconds
        return seconds * 1_000_000 + nanoseconds // 1000
    if isinstance(v, dt.datetime):
        return _micros_of(v.isoformat())
    raise _Bad


def _to_date(v: Any) -> dt.date:
    if type(v) is str:
        try:
            return dt.date.fromisoformat(v.strip())
        except ValueError:
            raise _Bad from None
    raise _Bad


# ---- batches -------------------------------------------------------------------------


def _load_json(payload: bytes) -> Any:
    return json.loads(payload)


def _load_msgpack(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False, strict_map_key=False, timestamp=0)


class BatchBuilder:
    """Turns records of one recording into Arrow batches of ``schema`` (a StructType).

    Built once per ``read()``; ``build(recording, records)`` is one pass over the records
    per column. ``arrow_schema`` is what Spark's Python data source runner expects
    (``to_arrow_schema(schema, timezone="UTC")``)."""

    def __init__(self, schema: Any, fmt: str, arrow_schema: Any) -> None:
        import pyarrow as pa

        self._pa = pa
        self.schema: Any = schema
        self.arrow_schema = arrow_schema
        self.fmt = fmt
        decoded = payload_columns(schema)
        if decoded and fmt == "raw":
            raise ValueError(
                f"exon: column(s) {', '.join(decoded)} are not record fields "
                f"({', '.join(META)}); set option format (json or msgpack) and schema to "
                "decode the payload into columns")
        self._decoded = [(f.name, _converter(f.dataType, fmt))
                         for f in schema.fields if f.name in decoded]
        self._load = _load_json if fmt == "json" else _load_msgpack
        # JSON of flat columns of these types goes through pyarrow's C++ JSON reader when a
        # whole batch decodes cleanly; its conversions agree with the ones above for them
        # (anything it refuses -- a corrupt row, a number for a timestamp, a non-string for
        # a string -- sends that batch through the Python decoder)
        self._fast = fmt == "json" and bool(self._decoded) and all(
            type(f.dataType).__name__ in _FAST_JSON_TYPES
            for f in schema.fields if f.name in decoded)
        self._fast_misses = 0
        if self._fast:
            self._fast_schema = pa.schema([arrow_schema.field(name)
                                           for name, _ in self._decoded])
        for f in schema.fields:
            if f.name in META and f.dataType.simpleString() != META[f.name]:
                raise ValueError(f"exon: column {f.name} holds the record's {f.name} and must "
                                 f"be {META[f.name]}, not {f.dataType.simpleString()}")
        self._want_corrupt = any(f.name == CORRUPT for f in schema.fields)
        self._corrupt_as_text = False
        if self._want_corrupt:
            kind = type(schema[CORRUPT].dataType).__name__
            if kind not in ("StringType", "BinaryType"):
                raise ValueError(f"exon: column {CORRUPT} must be string or binary, not "
                                 f"{schema[CORRUPT].dataType.simpleString()}")
            self._corrupt_as_text = kind == "StringType"

    def _decode(self, payloads: Sequence[bytes]) -> tuple[list[list[Any]], list[Any]]:
        columns: list[list[Any]] = [[] for _ in self._decoded]
        corrupt: list[Any] = []
        fields = self._decoded
        load = self._load
        for payload in payloads:
            try:
                obj = load(payload)
                if type(obj) is not dict:
                    raise _Bad
                values = []
                for name, convert in fields:
                    v = obj.get(name)
                    values.append(None if v is None else convert(v))
            except Exception:  # any undecodable payload is a corrupt row
                for column in columns:
                    column.append(None)
                if self._corrupt_as_text:
                    corrupt.append(payload.decode("utf-8", "replace"))
                else:
                    corrupt.append(payload)
                continue
            for column, v in zip(columns, values, strict=True):
                column.append(v)
            corrupt.append(None)
        return columns, corrupt

    def _decode_arrow(self, payloads: list[bytes]) -> list[Any] | None:
        """The decoded columns as Arrow arrays, or None when the batch is not clean
        line-delimited JSON of the schema (then the Python decoder takes it)."""
        import io

        import pyarrow.json as pj

        # JSON lines often end in a newline (trailing whitespace to json.loads): drop it; a
        # line break anywhere else would split a payload in the reader. A batch whose first
        # payload ends in one is stripped at once (not joined, counted, then stripped)
        stripped = bool(payloads) and payloads[0].endswith(b"\n")
        data = b"\n".join([p.rstrip(b"\r\n") for p in payloads] if stripped else payloads)
        if data.count(b"\n") != len(payloads) - 1 or b"\r" in data:
            if stripped:
                return None
            data = b"\n".join([p.rstrip(b"\r\n") for p in payloads])
            if data.count(b"\n") != len(payloads) - 1 or b"\r" in data:
                return None
        # the reader keeps invalid UTF-8 in strings, json.loads refuses it: check (ASCII,
        # the common case, without decoding a copy)
        if not data.isascii():
            try:
                data.decode()
            except UnicodeDecodeError:
                return None
        try:
            table = pj.read_json(
                io.BytesIO(data), read_options=pj.ReadOptions(use_threads=False),
                parse_options=pj.ParseOptions(explicit_schema=self._fast_schema,
                                              unexpected_field_behavior="ignore"))
        except Exception:  # anything it refuses: the Python decoder decides
            return None
        if table.num_rows != len(payloads):  # blank payloads are skipped by the reader
            return None
        return [table.column(name).combine_chunks() for name, _ in self._decoded]

    def build(self, recording: str, records: Sequence[Any]) -> Any:
        """One ``pyarrow.RecordBatch`` of ``records`` (``Record`` tuples)."""
        pa = self._pa
        n = len(records)
        decoded: list[Any] = []
        corrupt: list[Any] = []
        if self._decoded or self._want_corrupt:
            if self.fmt == "raw":
                corrupt = [None] * n
            else:
                payloads = [r[1] for r in records]
                fast = self._decode_arrow(payloads) if self._fast else None
                if fast is not None:
                    decoded, corrupt = fast, [None] * n
                    self._fast_misses = 0
                else:
                    if self._fast:
                        self._fast_misses += 1
                        self._fast = self._fast_misses < 3  # keeps missing: stop trying
                    decoded, corrupt = self._decode(payloads)
        arrays = []
        index = 0
        for field in self.arrow_schema:
            name = field.name
            if name == "position":
                values: Any = [r[0] for r in records]
            elif name == "payload":
                values = [r[1] for r in records]
            elif name == "producer":
                values = [r[2] for r in records]
            elif name == "timestamp":
                values = [r[3] // 1000 for r in records]
            elif name == "recording":
                values = [recording] * n
            elif name == CORRUPT:
                values = corrupt
            else:
                values = decoded[index]
                index += 1
                if isinstance(values, pa.Array):
                    arrays.append(values)
                    continue
            arrays.append(pa.array(values, type=field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
