"""Payload decoding into columns: Spark JSON reader's PERMISSIVE rules, `_corrupt`."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from exon.archive import Record
from exon.spark.decode import BatchBuilder, default_ddl
from exon.spark.source import _arrow_schema

META = [StructField("position", LongType()), StructField("producer", StringType()),
        StructField("timestamp", TimestampType())]
EVENT = StructType([*META, StructField("key", StringType()), StructField("value", DoubleType()),
                    StructField("n", IntegerType()), StructField("_corrupt", StringType())])


def _builder(schema: StructType, fmt: str) -> BatchBuilder:
    return BatchBuilder(schema, fmt, _arrow_schema(schema))


def _records(*payloads: bytes) -> list[Record]:
    return [Record(i * 64, p, "127.0.0.1:9/3", 1_700_000_000_123_456_789 + i)
            for i, p in enumerate(payloads)]


def test_default_ddl() -> None:
    assert default_ddl("raw", None, multiple=False) == (
        "position bigint, payload binary, producer string, timestamp timestamp")
    assert default_ddl("raw", None, multiple=True).startswith("recording string, position")
    assert default_ddl("json", "k string, v int", multiple=False) == (
        "position bigint, producer string, timestamp timestamp, k string, v int, "
        "_corrupt string")
    assert default_ddl("msgpack", "k string", multiple=False).endswith("_corrupt binary")
    # a DDL that names _corrupt itself keeps its own
    assert default_ddl("json", "k string, _corrupt binary", multiple=False).count("_corrupt") == 1


def test_raw_batch_carries_the_record_fields() -> None:
    schema = StructType([StructField("position", LongType()), StructField("payload", BinaryType()),
                         StructField("producer", StringType()),
                         StructField("timestamp", TimestampType())])
    records = _records(b"a", b"", b"\x00\xff")
    batch = _builder(schema, "raw").build("orders", records)
    assert batch.schema == _arrow_schema(schema)
    rows = batch.to_pylist()
    assert [r["position"] for r in rows] == [0, 64, 128]
    assert [r["payload"] for r in rows] == [b"a", b"", b"\x00\xff"]
    assert rows[0]["producer"] == "127.0.0.1:9/3"
    stamp = rows[0]["timestamp"]
    assert stamp == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.timezone.utc)


def test_json_decodes_by_name_and_bad_rows_land_in_corrupt() -> None:
    good = json.dumps({"key": "k1", "value": 2, "n": 3, "extra": [1]}).encode()
    missing = json.dumps({"key": "k2"}).encode()
    wrong_type = json.dumps({"key": "k3", "n": "three"}).encode()
    too_big = json.dumps({"n": 1 << 40}).encode()
    not_json = b"{not json"
    not_object = b"[1, 2]"
    invalid_utf8 = b"\xff\xfe"
    batch = _builder(EVENT, "json").build(
        "orders", _records(good, missing, wrong_type, too_big, not_json, not_object,
                           invalid_utf8))
    rows = batch.to_pylist()
    assert (rows[0]["key"], rows[0]["value"], rows[0]["n"], rows[0]["_corrupt"]) == (
        "k1", 2.0, 3, None)
    assert (rows[1]["key"], rows[1]["value"], rows[1]["n"], rows[1]["_corrupt"]) == (
        "k2", None, None, None)
    for row, payload in zip(rows[2:], [wrong_type, too_big, not_json, not_object], strict=False):
        assert (row["key"], row["value"], row["n"]) == (None, None, None)
        assert row["_corrupt"] == payload.decode()
    assert rows[6]["_corrupt"] == invalid_utf8.decode("utf-8", "replace")
    assert [r["position"] for r in rows] == [i * 64 for i in range(7)]


def test_json_strings_take_any_value_as_its_text_like_spark() -> None:
    schema = StructType([StructField("s", StringType())])
    rows = _builder(schema, "json").build("r", _records(b'{"s": {"a": [1, true]}}')).to_pylist()
    assert rows == [{"s": '{"a":[1,true]}'}]


def test_json_nested_and_temporal_types() -> None:
    schema = StructType([
        StructField("t", TimestampType()), StructField("d", DateType()),
        StructField("m", DecimalType(6, 2)),
        StructField("a", ArrayType(IntegerType())),
        StructField("kv", MapType(StringType(), LongType())),
        StructField("s", StructType([StructField("x", IntegerType())])),
        StructField("b", BinaryType()),
        StructField("_corrupt", StringType()),
    ])
    payload = json.dumps({
        "t": "2024-05-01T10:00:00.5Z", "d": "2024-05-01", "m": "12.345",
        "a": [1, None, 3], "kv": {"x": 1}, "s": {"x": 7, "y": 0}, "b": "AAE=",
    }).encode()
    epoch = b'{"t": 1700000000}'
    bad_decimal = b'{"m": 123456.0}'
    rows = _builder(schema, "json").build("r", _records(payload, epoch, bad_decimal)).to_pylist()
    utc = dt.timezone.utc
    assert rows[0]["t"] == dt.datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=utc)
    assert rows[0]["d"] == dt.date(2024, 5, 1)
    assert rows[0]["m"] == decimal.Decimal("12.35")
    assert rows[0]["a"] == [1, None, 3]
    assert rows[0]["kv"] == [("x", 1)]
    assert rows[0]["s"] == {"x": 7}
    assert rows[0]["b"] == b"\x00\x01"
    assert rows[0]["_corrupt"] is None
    assert rows[1]["t"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=utc)
    assert rows[2]["m"] is None
    assert rows[2]["_corrupt"] == bad_decimal.decode()


def test_msgpack_decodes_and_corrupt_keeps_the_bytes() -> None:
    schema = StructType([StructField("key", StringType()), StructField("b", BinaryType()),
                         StructField("t", TimestampType()), StructField("_corrupt", BinaryType())])
    good = msgpack.packb({"key": "k", "b": b"\x00", "t": msgpack.Timestamp(10, 5000)})
    iso = msgpack.packb({"t": "1970-01-01T00:00:10+00:00"})
    bad = b"\xc1"  # never used in msgpack
    rows = _builder(schema, "msgpack").build("r", _records(good, iso, bad)).to_pylist()
    assert rows[0]["key"] == "k"
    assert rows[0]["b"] == b"\x00"
    assert rows[0]["t"] == dt.datetime(1970, 1, 1, 0, 0, 10, 5, tzinfo=dt.timezone.utc)
    assert rows[0]["_corrupt"] is None
    assert rows[1]["t"] == dt.datetime(1970, 1, 1, 0, 0, 10, tzinfo=dt.timezone.utc)
    assert rows[2]["_corrupt"] == bad
    assert rows[2]["key"] is None


def test_decoded_columns_without_a_format_are_refused() -> None:
    with pytest.raises(ValueError, match="set option format"):
        _builder(EVENT, "raw")


def test_a_record_column_with_another_type_is_refused() -> None:
    schema = StructType([StructField("position", StringType())])
    with pytest.raises(ValueError, match="must be bigint"):
        _builder(schema, "raw")


def test_corrupt_must_be_text_or_bytes() -> None:
    schema = StructType([StructField("k", StringType()), StructField("_corrupt", LongType())])
    with pytest.raises(ValueError, match="_corrupt"):
        _builder(schema, "json")


# ---- the Arrow JSON fast path agrees with the Python decoder -----------------------------

FLAT = StructType([
    StructField("i", IntegerType()), StructField("l", LongType()),
    StructField("d", DoubleType()), StructField("s", StringType()),
    StructField("b", BooleanType()), StructField("t", TimestampType()),
    StructField("_corrupt", StringType()),
])


def _both(payloads: list[bytes]) -> tuple[list[dict[str, object]], list[dict[str, object]], bool]:
    fast = _builder(FLAT, "json")
    assert fast._fast
    slow = _builder(FLAT, "json")
    slow._fast = False
    took_fast = fast._decode_arrow(payloads) is not None
    records = _records(*payloads)
    return (fast.build("r", records).to_pylist(), slow.build("r", records).to_pylist(),
            took_fast)


def test_clean_json_batches_take_the_arrow_path_with_the_same_rows() -> None:
    payloads = [json.dumps({"i": n - 50, "l": n << 40, "d": n / 7, "s": f"é{n}",
                            "b": n % 2 == 0, "t": f"2024-05-01T10:00:{n % 60:02d}.25Z",
                            "extra": [n]}).encode() for n in range(100)]
    payloads[3] = b'{"i": null, "t": "2024-05-01 10:00:00+02:00"}'
    fast, slow, took_fast = _both(payloads)
    assert took_fast
    assert fast == slow


@pytest.mark.parametrize("odd", [
    b'{"i": "12"}', b'{"s": 5}', b'{"t": 1700000000}', b'{"i": 1e2}', b'not json',
    b'{"i": 1}\n{"i": 2}', b"", b'{"i": 1, "i": 2}', b'[1]', b'{"s": "\xff"}',
    b'{"i": 3000000000}', b'{"t": "2024-05-01T10:00:00.1234567Z"}',
])
def test_a_batch_the_arrow_reader_refuses_is_decoded_in_python(odd: bytes) -> None:
    payloads = [b'{"i": 1, "s": "a"}', odd, b'{"i": 2, "s": "b"}']
    fast, slow, took_fast = _both(payloads)
    assert not took_fast
    assert fast == slow
    assert fast[0]["i"] == 1
    assert fast[2]["s"] == "b"


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\n\n"])
def test_json_lines_that_end_in_a_line_break_take_the_arrow_path(end: bytes) -> None:
    """JSON lines as files and producers write them (a trailing newline, which json.loads
    reads as whitespace) decode in Arrow too, with the same rows; a break inside one
    still sends the batch to Python."""
    payloads = [json.dumps({"i": n, "s": f"v{n}"}).encode() + end for n in range(50)]
    fast, slow, took_fast = _both(payloads)
    assert took_fast
    assert fast == slow
    assert [row["i"] for row in fast] == list(range(50))
    payloads[7] = b'{"i": 1}\n{"i": 2}\n'
    fast, slow, took_fast = _both(payloads)
    assert not took_fast
    assert fast == slow
    assert fast[7]["_corrupt"] == '{"i": 1}\n{"i": 2}\n'


def test_types_outside_the_fast_set_always_use_python() -> None:
    for data_type in (DateType(), BinaryType(), DecimalType(5, 1), ArrayType(LongType())):
        schema = StructType([StructField("x", data_type)])
        assert not _builder(schema, "json")._fast
    assert not _builder(StructType([StructField("x", LongType())]), "msgpack")._fast


json_value = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1),
                 timezones=st.just(dt.timezone.utc)).map(lambda d: d.isoformat()),
)


@given(st.lists(st.dictionaries(st.sampled_from(["i", "l", "d", "s", "b", "t", "z"]),
                                json_value, max_size=7), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_fast_and_python_decoders_agree_on_any_batch(objects: list[dict[str, object]]) -> None:
    payloads = [json.dumps(o).encode() for o in objects]
    fast, slow, _ = _both(payloads)
    assert fast == slow
