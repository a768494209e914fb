"""The C structs and the Python layout constants must describe the same bytes."""

from __future__ import annotations

import struct

import pytest

from exon.native import ffi, lib
from exon.transport.aeron import layout as L

FRAME_STRUCTS = [
    ("exon_frame_header_t", L.FRAME_HEADER, 8),
    ("exon_data_header_t", L.DATA_HEADER, L.DATA_HEADER_LENGTH),
    ("exon_setup_header_t", L.SETUP_HEADER, L.SETUP_LENGTH),
    ("exon_sm_header_t", L.SM_HEADER, L.SM_LENGTH),
    ("exon_nak_header_t", L.NAK_HEADER, L.NAK_LENGTH),
    ("exon_rttm_header_t", L.RTTM_HEADER, L.RTTM_LENGTH),
    ("exon_err_header_t", L.ERR_HEADER, L.ERR_HEADER_LENGTH),
]


@pytest.mark.parametrize(("ctype", "pystruct", "size"), FRAME_STRUCTS)
def test_frame_struct_sizes_agree(ctype: str, pystruct, size: int) -> None:
    assert ffi.sizeof(ctype) == size
    assert pystruct.size == size


FIELD_OFFSETS = [
    ("exon_data_header_t", "term_offset", L.DATA_TERM_OFFSET_OFFSET),
    ("exon_data_header_t", "session_id", L.DATA_SESSION_ID_OFFSET),
    ("exon_data_header_t", "stream_id", L.DATA_STREAM_ID_OFFSET),
    ("exon_data_header_t", "term_id", L.DATA_TERM_ID_OFFSET),
    ("exon_data_header_t", "reserved_value", L.DATA_RESERVED_VALUE_OFFSET),
    ("exon_setup_header_t", "term_offset", L.SETUP_TERM_OFFSET_OFFSET),
    ("exon_setup_header_t", "session_id", L.SETUP_SESSION_ID_OFFSET),
    ("exon_setup_header_t", "stream_id", L.SETUP_STREAM_ID_OFFSET),
    ("exon_setup_header_t", "initial_term_id", L.SETUP_INITIAL_TERM_ID_OFFSET),
    ("exon_setup_header_t", "active_term_id", L.SETUP_ACTIVE_TERM_ID_OFFSET),
    ("exon_setup_header_t", "term_length", L.SETUP_TERM_LENGTH_OFFSET),
    ("exon_setup_header_t", "mtu", L.SETUP_MTU_OFFSET),
    ("exon_setup_header_t", "ttl", L.SETUP_TTL_OFFSET),
    ("exon_sm_header_t", "session_id", L.SM_SESSION_ID_OFFSET),
    ("exon_sm_header_t", "stream_id", L.SM_STREAM_ID_OFFSET),
    ("exon_sm_header_t", "consumption_term_id", L.SM_CONSUMPTION_TERM_ID_OFFSET),
    ("exon_sm_header_t", "consumption_term_offset", L.SM_CONSUMPTION_TERM_OFFSET_OFFSET),
    ("exon_sm_header_t", "receiver_window", L.SM_RECEIVER_WINDOW_OFFSET),
    ("exon_sm_header_t", "receiver_id", L.SM_RECEIVER_ID_OFFSET),
    ("exon_nak_header_t", "session_id", L.NAK_SESSION_ID_OFFSET),
    ("exon_nak_header_t", "stream_id", L.NAK_STREAM_ID_OFFSET),
    ("exon_nak_header_t", "term_id", L.NAK_TERM_ID_OFFSET),
    ("exon_nak_header_t", "term_offset", L.NAK_TERM_OFFSET_OFFSET),
    ("exon_nak_header_t", "length", L.NAK_LENGTH_OFFSET),
    ("exon_rttm_header_t", "session_id", L.RTTM_SESSION_ID_OFFSET),
    ("exon_rttm_header_t", "stream_id", L.RTTM_STREAM_ID_OFFSET),
    ("exon_rttm_header_t", "echo_timestamp", L.RTTM_ECHO_TIMESTAMP_OFFSET),
    ("exon_rttm_header_t", "reception_delta", L.RTTM_RECEPTION_DELTA_OFFSET),
    ("exon_rttm_header_t", "receiver_id", L.RTTM_RECEIVER_ID_OFFSET),
    ("exon_err_header_t", "session_id", L.ERR_SESSION_ID_OFFSET),
    ("exon_err_header_t", "stream_id", L.ERR_STREAM_ID_OFFSET),
    ("exon_err_header_t", "receiver_id", L.ERR_RECEIVER_ID_OFFSET),
    ("exon_err_header_t", "group_tag", L.ERR_GROUP_TAG_OFFSET),
    ("exon_err_header_t", "error_code", L.ERR_ERROR_CODE_OFFSET),
    ("exon_err_header_t", "error_length", L.ERR_ERROR_LENGTH_OFFSET),
]


