"""Log buffer files: creation per Aeron, validation on open, position arithmetic, cleaning."""

from __future__ import annotations

import os
import struct

import pytest

from exon import errors
from exon.native import lib
from exon.transport.aeron import layout as L
from exon.transport.aeron.logbuffer import LogBuffer
from tests.transport.aeron.driver_fixtures import allocated_bytes

TERM = 64 * 1024


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "1.logbuffer")


def test_create_initialises_metadata_like_aeron(path: str) -> None:
    with LogBuffer.create(path, term_length=TERM, mtu=1408, initial_term_id=-5, session_id=11,
                          stream_id=22, correlation_id=99) as log:
        assert os.path.getsize(path) == L.log_length(TERM) == log.length
        meta = bytes(log.metadata_buffer())
        tails = struct.unpack_from("<3q", meta, L.LOG_TERM_TAIL_COUNTERS_OFFSET)
        assert [t >> 32 for t in tails] == [-5, -5 + 1 - 3, -5 + 2 - 3]
        assert [t & 0xFFFFFFFF for t in tails] == [0, 0, 0]
        assert struct.unpack_from("<i", meta, L.LOG_ACTIVE_TERM_COUNT_OFFSET)[0] == 0
        assert struct.unpack_from("<i", meta, L.LOG_EXON_MAGIC_OFFSET)[0] == L.LOG_MAGIC
        assert struct.unpack_from("<i", meta, L.LOG_EXON_LAYOUT_VERSION_OFFSET)[0] == 1
        assert struct.unpack_from("<i", meta, L.LOG_TERM_LENGTH_OFFSET)[0] == TERM
        assert struct.unpack_from("<i", meta, L.LOG_MTU_LENGTH_OFFSET)[0] == 1408
        assert struct.unpack_from("<i", meta, L.LOG_PAGE_SIZE_OFFSET)[0] == 4096
        assert struct.unpack_from("<q", meta, L.LOG_CORRELATION_ID_OFFSET)[0] == 99
        window = struct.unpack_from("<i", meta, L.LOG_PUBLICATION_WINDOW_LENGTH_OFFSET)[0]
        assert window == TERM // 2
        hdr = L.DATA_HEADER.unpack_from(meta, L.LOG_DEFAULT_HEADER_OFFSET)
        assert hdr == (0, 0, 0xC0, L.HDR_TYPE_DATA, 0, 11, 22, -5, 0)
        assert log.end_of_stream_position == 2**63 - 1
        assert log.max_message_length == TERM // 8
        assert log.max_payload_length == 1408 - 32
        assert log.producer_position == 0


def test_open_sees_the_same_log(path: str) -> None:
    LogBuffer.create(path, term_length=TERM * 2, mtu=4096, initial_term_id=7, session_id=3,
                     stream_id=4, page_size=8192).close()
    with LogBuffer.open(path) as log:
        assert (log.term_length, log.mtu, log.initial_term_id, log.session_id, log.stream_id,
                log.page_size) == (TERM * 2, 4096, 7, 3, 4, 8192)
        assert log.length == L.log_length(TERM * 2, 8192)


def test_create_refuses_existing_file(path: str) -> None:
    LogBuffer.create(path, term_length=TERM).close()
    with pytest.raises(errors.NativeOSError):
        LogBuffer.create(path, term_length=TERM)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"term_length": TERM + 1}, "term_length"),
        ({"term_length": 32 * 1024}, "term_length"),
        ({"term_length": TERM, "mtu": 1000}, "mtu"),
        ({"term_length": TERM, "mtu": 65536}, "mtu"),
        ({"term_length": TERM, "page_size": 3000}, "page_size"),
    ],
)
def test_create_rejects_bad_parameters(path: str, kwargs: dict, field: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=field):
        LogBuffer.create(path, **kwargs)
    assert not os.path.exists(path)


def _patch(path: str, offset_from_meta: int, fmt: str, value: int) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size - L.LOG_META_DATA_LENGTH + offset_from_meta)
        f.write(struct.pack(fmt, value))


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "field"),
    [
        (L.LOG_EXON_MAGIC_OFFSET, "<i", 0x12345678, "exon_magic"),
        (L.LOG_EXON_LAYOUT_VERSION_OFFSET, "<i", 99, "exon_layout_version"),
        (L.LOG_TERM_LENGTH_OFFSET, "<i", TERM * 2, "file length"),
        (L.LOG_TERM_LENGTH_OFFSET, "<i", TERM + 32, "term_length"),
        (L.LOG_PAGE_SIZE_OFFSET, "<i", 100, "page_size"),
        (L.LOG_MTU_LENGTH_OFFSET, "<i", 33, "mtu_length"),
    ],
)
def test_open_refuses_corrupt_metadata(path: str, offset: int, fmt: str, value: int,
                                       field: str) -> None:
    LogBuffer.create(path, term_length=TERM).close()
    _patch(path, offset, fmt, value)
    with pytest.raises(errors.LogBufferError) as info:
        LogBuffer.open(path)
    assert path in str(info.value)
    assert field in str(info.value)


def test_open_refuses_truncated_file(path: str) -> None:
    LogBuffer.create(path, term_length=TERM * 2).close()
    os.truncate(path, 3 * TERM * 2)  # metadata cut off
    with pytest.raises(errors.LogBufferError, match=r"1\.logbuffer"):
        LogBuffer.open(path)
    os.truncate(path, 1000)
    with pytest.raises(errors.LogBufferError, match="shorter"):
        LogBuffer.open(path)


def test_open_missing_file_is_an_os_error(tmp_path) -> None:
    with pytest.raises(errors.NativeOSError):
        LogBuffer.open(tmp_path / "nope.logbuffer")


