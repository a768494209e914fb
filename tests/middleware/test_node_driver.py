"""Which driver a Node uses (``Node(driver=...)``): the host driver when one is live,
an embedded one otherwise; stale and contested directories; a host driver killed under
blocked callers."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import exon
from exon import errors
from exon.transport.aeron import MediaDriver
from exon.transport.aeron.driver import probe_driver
from tests.sockets.helpers import DRIVER, ROOT
from tests.transport.aeron.driver_fixtures import unique_dir

_SETS = [f"{key}={value}" for key, value in DRIVER.items()]


def _driver_process(directory: str, *extra: str) -> subprocess.Popen[str]:
    """``python -m exon.transport.aeron.driver_main --dir DIR`` (what ``exon driver``
    runs), small buffers; returns once it printed its directory."""
    args = [sys.executable, "-m", "exon.transport.aeron.driver_main", "--dir", directory,
            *extra]
    for item in _SETS:
        args += ["--set", item]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == directory, proc.stderr.read() if proc.stderr else line
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def host_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private host-driver directory ($EXON_DIR) and the default choice ("auto")."""
    directory = unique_dir("host")
    monkeypatch.setenv("EXON_DIR", directory)
    monkeypatch.delenv("EXON_NODE_DRIVER", raising=False)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def host_driver(host_dir: str) -> Iterator[subprocess.Popen[str]]:
    proc = _driver_process(host_dir)
    yield proc
    _stop(proc)


def test_auto_embeds_when_no_host_driver_runs(host_dir: str) -> None:
    with exon.Node() as node:
        assert node.driver_kind == "embedded"
        assert node.driver_dir != host_dir
    assert not os.path.exists(host_dir)


def test_shared_without_a_host_driver_is_a_typed_error(host_dir: str) -> None:
    with pytest.raises(errors.DriverUnavailable, match="exon driver"):
        exon.Node(driver="shared")


def test_auto_uses_the_live_host_driver_and_nodes_talk_over_ipc(
        host_driver: subprocess.Popen[str], host_dir: str) -> None:
    assert probe_driver(host_dir).pid == host_driver.pid
    with exon.Node() as a, exon.Node(driver="shared") as b:
        assert (a.driver_kind, b.driver_kind) == ("host", "host")
        assert a.driver_dir == b.driver_dir == host_dir
        rep = b.socket("rep", tag=1)
        req = a.socket("req")
        req.link(f"{b.address}/1", timeout=5)
        assert a._transport is not None
        assert a._transport.channel_for(b.address)[0] == "aeron:ipc"
        req.send(b"ping")
        msg = rep.receive(timeout=5)
        rep.send(msg.payload + b"!")
        assert req.receive(timeout=5).payload == b"ping!"


def test_embedded_ignores_a_live_host_driver(host_driver: subprocess.Popen[str],
                                             host_dir: str) -> None:
    with exon.Node(driver="embedded") as node:
        assert node.driver_kind == "embedded"
        assert node.driver_dir != host_dir


