"""sd_notify without a dependency: READY=1, WATCHDOG=1, STOPPING=1 on $NOTIFY_SOCKET
(issue #31)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from exon.ops.systemd import Watchdog, notify, watchdog_interval
from tests.sockets.helpers import ROOT, kill, read_line


@pytest.fixture(params=["path", "abstract"])
def notify_socket(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[str, Any]]:
    """A datagram socket as systemd listens on: (its $NOTIFY_SOCKET, the socket)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if request.param == "path":
        address = str(tmp_path / "notify")
        sock.bind(address)
        env = address
    else:
        name = f"exon-test-{uuid.uuid4().hex}"
        sock.bind("\0" + name)
        env = "@" + name
    sock.settimeout(10)
    yield env, sock
    sock.close()


def receive(sock: Any) -> str:
    return str(sock.recv(4096).decode())


def test_notify_sends_one_datagram(notify_socket: tuple[str, Any]) -> None:
    env, sock = notify_socket
    assert notify("READY=1\nSTATUS=up", {"NOTIFY_SOCKET": env})
    assert receive(sock) == "READY=1\nSTATUS=up"


def test_without_systemd_nothing_is_sent() -> None:
    assert not notify("READY=1", {})
    assert not notify("READY=1", {"NOTIFY_SOCKET": "relative/path"})
    assert not notify("READY=1", {"NOTIFY_SOCKET": "/nonexistent/exon/notify"})  # logged


def test_watchdog_interval() -> None:
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "2000000"}) == 1.0
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "x"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "2000000",
                              "WATCHDOG_PID": str(os.getpid())}) == 1.0


def test_watchdog_keeps_alive_only_while_alive(notify_socket: tuple[str, Any]) -> None:
    env, sock = notify_socket
    alive: list[str | None] = [None]
    dog = Watchdog(lambda: alive[0], {"NOTIFY_SOCKET": env, "WATCHDOG_USEC": "40000"})
    try:
        assert [receive(sock) for _ in range(3)] == ["WATCHDOG=1"] * 3
        alive[0] = "the driver does not answer"
        # what was in flight may still come (one at most), then nothing more
        sock.settimeout(0.3)
        late = 0
        while late < 5:
            try:
                receive(sock)
            except TimeoutError:
                break
            late += 1
        assert late <= 1
    finally:
        dog.close()


def test_a_node_tells_systemd_ready_watchdog_and_stopping(
        notify_socket: tuple[str, Any]) -> None:
    env, sock = notify_socket
    proc = subprocess.Popen(
        [sys.executable, "-m", "exon.cli", "node", "--sink", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, NOTIFY_SOCKET=env, WATCHDOG_USEC="200000"))
    try:
        address = read_line(proc)
        assert receive(sock) == f"READY=1\nSTATUS=node {address}"
        assert receive(sock) == "WATCHDOG=1"
        assert receive(sock) == "WATCHDOG=1"
        kill(proc, 15)
        messages = []
        while "STOPPING=1" not in messages and len(messages) < 20:
            messages.append(receive(sock))
        assert "STOPPING=1" in messages
    finally:
        kill(proc, 9)
