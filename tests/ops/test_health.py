"""--health: /healthz and /readyz (issue #31)."""

from __future__ import annotations

import shutil
import socket
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

import exon
from exon.archive import cli as archive_cli
from exon.archive import service as archive_service
from exon.ops.health import HealthServer, serve_health
from tests.sockets.helpers import exon_cli, kill, read_line, run_cli
from tests.transport.aeron.driver_fixtures import unique_dir, wait_until


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_readyz_waits_for_ready_and_healthz_follows_the_alive_check() -> None:
    alive: list[str | None] = [None]
    with HealthServer("127.0.0.1", 0, alive=lambda: alive[0]) as health:
        health.set_waiting("recovering")
        assert get(health.url + "/healthz") == (200, "ok\n")
        assert get(health.url + "/readyz") == (503, "not ready: recovering\n")
        health.set_ready()
        assert get(health.url + "/readyz") == (200, "ready\n")
        alive[0] = "the driver does not answer"
        assert get(health.url + "/healthz") == (503, "the driver does not answer\n")
        assert get(health.url + "/readyz")[0] == 503  # not alive: not ready either
        assert get(health.url + "/other")[0] == 404


def test_a_check_that_raises_answers_503() -> None:
    def broken() -> str | None:
        raise RuntimeError("boom")

    with HealthServer("127.0.0.1", 0, alive=broken) as health:
        status, text = get(health.url + "/healthz")
    assert status == 503
    assert "RuntimeError: boom" in text


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(exon.ConfigurationError, match="in use"):
            serve_health(f"127.0.0.1:{port}")


def test_archive_readyz_is_false_until_the_recordings_are_recovered(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    recovering = threading.Event()
    release = threading.Event()

    class SlowArchive(archive_service.Archive):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            recovering.set()
            assert release.wait(30)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(archive_service, "Archive", SlowArchive)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stop = threading.Event()
    status: list[int] = []
    runner = threading.Thread(target=lambda: status.append(archive_cli.run_service(
        str(tmp_path / "arch"), endpoint="127.0.0.1:0", ingest={"orders": 10}, fsync="none",
        health=f"127.0.0.1:{port}", stop=stop)), daemon=True)
    runner.start()
    url = f"http://127.0.0.1:{port}"
    try:
        assert recovering.wait(30)
        assert wait_until(lambda: get(url + "/healthz")[0] == 200, timeout=10)
        assert get(url + "/readyz") == (503, "not ready: recovering the recordings\n")
        release.set()
        assert wait_until(lambda: get(url + "/readyz") == (200, "ready\n"), timeout=30)
        assert get(url + "/healthz") == (200, "ok\n")
    finally:
        release.set()
        stop.set()
        runner.join(30)
    assert status == [0]
    with pytest.raises(OSError):  # the endpoint went with the service
        urllib.request.urlopen(url + "/healthz", timeout=2)


@pytest.mark.slow
def test_driver_and_node_commands_answer_health() -> None:
    directory = unique_dir("health")
    with socket.socket() as s1, socket.socket() as s2:
        s1.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        driver_port, node_port = s1.getsockname()[1], s2.getsockname()[1]
    driver = exon_cli("driver", "--dir", directory, "--health", f"127.0.0.1:{driver_port}")
    node = None
    try:
        assert read_line(driver) == directory
        assert wait_until(lambda: get(f"http://127.0.0.1:{driver_port}/readyz")[0] == 200,
                          timeout=10)
        node = exon_cli("node", "--driver-dir", directory, "--sink", "5",
                        "--health", f"127.0.0.1:{node_port}")
        read_line(node)
        assert read_line(node).startswith("sink ")
        assert get(f"http://127.0.0.1:{node_port}/readyz") == (200, "ready\n")
        assert get(f"http://127.0.0.1:{node_port}/healthz") == (200, "ok\n")
        kill(driver, 9)  # the driver dies: the node's driver stops answering
        assert wait_until(lambda: get(f"http://127.0.0.1:{node_port}/healthz")[0] == 503,
                          timeout=30)
        assert "does not answer" in get(f"http://127.0.0.1:{node_port}/healthz")[1]
    finally:
        if node is not None:
            kill(node, 15)
        kill(driver, 15)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("command", [("node",), ("driver", "--dir", "DIR"),
                                     ("archive", "serve", "--dir", "DIR")])
def test_each_command_stops_at_once_on_a_health_port_in_use(command: tuple[str, ...],
                                                           tmp_path: Any) -> None:
    directory = str(tmp_path / "d")
    args = [directory if a == "DIR" else a for a in command]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(*args, "--health", f"127.0.0.1:{port}", timeout=60)
    assert result.returncode in (1, 2), result
    assert f"127.0.0.1:{port}: cannot listen: the port is in use" in result.stderr
    assert not result.stdout  # nothing started: no address, no directory printed
    assert not (tmp_path / "d").exists()