def test_environment_picks_the_default_choice(host_driver: subprocess.Popen[str],
                                              host_dir: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXON_NODE_DRIVER", "embedded")
    with exon.Node() as node:
        assert node.driver_kind == "embedded"
    with exon.Node(driver="auto") as node:
        assert node.driver_kind == "host"


def test_a_stale_host_directory_is_reported_then_the_node_embeds(
        host_dir: str, caplog: pytest.LogCaptureFixture) -> None:
    # a driver that shut down without deleting its directory leaves a cnc.dat behind
    MediaDriver.launch(dir=host_dir, dir_delete_on_shutdown=False, **DRIVER).close()
    assert probe_driver(host_dir).state == "stale"
    with caplog.at_level(logging.WARNING, logger="exon.node"), exon.Node() as node:
        assert node.driver_kind == "embedded"
    assert any(host_dir in r.getMessage() and "stale" in r.getMessage()
               for r in caplog.records)
    with pytest.raises(errors.DriverUnavailable, match="shut down"):
        exon.Node(driver="shared")


def test_explicit_directory_and_driver_dir_are_the_same_choice(
        host_driver: subprocess.Popen[str], host_dir: str) -> None:
    with exon.Node(driver=host_dir) as a, exon.Node(driver_dir=host_dir) as b:
        assert a.driver_dir == b.driver_dir == host_dir
        assert a.driver_kind == b.driver_kind == "external"


@pytest.mark.parametrize("kwargs", [{"driver": "embeded"},
                                    {"driver": "embedded", "driver_dir": "/dev/shm/x"}])
def test_bad_driver_choices_are_refused(kwargs: dict[str, str]) -> None:
    with pytest.raises(errors.ConfigurationError):
        exon.Node(**kwargs)


def test_two_drivers_never_share_a_directory(host_driver: subprocess.Popen[str],
                                             host_dir: str) -> None:
    with pytest.raises(errors.StateError, match="already active"):
        MediaDriver.launch(dir=host_dir, **DRIVER)
    second = subprocess.run(
        [sys.executable, "-m", "exon.cli", "driver"], capture_output=True, text=True,
        timeout=60, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, check=False)
    assert second.returncode == 1
    assert "already active" in second.stderr
    assert f"pid {host_driver.pid}" in second.stderr
    assert "Traceback" not in second.stderr
    assert host_driver.poll() is None  # the first one is untouched
    assert probe_driver(host_dir).state == "live"


def test_exon_driver_runs_at_the_host_directory_by_default(host_dir: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "exon.cli", "driver"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT,
                                     EXON_IPC_TERM_BUFFER_LENGTH="1048576"), cwd=ROOT)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == host_dir
        assert probe_driver(host_dir).state == "live"
    finally:
        _stop(proc)
    assert proc.returncode == 0


def test_a_driver_killed_moments_ago_does_not_block_the_next_one(host_dir: str) -> None:
    proc = _driver_process(host_dir)
    proc.kill()  # SIGKILL: its heartbeat is still fresh, its pid is gone
    proc.wait(10)
    found = probe_driver(host_dir)
    assert found.state == "stale"
    assert "gone" in found.reason
    with MediaDriver.launch(dir=host_dir, **DRIVER) as driver:
        assert probe_driver(driver.dir).state == "live"


def test_a_killed_host_driver_wakes_blocked_callers_with_broken_link(
        host_dir: str) -> None:
    proc = _driver_process(host_dir)
    try:
        with exon.Node(driver="shared") as a, exon.Node(driver="shared") as b:
            b.socket("rep", tag=1)  # never answers
            req = a.socket("req")
            pull = b.socket("pull", tag=2)
            push = a.socket("push")
            req.link(f"{b.address}/1", timeout=5)
            push.link(f"{b.address}/2", timeout=5)
            req.send(b"anyone?")
            outcome: dict[str, BaseException | None] = {}

            def blocked(name: str, call: object) -> None:
                try:
                    call()  # type: ignore[operator]
                    outcome[name] = None
                except BaseException as exc:
                    outcome[name] = exc

            threads = [
                threading.Thread(target=blocked, args=("req", lambda: req.receive(timeout=30))),
                threading.Thread(target=blocked, args=("pull", lambda: pull.receive(timeout=30))),
            ]
            for t in threads:
                t.start()
            time.sleep(0.3)  # both are blocked now
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            start = time.monotonic()
            for t in threads:
                t.join(30)
            waited = time.monotonic() - start
            assert not any(t.is_alive() for t in threads)
            assert isinstance(outcome["req"], errors.BrokenLink), outcome
            assert isinstance(outcome["pull"], errors.BrokenLink), outcome
            # the client notices the pid within its wait slice; far below the 30 s timeout
            assert waited < 10.0
            with pytest.raises(errors.ExonError):
                req.send(b"again")
    finally:
        _stop(proc)
