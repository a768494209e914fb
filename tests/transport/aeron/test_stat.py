"""``exon stat`` rendering from a real CnC file (stat.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from exon.native import ffi, lib
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import PUB_POS, SystemCounter
from exon.transport.aeron.stat import render_text, run_stat, snapshot


@pytest.fixture
def driver_dir(tmp_path: Path):
    directory = tmp_path / "drv"
    cnc = CncFile.create(
        directory,
        to_driver_capacity=4096,
        to_clients_capacity=4096,
        counters_values_length=64 * 128,
        error_log_length=4096,
    )
    mgr = ffi.new("exon_counters_t *")
    assert lib.exon_cnc_counters(cnc.handle, mgr, 0) == 0
    assert lib.exon_counters_allocate_system(mgr, 0) == len(SystemCounter)
    label = b"pub-pos: 1001 stream 7 aeron:ipc"
    cid = lib.exon_counters_allocate(mgr, PUB_POS, ffi.NULL, 0, label, len(label), 1001, 9, 0)
    lib.exon_counter_set(mgr, cid, 65536)
    lib.exon_counter_add(mgr, SystemCounter.ERRORS, 2)
    log = ffi.new("exon_error_log_t *")
    assert lib.exon_cnc_error_log(cnc.handle, log) == 0
    lib.exon_error_log_record(log, 1, b"oops", 4)
    lib.exon_error_log_record(log, 2, b"oops", 4)
    lib.exon_error_log_close(log)
    yield directory
    cnc.close()


def test_once_json_snapshot(driver_dir: Path) -> None:
    out = io.StringIO()
    assert run_stat(driver_dir, once=True, as_json=True, out=out) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    snap = json.loads(lines[0])
    assert snap["cnc_version"] == 1
    assert snap["driver_alive"] is True
    assert snap["dir"] == str(driver_dir)
    by_id = {c["id"]: c for c in snap["counters"]}
    assert by_id[SystemCounter.ERRORS]["value"] == 2
    assert by_id[SystemCounter.ERRORS]["label"] == "Errors"
    assert by_id[SystemCounter.CLIENT_TIMEOUTS]["type"] == "system"
    pub = by_id[len(SystemCounter)]
    assert (pub["type"], pub["value"], pub["registration_id"], pub["owner_id"]) == (
        "pub-pos",
        65536,
        1001,
        9,
    )
    assert snap["errors"] == [
        {"count": 2, "first_timestamp_ms": 1, "last_timestamp_ms": 2, "text": "oops"}
    ]


def test_text_table(driver_dir: Path) -> None:
    out = io.StringIO()
    assert run_stat(driver_dir, once=True, out=out) == 0
    text = out.getvalue()
    assert "exon stat (CnC v1)" in text
    assert " 15:                    2 - Errors" in text
    assert "65,536 - pub-pos: 1001 stream 7 aeron:ipc" in text
    assert "x2 oops" in text


def test_refreshing_is_bounded_and_sees_changes(driver_dir: Path) -> None:
    out = io.StringIO()
    assert run_stat(driver_dir, as_json=True, interval=0.01, out=out, max_refreshes=3) == 0
    assert len(out.getvalue().splitlines()) == 3


def test_dead_driver_reported(driver_dir: Path) -> None:
    with CncFile.open(driver_dir) as cnc:
        cnc.set_driver_heartbeat_ms(cnc.driver_heartbeat_ms() - 3_600_000)
        snap = snapshot(cnc)
        assert snap["driver_alive"] is False
        assert "NOT RESPONDING" in render_text(snap)


def test_missing_dir_is_exit_1_with_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_stat(tmp_path / "none", once=True) == 1
    assert "cnc.dat: no such file" in capsys.readouterr().err