@pytest.mark.parametrize(("ctype", "field", "offset"), FIELD_OFFSETS)
def test_frame_field_offsets_agree(ctype: str, field: str, offset: int) -> None:
    assert ffi.offsetof(ctype, field) == offset


def _log_metadata_offsets() -> list[tuple[str, int]]:
    fields = []
    for name in dir(L):
        if name.startswith("LOG_") and name.endswith("_OFFSET"):
            field = name[len("LOG_") : -len("_OFFSET")].lower()
            fields.append((field, getattr(L, name)))
    return fields


@pytest.mark.parametrize(("field", "offset"), _log_metadata_offsets())
def test_log_metadata_offsets_agree(field: str, offset: int) -> None:
    assert ffi.offsetof("exon_log_metadata_t", field) == offset


def test_log_metadata_size_matches_aeron() -> None:
    assert ffi.sizeof("exon_log_metadata_t") == L.LOG_METADATA_STRUCT_LENGTH == 508
    assert L.LOG_METADATA_STRUCT_LENGTH <= L.LOG_META_DATA_LENGTH


def test_exon_socket_header_agrees() -> None:
    """The exon frame header is declared once per language: exon.core.frames (Python) and
    exon_layout.h (C). The constants and the packed struct must agree."""
    from exon.core import frames as F

    assert ffi.sizeof("exon_socket_frame_header_t") == F.HEADER.size == 20
    assert lib.EXON_SOCKET_HEADER_LENGTH == F.HEADER_LENGTH
    assert lib.EXON_FIXED_HEADER_LENGTH == F.FIXED_HEADER_LENGTH
    assert lib.EXON_PROTOCOL_VERSION == F.EXON_VERSION
    assert (lib.EXON_PROTO_SOCKETS, lib.EXON_PROTO_NODES) == (F.PROTOCOL_SOCKETS,
                                                              F.PROTOCOL_NODES)
    assert {t.name: int(t) for t in F.FrameType} == {
        name: getattr(lib, "EXON_MSG_" + name) for name in F.FrameType.__members__}
    names = ["version", "protocol", "type", "remaining_length", "source_tag",
             "destination_tag", "incarnation"]
    offsets, at = [], 0
    for code in F.HEADER.format.lstrip("<"):  # the Python struct's own field offsets
        offsets.append(at)
        at += struct.calcsize("<" + code)
    assert [ffi.offsetof("exon_socket_frame_header_t", n) for n in names] == offsets


def test_log_length_places_metadata_after_three_terms() -> None:
    assert L.log_length(65536) == 3 * 65536 + 4096
    assert L.log_length(65536, page_size=65536) == 4 * 65536


@pytest.mark.parametrize("bad", [0, 1024, 65535, 65536 * 3, 2 * 1024 * 1024 * 1024])
def test_check_term_length_rejects(bad: int) -> None:
    with pytest.raises(ValueError, match="term length"):
        L.check_term_length(bad)


def test_driver_dir_limit_agrees() -> None:
    assert lib.EXON_DRIVER_DIR_MAX_LENGTH == L.DRIVER_DIR_MAX_LENGTH
    # room under the C path buffers for "/publications/<int64>.logbuffer" and the NUL
    assert L.DRIVER_DIR_MAX_LENGTH + len("/publications/-9223372036854775808.logbuffer") < (
        lib.EXON_LOG_PATH_MAX)
