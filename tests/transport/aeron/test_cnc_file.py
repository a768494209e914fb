"""cnc.dat create/open/validate (exon_cnc_file.c, cnc.py) and the distinct error log."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from exon import errors
from exon.native import ffi, lib
from exon.transport.aeron import cnc as pcnc
from exon.transport.aeron.cnc import CncFile, Section

SMALL = {
    "to_driver_capacity": 4096,
    "to_clients_capacity": 4096,
    "counters_values_length": 64 * 128,
    "error_log_length": 4096,
}


def make(tmp_path: Path, **kw: int) -> CncFile:
    return CncFile.create(tmp_path / "drv", **{**SMALL, **kw})


def test_python_constants_match_c() -> None:
    assert pcnc.CNC_VERSION == lib.EXON_CNC_VERSION
    assert pcnc.HEADER_LENGTH == lib.EXON_CNC_HEADER_LENGTH == ffi.sizeof("exon_cnc_header_t")
    assert pcnc.SECTION_ALIGNMENT == lib.EXON_CNC_SECTION_ALIGNMENT
    assert ffi.offsetof("exon_cnc_header_t", "cnc_version") == 8
    assert ffi.offsetof("exon_cnc_header_t", "to_clients_doorbell") == 320


def test_create_open_round_trip(tmp_path: Path) -> None:
    with make(tmp_path, driver_instance_id=77) as created:
        assert created.pid == os.getpid()
        assert created.cnc_version == lib.EXON_CNC_VERSION
        offsets = [created.section_offset(s) for s in Section]
        assert offsets[0] == 1024
        assert all(o % 128 == 0 for o in offsets)
        assert created.section_length(Section.TO_DRIVER) == 4096 + lib.EXON_RING_TRAILER_LENGTH
        assert created.section_length(Section.TO_CLIENTS) == 4096 + 128
        assert created.section_length(Section.COUNTERS_METADATA) == 64 * 512
        assert created.length == lib.exon_cnc_file_length(created.header)
        assert (tmp_path / "drv" / "cnc.dat").stat().st_size == created.length
        # the driver writes a command section; a second mapping sees it
        created.section(Section.TO_CLIENTS)[:4] = b"ping"
        created.set_driver_heartbeat_ms(123456)

        with CncFile.open(tmp_path / "drv") as opened:
            assert opened.path == tmp_path / "drv" / "cnc.dat"
            assert opened.pid == os.getpid()
            assert int(opened.header.driver_instance_id) == 77
            assert opened.section(Section.TO_CLIENTS)[:4] == b"ping"
            assert opened.driver_heartbeat_ms() == 123456
            assert opened.driver_heartbeat_age_ms(now=123500) == 44
            assert opened.is_driver_alive(100, now=123500)
            assert not opened.is_driver_alive(10, now=123500)
    with pytest.raises(errors.ClosedError):
        created.driver_heartbeat_ms()


def test_fresh_file_heartbeat_is_now_and_is_active(tmp_path: Path) -> None:
    with make(tmp_path) as c:
        assert abs(c.driver_heartbeat_age_ms()) < 5000
        now = pcnc.now_ms()
        assert lib.exon_cnc_is_active(str(tmp_path / "drv").encode(), now, 5000) == 1
        c.set_driver_heartbeat_ms(now - 60_000)
        assert lib.exon_cnc_is_active(str(tmp_path / "drv").encode(), now, 5000) == 0
    assert lib.exon_cnc_is_active(str(tmp_path / "nothing").encode(), now, 5000) == 0


def test_ring_broadcast_counters_through_the_file(tmp_path: Path) -> None:
    with make(tmp_path) as driver, CncFile.open(tmp_path / "drv") as client:
        ring_c = ffi.new("exon_ring_t *")
        ring_d = ffi.new("exon_ring_t *")
        assert lib.exon_cnc_to_driver_ring(client.handle, ring_c) == 0
        assert lib.exon_cnc_to_driver_ring(driver.handle, ring_d) == 0
        assert lib.exon_ring_write(ring_c, lib.EXON_CMD_CLIENT_KEEPALIVE, b"k" * 16, 16) == 0
        dst = ffi.new("uint8_t[]", 256)
        assert lib.exon_ring_read_copy(ring_d, dst, 256, 0) == 24
        # the ring's consumer heartbeat is the driver heartbeat
        lib.exon_ring_set_consumer_heartbeat_time(ring_d, 42)
        assert client.driver_heartbeat_ms() == 42

        rx = ffi.new("exon_broadcast_receiver_t *")
        tx = ffi.new("exon_broadcast_transmitter_t *")
        assert lib.exon_cnc_to_clients_receiver(client.handle, rx) == 0
        assert lib.exon_cnc_to_clients_transmitter(driver.handle, tx) == 0
        assert (
            lib.exon_broadcast_transmit(tx, lib.EXON_RSP_ON_OPERATION_SUCCESS, b"12345678", 8) == 0
        )
        t, n = ffi.new("int32_t *"), ffi.new("int32_t *")
        out = ffi.new("uint8_t[]", rx.max_message_length)
        assert lib.exon_broadcast_receive(rx, t, out, rx.max_message_length, n) == 1
        assert (t[0], bytes(ffi.buffer(out, n[0]))) == (
            lib.EXON_RSP_ON_OPERATION_SUCCESS,
            b"12345678",
        )

        mgr = ffi.new("exon_counters_t *")
        assert lib.exon_cnc_counters(driver.handle, mgr, 1000) == 0
        assert mgr.max_counters == 64
        assert lib.exon_counters_allocate_system(mgr, 0) == lib.EXON_SYSTEM_COUNTER_COUNT
        lib.exon_counter_add(mgr, lib.EXON_SYSTEM_COUNTER_ERRORS, 3)
        snap = client.counters().snapshot()
        assert snap[lib.EXON_SYSTEM_COUNTER_ERRORS].value == 3
        assert snap[lib.EXON_SYSTEM_COUNTER_ERRORS].label == "Errors"


def test_error_log_dedups_by_text(tmp_path: Path) -> None:
    with make(tmp_path) as driver, CncFile.open(tmp_path / "drv") as client:
        log = ffi.new("exon_error_log_t *")
        assert lib.exon_cnc_error_log(driver.handle, log) == 0
        assert lib.exon_error_log_record(log, 1000, b"bad frame", 9) == 1
        assert lib.exon_error_log_record(log, 2000, b"socket gone", 11) == 1
        assert lib.exon_error_log_record(log, 3000, b"bad frame", 9) == 0
        assert [
            (e.text, e.observation_count, e.first_timestamp_ms, e.last_timestamp_ms)
            for e in client.errors()
        ] == [
            ("bad frame", 2, 1000, 3000),
            ("socket gone", 1, 2000, 2000),
        ]
        # a second writer handle attaches after the existing records
        again = ffi.new("exon_error_log_t *")
        assert lib.exon_cnc_error_log(driver.handle, again) == 0
        assert lib.exon_error_log_record(again, 4000, b"third", 5) == 1
        assert len(client.errors()) == 3
        lib.exon_error_log_close(log)
        lib.exon_error_log_close(again)


def test_error_log_full_keeps_counting_repeats() -> None:
    mem = ffi.new("uint64_t[]", 128 // 8)
    log = ffi.new("exon_error_log_t *")
    assert lib.exon_error_log_init(log, mem, 128) == 0
    assert lib.exon_error_log_record(log, 1, b"a" * 30, 30) == 1  # 54 -> 64 bytes
    assert lib.exon_error_log_record(log, 2, b"b" * 30, 30) == 1
    assert lib.exon_error_log_record(log, 3, b"c", 1) == lib.EXON_E_NO_SPACE
    assert lib.exon_error_log_record(log, 4, b"a" * 30, 30) == 0
    assert lib.exon_error_log_count(ffi.cast("uint8_t *", mem), 128) == 2
    lib.exon_error_log_close(log)


def test_create_rejects_bad_sizes(tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigurationError, match="powers of two"):
        make(tmp_path, to_driver_capacity=1000)
    with pytest.raises(errors.ConfigurationError, match="counters values"):
        make(tmp_path, counters_values_length=100)


# ---- refusal of bad files -------------------------------------------------------------


def test_missing_file_named(tmp_path: Path) -> None:
    with pytest.raises(errors.CncError, match=r"nowhere/cnc\.dat: no such file"):
        CncFile.open(tmp_path / "nowhere")


def test_truncated_header_refused(tmp_path: Path) -> None:
    (tmp_path / "cnc.dat").write_bytes(b"\x00" * 100)
    with pytest.raises(errors.CncError, match=r"cnc\.dat: truncated: 100 bytes"):
        CncFile.open(tmp_path)


def test_truncated_sections_refused(tmp_path: Path) -> None:
    c = make(tmp_path)
    length = c.length
    c.close()
    path = tmp_path / "drv" / "cnc.dat"
    os.truncate(path, length - 4096)
    with pytest.raises(errors.CncError, match=rf"{path}: truncated: {length - 4096} bytes"):
        CncFile.open(tmp_path / "drv")
    assert lib.exon_last_error_code() == lib.EXON_E_CNC_CORRUPT


def test_wrong_magic_refused(tmp_path: Path) -> None:
    (tmp_path / "cnc.dat").write_bytes(b"AERONCNC" + b"\x01" * 2000)
    with pytest.raises(errors.CncError, match=r"cnc\.dat: wrong magic .*not an exon CnC file"):
        CncFile.open(tmp_path)
    assert lib.exon_last_error_code() == lib.EXON_E_CNC_CORRUPT


def test_other_version_refused(tmp_path: Path) -> None:
    c = make(tmp_path)
    c.close()
    path = tmp_path / "drv" / "cnc.dat"
    with path.open("r+b") as f:
        f.seek(8)
        f.write(struct.pack("<i", 99))
    with pytest.raises(
        errors.CncError, match=r"cnc\.dat: CnC version 99, this exon reads version 1"
    ):
        CncFile.open(tmp_path / "drv")
    assert lib.exon_last_error_code() == lib.EXON_E_CNC_VERSION


def test_not_ready_file_waits_then_refuses(tmp_path: Path) -> None:
    (tmp_path / "cnc.dat").write_bytes(bytes(4096))  # created, header not written yet
    with pytest.raises(errors.CncError, match="not ready"):
        CncFile.open(tmp_path, wait=0.05)


def test_recreate_replaces_old_file_and_old_mapping_survives(tmp_path: Path) -> None:
    first = make(tmp_path, driver_instance_id=1)
    second = make(tmp_path, driver_instance_id=2)
    assert int(first.header.driver_instance_id) == 1  # old inode still mapped
    with CncFile.open(tmp_path / "drv") as opened:
        assert int(opened.header.driver_instance_id) == 2
    first.close()
    second.close()