def test_closed_log_refuses_use(path: str) -> None:
    log = LogBuffer.create(path, term_length=TERM)
    log.close()
    log.close()
    assert log.closed
    with pytest.raises(errors.ClosedError):
        _ = log.meta
    log.unlink()
    assert not os.path.exists(path)


@pytest.mark.parametrize("initial_term_id", [0, 5, -7, 2**31 - 2, -(2**31)])
@pytest.mark.parametrize("term_length", [TERM, 1 << 30])
def test_position_arithmetic_matches_aeron(initial_term_id: int, term_length: int) -> None:
    bits = term_length.bit_length() - 1
    for term_count in (0, 1, 2, 3, 1000, 2**31 - 1):
        for offset in (0, 32, term_length - 32):
            term_id = (initial_term_id + term_count + 2**31) % 2**32 - 2**31
            position = (term_count << bits) + offset
            assert lib.exon_log_compute_position(term_id, offset, bits, initial_term_id) == position
            assert lib.exon_log_term_id_by_position(position, bits, initial_term_id) == term_id
            assert lib.exon_log_term_offset_by_position(position, term_length) == offset
            assert lib.exon_log_index_by_position(position, bits) == term_count % 3
    packed = lib.exon_log_pack_tail(-3, 4096)
    assert packed >> 32 == -3
    assert packed & 0xFFFFFFFF == 4096
    assert lib.exon_log_compute_max_message_length(1 << 30) == 16 * 1024 * 1024
    assert lib.exon_log_compute_max_message_length(TERM) == TERM // 8


def test_clean_to_zeroes_behind_and_advances(path: str) -> None:
    with LogBuffer.create(path, term_length=TERM) as log:
        for i in range(3):
            log.term_buffer(i)[:] = b"\xff" * TERM
        assert log.clean_to(TERM // 2) == TERM // 2
        assert log.clean_position == TERM // 2
        assert bytes(log.term_buffer(0)[: TERM // 2]) == bytes(TERM // 2)
        assert log.term_buffer(0)[TERM // 2] == 0xFF
        assert log.clean_to(100) == 0  # never backwards
        assert log.clean_to(TERM + 4096) == TERM // 2 + 4096
        assert bytes(log.term_buffer(0)) == bytes(TERM)
        assert bytes(log.term_buffer(1)[:4096]) == bytes(4096)
        assert log.term_buffer(1)[4096] == 0xFF
        # far ahead: only the last term before the target is cleaned (older bytes share
        # their partition with positions a publisher may be writing)
        assert log.clean_to(5 * TERM + 64) == TERM
        assert log.clean_position == 5 * TERM + 64
        assert bytes(log.term_buffer(1)[64:]) == bytes(TERM - 64)  # positions 4T+64..5T
        assert bytes(log.term_buffer(2)[:64]) == bytes(64)  # positions 5T..5T+64
        assert log.term_buffer(2)[64] == 0xFF


def test_doorbell_table(path: str) -> None:
    with LogBuffer.create(path, term_length=TERM) as log:
        log.add_doorbell(3)
        log.add_doorbell(7)
        with pytest.raises(errors.NativeOSError):
            log.add_doorbell(3)
        assert log.meta.exon_doorbell_count == 2
        log.remove_doorbell(3)
        assert list(log.meta.exon_doorbell_ids[0:1]) == [7]
        for i in range(L.LOG_DOORBELL_CAPACITY - 1):
            log.add_doorbell(100 + i)
        with pytest.raises(errors.ResourceExhausted):
            log.add_doorbell(1000)


def test_log_path_format_refuses_a_path_it_would_cut_short() -> None:
    from exon.native import ffi

    out = ffi.new("char[]", lib.EXON_LOG_PATH_MAX)
    # the longest dir a driver takes, with the longest id, fits
    longest = b"/" + b"d" * (L.DRIVER_DIR_MAX_LENGTH - 2)
    n = lib.exon_log_path_format(out, lib.EXON_LOG_PATH_MAX, longest, b"publications", -(2**63))
    expected = longest + b"/publications/-9223372036854775808.logbuffer"
    assert (n, ffi.string(out)) == (len(expected), expected)
    # a dir near 4 KiB: an error that says so, and no path cut short
    near = b"/" + b"d" * 4079
    rc = lib.exon_log_path_format(out, lib.EXON_LOG_PATH_MAX, near, b"images", 12345)
    assert rc == lib.EXON_E_ARGUMENT
    assert ffi.string(out) == b""
    text = ffi.string(lib.exon_last_error()).decode()
    assert "(4080 bytes) would be 4103 bytes, longer than the 4095 a path may have" in text


def _resident(path: str) -> list[int]:
    """Resident bytes of each of this process's mappings of ``path`` (/proc/self/smaps)."""
    sizes, inside = [], False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if "-" in line.split(" ", 1)[0] and ":" not in line.split(" ", 1)[0]:
                inside = line.rstrip().endswith(path)
            elif inside and line.startswith("Rss:"):
                sizes.append(int(line.split()[1]) * 1024)
    return sizes


@pytest.mark.parametrize("sparse", [False, True])
def test_a_log_that_is_not_sparse_is_reserved_and_mapped_with_its_pages(path: str,
                                                                         sparse: bool) -> None:
    with LogBuffer.create(path, term_length=TERM * 4, mtu=1408, initial_term_id=0,
                          session_id=1, stream_id=2, sparse=sparse) as made, \
            LogBuffer.open(path) as opened:
        length = made.length
        assert opened.length == length
        resident = _resident(path)
        assert len(resident) == 2  # the creator's mapping and the opener's
        if sparse:  # pages come on first touch: only the metadata's so far
            assert allocated_bytes(path) < length // 4
            assert all(r < length // 4 for r in resident)
        else:
            assert allocated_bytes(path) >= length
            assert all(r >= length - 4096 for r in resident)
