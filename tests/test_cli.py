"""The command line: ``exon driver`` + ``exon stat`` through the CLI itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from click.testing import CliRunner

from exon.cli import main
from exon.transport.aeron import Aeron, MediaDriver


def test_stat_once_json_through_the_cli(tmp_path) -> None:
    with MediaDriver.launch(dir=str(tmp_path / "driver")) as driver, \
            Aeron.connect(dir=driver.dir) as aeron:
        aeron.add_subscription("aeron:ipc", 42)
        pub = aeron.add_publication("aeron:ipc", 42)
        deadline = time.monotonic() + 5
        while not pub.is_connected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pub.offer(b"counted") > 0
        result = CliRunner().invoke(main, ["stat", "--dir", driver.dir, "--once", "--json"])
        assert result.exit_code == 0, result.output
        snapshot = json.loads(result.output)
        assert snapshot["driver_alive"] is True
        kinds = {c["type"] for c in snapshot["counters"]}
        assert {"system", "pub-lmt", "sub-pos"} <= kinds
        text = CliRunner().invoke(main, ["stat", "--dir", driver.dir, "--once"])
        assert text.exit_code == 0
        assert "links: publications" in text.output
        assert "links: images" in text.output


def test_stat_json_shows_the_exon_counters_of_nodes(tmp_path) -> None:
    import exon

    with MediaDriver.launch(dir=str(tmp_path / "driver")) as driver, \
            exon.Node(driver_dir=driver.dir) as a, exon.Node(driver_dir=driver.dir) as b:
        pull = b.socket("pull", tag=1)
        push = a.socket("push")
        push.link(f"{b.address}/1", timeout=5)
        push.send(b"x", timeout=5)
        assert pull.receive(timeout=5).payload == b"x"
        with a._lock:  # one malformed frame for b
            a._send_frames([(b.address, b"\x00junk")])
        deadline = time.monotonic() + 5
        while b.statistics().malformed_dropped == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # statistics() also copies them into the counters
        result = CliRunner().invoke(main, ["stat", "--dir", driver.dir, "--once", "--json"])
        assert result.exit_code == 0, result.output
        nodes = {n["node_id"]: n for n in json.loads(result.output)["nodes"]}
        assert set(nodes) == {a.node_id, b.node_id}
        assert nodes[b.node_id]["address"] == b.address
        assert nodes[b.node_id]["counters"]["malformed_dropped"] == 1
        assert nodes[b.node_id]["counters"]["links"] == 1
        assert nodes[a.node_id]["counters"]["malformed_dropped"] == 0
        text = CliRunner().invoke(main, ["stat", "--dir", driver.dir, "--once"])
        assert "exon nodes" in text.output
        assert f"{b.node_id[:8]} {b.address}" in text.output


def test_stat_on_a_dir_without_a_driver_fails_with_the_reason(tmp_path) -> None:
    result = CliRunner().invoke(main, ["stat", "--dir", str(tmp_path), "--once"])
    assert result.exit_code != 0
    assert "cnc.dat" in result.output


def test_driver_command_runs_until_sigterm_and_cleans_its_dir(tmp_path) -> None:
    directory = tmp_path / "ext"
    proc = subprocess.Popen([sys.executable, "-m", "exon.cli", "driver", "--dir", str(directory)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == str(directory)
        with Aeron.connect(dir=str(directory), timeout=5) as aeron:
            assert aeron.client_id >= 0
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert not directory.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_driver_command_on_an_active_dir_fails_with_one_line(tmp_path) -> None:
    with MediaDriver.launch(dir=str(tmp_path / "driver")) as driver:
        result = subprocess.run([sys.executable, "-m", "exon.cli", "driver", "--dir", driver.dir],
                                capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: StateError: launch driver in {driver.dir}: driver "
                               f"already active in {driver.dir} (pid {os.getpid()})")


def test_bench_transport_set_rejects_bad_fields() -> None:
    result = CliRunner().invoke(main, ["bench", "transport", "--vs", "none", "--set", "x"])
    assert result.exit_code == 2
    assert "'x' is not FIELD=VALUE" in result.output
    result = CliRunner().invoke(main, ["bench", "transport", "--vs", "none",
                                       "--set", "bogus=1"])
    assert result.exit_code == 1
    assert "invalid DriverSettings: bogus: Extra inputs are not permitted" in result.output
