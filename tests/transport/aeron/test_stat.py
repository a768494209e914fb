"""``exon stat`` rendering from a real CnC file (stat.py)."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from exon.native import ffi, lib
from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import PUB_POS, NodeCounter, SystemCounter
from exon.transport.aeron.layout import DATA_HEADER_LENGTH, FRAME_ALIGNMENT, align
from exon.transport.aeron.stat import (
    GROUPS,
    NODE_GROUP,
    SYSTEM_GROUPS,
    add_rates,
    render_text,
    run_stat,
    snapshot,
)


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
    label = b"pub-pos: 1001 7 0 aeron:ipc"
    cid = lib.exon_counters_allocate(mgr, PUB_POS, ffi.NULL, 0, label, len(label), 1001, 9, 0)
    lib.exon_counter_set(mgr, cid, 65536)
    other = b"exon-links: node 127.0.0.1:4000"  # a type this version does not know
    oid = lib.exon_counters_allocate(mgr, 1234, ffi.NULL, 0, other, len(other), 0, 0, 0)
    lib.exon_counter_set(mgr, oid, 3)
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
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert "exon stat (CnC v1)" in lines[0]
    # the system counters in their groups, in GROUPS order, each with its total
    titles = [line for line in lines if line in GROUPS]
    assert titles == list(GROUPS)
    health = lines.index("health")
    assert any(line.split() == ["15", "Errors", "2"] for line in lines[health:])
    # the pub-pos counter as a link row: session 7, stream 0, channel, position
    pubs = lines.index("links: publications")
    assert lines[pubs + 2].split() == ["7", "0", "aeron:ipc", "65,536"]
    assert "x2 oops" in lines[-1]


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


def test_every_system_counter_has_a_group_and_unknown_types_go_to_other(
        driver_dir: Path) -> None:
    assert set(SYSTEM_GROUPS) == set(SystemCounter)
    assert set(SYSTEM_GROUPS.values()) == set(GROUPS)
    out = io.StringIO()
    assert run_stat(driver_dir, once=True, as_json=True, out=out) == 0
    snap = json.loads(out.getvalue())
    by_label = {c["label"]: c for c in snap["counters"]}
    assert by_label["exon-links: node 127.0.0.1:4000"]["group"] == "other"
    assert by_label["Invalid packets"]["group"] == "drops"
    assert by_label["pub-pos: 1001 7 0 aeron:ipc"]["group"] == "publications"


def test_rates_are_changes_per_second_since_the_previous_sample(driver_dir: Path) -> None:
    with CncFile.open(driver_dir) as cnc:
        first = add_rates(snapshot(cnc), None, None)
        counters = ffi.new("exon_counters_t *")
        assert lib.exon_cnc_counters(cnc.handle, counters, 0) == 0
        lib.exon_counter_add(counters, SystemCounter.BYTES_SENT, 5000)
        second = add_rates(snapshot(cnc), first, 2.0)
    assert first["elapsed_s"] is None
    assert all(c["rate"] is None for c in first["counters"])
    rates = {c["label"]: c["rate"] for c in second["counters"]}
    assert second["elapsed_s"] == 2.0
    assert rates["Bytes sent"] == 2500.0
    assert rates["Errors"] == 0.0
    assert rates["pub-pos: 1001 7 0 aeron:ipc"] == 0.0


def _stat(directory: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "exon.cli", "stat", "--dir", directory,
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _connected_ipc_pair(aeron: Aeron, stream_id: int) -> tuple[Any, Any]:
    sub = aeron.add_subscription("aeron:ipc", stream_id)
    pub = aeron.add_exclusive_publication("aeron:ipc", stream_id)
    deadline = time.monotonic() + 10
    while not (pub.is_connected and sub.images):
        assert time.monotonic() < deadline, "the IPC publication never connected"
        sub.wait(0.01)
    return pub, sub


def test_live_rate_is_right_for_a_known_amount_of_traffic(tmp_path: Path) -> None:
    messages, size = 1000, 100
    frame = align(DATA_HEADER_LENGTH + size, FRAME_ALIGNMENT)
    with MediaDriver.launch(dir=str(tmp_path / "driver"), threading_mode="SHARED") as driver, \
            Aeron.connect(dir=driver.dir) as aeron:
        pub, sub = _connected_ipc_pair(aeron, 77)
        proc = _stat(driver.dir, "--watch", "2", "--count", "2", "--json")
        try:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())
            # the traffic falls between the two samples (it takes milliseconds; they are
            # two seconds apart)
            for _ in range(messages):
                while pub.offer(b"x" * size) < 0:
                    sub.poll(lambda data, header: None, 256)
            taken = 0
            deadline = time.monotonic() + 10
            while taken < messages and time.monotonic() < deadline:
                taken += sub.poll(lambda data, header: None, 256)
            assert taken == messages
            second = json.loads(proc.stdout.readline())
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    key = pub.registration_id

    def pub_pos(snap: dict[str, Any]) -> dict[str, Any]:
        [counter] = [c for c in snap["counters"] if c["type"] == "pub-pos"
                     and " 77 aeron:ipc" in c["label"]
                     and c["registration_id"] == key]
        return counter

    assert first["elapsed_s"] is None
    assert pub_pos(first)["rate"] is None
    delta = pub_pos(second)["value"] - pub_pos(first)["value"]
    assert delta == messages * frame
    assert 1.5 < second["elapsed_s"] < 10
    assert pub_pos(second)["rate"] == pytest.approx(delta / second["elapsed_s"], rel=1e-9)
    # the same rate on the publication's link row, and the image consumed it all
    [row] = [p for p in second["publications"] if p["stream_id"] == 77]
    assert row["rate"] == pytest.approx(delta / second["elapsed_s"], rel=1e-9)
    assert row["window"] > 0
    [image] = [i for i in second["images"] if i["stream_id"] == 77]
    assert image["lag"] == 0


def test_watch_exits_1_with_one_line_when_the_driver_goes_away(tmp_path: Path) -> None:
    driver = MediaDriver.launch(dir=str(tmp_path / "driver"), threading_mode="SHARED",
                                dir_delete_on_shutdown=True)
    proc = _stat(driver.dir, "--watch", "0.1")
    try:
        assert proc.stdout is not None
        assert "exon stat (CnC v1)" in proc.stdout.readline()  # it runs
        driver.close()
        assert proc.wait(timeout=30) == 1
        assert proc.stderr is not None
        err = proc.stderr.read().strip().splitlines()
        assert err == [f"exon stat: the driver of {driver.dir} is gone (cnc.dat was removed)"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        driver.close()


def test_watch_ends_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    with MediaDriver.launch(dir=str(tmp_path / "driver"), threading_mode="SHARED") as driver:
        proc = _stat(driver.dir, "--watch", "0.1", "--json")
        try:
            assert proc.stdout is not None
            json.loads(proc.stdout.readline())
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
            assert proc.stderr is not None
            assert "Traceback" not in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _node_counter(directory: Path, kind: NodeCounter, node_id: str, owner: int,
                  value: int) -> None:
    with CncFile.open(directory) as cnc:
        mgr = ffi.new("exon_counters_t *")
        assert lib.exon_cnc_counters(cnc.handle, mgr, 0) == 0
        label = kind.label(node_id, "127.0.0.1:4000").encode()
        cid = lib.exon_counters_allocate(mgr, kind, ffi.NULL, 0, label, len(label), 77, owner, 0)
        assert cid >= 0
        lib.exon_counter_set(mgr, cid, value)


def test_exon_node_counters_are_grouped_per_node(driver_dir: Path) -> None:
    node_id = "0123456789abcdef0123456789abcdef"
    _node_counter(driver_dir, NodeCounter.LINKS, node_id, 5, 2)
    _node_counter(driver_dir, NodeCounter.MALFORMED_DROPPED, node_id, 5, 3)
    _node_counter(driver_dir, NodeCounter.LINKS, "f" * 32, 6, 1)
    out = io.StringIO()
    assert run_stat(driver_dir, once=True, as_json=True, out=out) == 0
    snap = json.loads(out.getvalue())
    by_label = {c["label"]: c for c in snap["counters"]}
    malformed = by_label[f"exon drops malformed: node {node_id} 127.0.0.1:4000"]
    assert (malformed["group"], malformed["type"], malformed["value"]) == (
        NODE_GROUP, "exon-drops-malformed", 3)
    assert snap["nodes"] == [
        {"node_id": node_id, "address": "127.0.0.1:4000", "owner_id": 5,
         "counters": {"links": 2, "malformed_dropped": 3},
         "rates": {"links": None, "malformed_dropped": None}},
        {"node_id": "f" * 32, "address": "127.0.0.1:4000", "owner_id": 6,
         "counters": {"links": 1}, "rates": {"links": None}},
    ]
    text = render_text(add_rates(snapshot_of(driver_dir), None, None))
    lines = [line.split() for line in text.splitlines()]
    assert ["exon", "nodes"] in lines
    assert ["01234567", "127.0.0.1:4000", "drops", "malformed", "3"] in lines
    assert ["ffffffff", "127.0.0.1:4000", "links", "1"] in lines


def snapshot_of(directory: Path) -> dict[str, Any]:
    with CncFile.open(directory) as cnc:
        return snapshot(cnc)
