"""The control codec of exon.archive.protocol: what a request may hold, and answers that
stay small whatever the request held. Socket-free."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exon.archive import ControlError, RecordingNotFound, protocol

I64_MAX = 2**63 - 1


def request(op: str, **fields: Any) -> bytes:
    return protocol.encode_request(op, **fields)


@pytest.mark.parametrize(("op", "fields", "field"), [
    ("boundaries", {"recording": "r", "start": 0, "max_records": 2**64 - 1}, "max_records"),
    ("boundaries", {"recording": "r", "start": 0, "max_records": 0}, "max_records"),
    ("advance", {"recording": "r", "start": 0, "max_records": 2**63}, "max_records"),
    ("advance", {"recording": "r", "start": -2**63, "max_records": 1}, "start"),
    ("replay", {"recording": "r", "reply_to": "h:1/5", "start": 2**64 - 1}, "start"),
    ("replay", {"recording": "r", "reply_to": "h:1/5", "end": 2**63}, "end"),
    ("commit", {"recording": "r", "consumer": "c", "position": 2**63}, "position"),
    ("truncate", {"recording": "r", "before": 2**64 - 1}, "before"),
    ("stop_replay", {"replay_id": 2**64 - 1}, "replay_id"),
    ("recording", {"recording": 2**64 - 1}, "recording"),
    ("recording", {"recording": -1}, "recording"),
])
def test_an_integer_out_of_range_is_a_control_error_naming_the_field(
        op: str, fields: dict[str, Any], field: str) -> None:
    """Before, 2**64-1 reached native code: 'internal error: OverflowError'."""
    with pytest.raises(ControlError, match=f"{op}: {field} must be"):
        protocol.decode_request(request(op, **fields))


def test_the_largest_signed_64_bit_integers_are_taken() -> None:
    req = protocol.decode_request(request("boundaries", recording=I64_MAX, start=I64_MAX,
                                         end=I64_MAX, max_records=I64_MAX))
    assert req.args == {"recording": I64_MAX, "start": I64_MAX, "end": I64_MAX,
                        "max_records": I64_MAX}
    assert protocol.decode_request(request("advance", recording="r", start=0,
                                          max_records=0)).args["max_records"] == 0


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["start", "end", "max_records"]),
       st.integers(min_value=-2**63, max_value=2**64 - 1))  # what msgpack encodes
def test_any_integer_decodes_in_range_or_is_a_control_error(field: str, value: int) -> None:
    fields: dict[str, Any] = {"recording": "r", "start": 0, "max_records": 1}
    fields[field] = value
    if 0 <= value <= I64_MAX and (field != "max_records" or value >= 1):
        assert protocol.decode_request(request("boundaries", **fields)).args[field] == value
    else:
        with pytest.raises(ControlError, match=f"boundaries: {field} must be") as info:
            protocol.decode_request(request("boundaries", **fields))
        assert len(str(info.value)) < 200


@pytest.mark.parametrize("doc", [
    {"op": "stop_position", "recording": "A" * 65000},
    {"op": "x" * 65000},
    {"op": "info", "x" * 65000: 1},
    {"op": "commit", "recording": "r", "consumer": "c" * 65000, "position": 0},
    {"op": "replay", "recording": "r", "reply_to": "h" * 65000},
    {"op": "replay", "recording": "r", "reply_to": "h:1/5", "follow": "y" * 65000},
    {"op": "truncate", "recording": "r", "before": "9" * 65000},
])
def test_an_error_does_not_echo_a_long_value_whole(doc: dict[str, Any]) -> None:
    """A ~65 KB recording name came back whole in the error, over the 64 KiB a reply holds."""
    with pytest.raises(ControlError) as info:
        protocol.decode_request(msgpack.packb(doc))
    assert len(str(info.value)) < 300


def test_names_longer_than_a_recording_name_are_refused() -> None:
    assert protocol.decode_request(request("recording", recording="n" * 128)).args == {
        "recording": "n" * 128}
    with pytest.raises(ControlError, match=r"recording must be a name of 1\.\.128"):
        protocol.decode_request(request("recording", recording="n" * 129))
    with pytest.raises(ControlError, match=r"consumer must be a string of 1\.\.128"):
        protocol.decode_request(request("commit", recording="r", consumer="c" * 129,
                                       position=0))


def test_an_error_answer_holds_a_bounded_message() -> None:
    data = protocol.encode_error(RecordingNotFound("A" * 70000))
    assert len(data) < 4 * protocol.MAX_ERROR_MESSAGE < protocol.MAX_REPLY_LENGTH
    with pytest.raises(RecordingNotFound) as info:
        protocol.decode_response(data)
    assert str(info.value).startswith("no recording 'AAA")
    assert str(info.value).endswith("...")
    assert len(str(info.value)) == protocol.MAX_ERROR_MESSAGE


def test_an_archive_corrupt_answer_keeps_its_file_and_offset() -> None:
    from exon.archive import ArchiveCorrupt, ArchiveError

    answer = protocol.encode_error(ArchiveCorrupt("checksum mismatch", path="/a/1-0.rec",
                                                 offset=4096))
    with pytest.raises(ArchiveCorrupt) as info:
        protocol.decode_response(answer)
    assert (info.value.path, info.value.offset) == ("/a/1-0.rec", 4096)
    assert "checksum mismatch" in str(info.value)
    # a peer that sends neither (or junk) gets the unknown markers, not a crash
    for extra in ({}, {"path": 7, "offset": "x"}):
        err = protocol.error_from({"error": "ArchiveCorrupt", "message": "m", **extra})
        assert isinstance(err, ArchiveCorrupt)
        assert (err.path, err.offset) == ("", -1)
    assert type(protocol.error_from({"error": "NoSuchError", "message": 5})) is ArchiveError


def test_a_request_field_beyond_64_bits_is_a_control_error_naming_it() -> None:
    with pytest.raises(ControlError, match="truncate: before cannot be sent"):
        protocol.encode_request("truncate", recording="r", before=10**23)
    with pytest.raises(ControlError, match="replay: start"):
        protocol.encode_request("replay", recording="r", start=object())
    assert protocol.encode_request("truncate", recording="r", before=2**63 - 1)


@pytest.mark.parametrize(("query", "problem"), [
    (b"", "query id of 0 bytes"),
    (b"q" * 129, "query id of 129 bytes"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_a_keyed_message_with_a_bad_query_id_is_malformed(query: bytes, problem: str) -> None:
    """Dropped as malformed (an event), not an append that fails and rejects its batch
    on every retry."""
    data = protocol.KEYED_HEADER.pack(1, 0, 0, 0, len(query)) + query + b"payload"
    with pytest.raises(ControlError, match=problem):
        protocol.decode_keyed(data)
    good = protocol.KEYED_HEADER.pack(1, 0, 0, 0, 1) + b"q" + b"payload"
    assert protocol.decode_keyed(good)[2] == b"payload"
