"""Test kit for the sockets: a small shared media driver and nodes on it (IPC)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import exon
from exon.transport.aeron import MediaDriver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRIVER = {
    "ipc_term_buffer_length": 1024 * 1024,
    "to_driver_buffer_length": 256 * 1024,
    "to_clients_buffer_length": 256 * 1024,
    "counters_values_buffer_length": 256 * 1024,
    "publication_linger_timeout_ns": 0,
    "client_liveness_timeout_ns": 500_000_000,
    "threading_mode": "SHARED",
}


def unique_dir(tag: str = "s") -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
    return os.path.join(base, f"exon-test-{tag}-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def driver() -> Iterator[MediaDriver]:
    path = unique_dir()
    with MediaDriver.launch(dir=path, **DRIVER) as d:
        yield d
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_node(driver: MediaDriver) -> Iterator[Callable[..., exon.Node]]:
    nodes: list[exon.Node] = []

    def make(**kwargs: Any) -> exon.Node:
        node = exon.Node("127.0.0.1:0", driver_dir=driver.dir, **kwargs)
        nodes.append(node)
        return node

    yield make
    for node in reversed(nodes):
        node.close(timeout=2.0)


def python_process(code: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def exon_cli(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-m", "exon.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def read_line(proc: subprocess.Popen[str], timeout: float = 20.0) -> str:
    """One stdout line of ``proc``, bounded in time."""
    import selectors

    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sel.select(timeout=max(0.0, deadline - time.monotonic())):
            line = proc.stdout.readline()
            if line:
                return line.strip()
            break
    err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
    raise AssertionError(f"no line from the subprocess in {timeout}s; stderr: {err[-2000:]}")


def kill(proc: subprocess.Popen[str], sig: int | None = None) -> None:
    if proc.poll() is None:
        if sig is None:
            proc.kill()
        else:
            os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
