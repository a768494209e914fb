"""The replication stream's codecs (exon/archive/replication_wire.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exon.archive import replication_wire as wire
from exon.archive.errors import ControlError


def test_records_round_trip() -> None:
    m = wire.decode_stream(wire.encode_records(7, 3, 4096, b"abc", keyed=True))
    assert (m.kind, m.session, m.recording_id, m.flags, m.position, m.body) == (
        wire.RECORDS, 7, 3, wire.FLAG_KEYED, 4096, b"abc")


def test_body_round_trip() -> None:
    m = wire.decode_stream(wire.encode_body(wire.HEARTBEAT, 2, {"stops": {1: 64}}))
    assert m.kind == wire.HEARTBEAT
    assert m.body == {"stops": {1: 64}}


def test_ack_round_trip() -> None:
    assert wire.decode_ack(wire.encode_ack(5, {1: 64, 2: 0})) == (5, {1: 64, 2: 0})


@pytest.mark.parametrize("data", [b"", b"\x09" + bytes(23), b"\x02" + bytes(23) + b"\xc1"])
def test_bad_stream_messages_raise_control_error(data: bytes) -> None:
    with pytest.raises(ControlError):
        wire.decode_stream(data)


@pytest.mark.parametrize("positions", [{"x": 1}, {1: -1}, [1], {1: 2**64}])
def test_bad_positions_raise(positions: object) -> None:
    with pytest.raises(ControlError):
        wire.positions_map(positions, "positions")


@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_control_error(data: bytes) -> None:
    for decode in (wire.decode_stream, wire.decode_ack):
        try:
            decode(data)
        except ControlError:
            pass
