"""Fixtures and helpers for the driver/client tests: unique dirs, small drivers, subprocesses."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron.settings import fresh_driver_dir

SMALL = {
    "ipc_term_buffer_length": 64 * 1024,
    "to_driver_buffer_length": 64 * 1024,
    "to_clients_buffer_length": 64 * 1024,
    "counters_values_buffer_length": 64 * 1024,
    "error_buffer_length": 64 * 1024,
    "publication_linger_timeout_ns": 0,
}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def unique_dir(tag: str = "t") -> str:
    return fresh_driver_dir(f"exon-test-{tag}")


@pytest.fixture
def driver_dir() -> Iterator[str]:
    path = unique_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def driver(driver_dir: str) -> Iterator[MediaDriver]:
    with MediaDriver.launch(dir=driver_dir, **SMALL) as d:
        yield d


@pytest.fixture
def aeron(driver: MediaDriver) -> Iterator[Aeron]:
    with Aeron.connect(driver.dir, timeout=5.0) as a:
        yield a


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    """An ExitStack closed after the test (drivers, clients)."""
    with ExitStack() as s:
        yield s


def launch_udp(stack: ExitStack, tag: str, **settings: Any) -> tuple[MediaDriver, Aeron]:
    """A small driver (64 KiB UDP terms unless ``settings`` say otherwise) and a client of
    it, both closed with ``stack``."""
    opts = {**SMALL, "term_buffer_length": 64 * 1024, "dir_delete_on_shutdown": True,
            **settings}
    driver = stack.enter_context(MediaDriver.launch(dir=unique_dir(tag), **opts))
    client = stack.enter_context(Aeron.connect(driver.dir, timeout=5.0))
    return driver, client


def allocated_bytes(path: str) -> int:
    """The disk (or /dev/shm) bytes a file holds: less than its length when sparse."""
    return os.stat(path).st_blocks * 512


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def collect(sub: Any, count: int, timeout: float = 5.0) -> list[bytes]:
    """Poll ``sub`` until ``count`` messages arrived or ``timeout`` passed."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        if sub.poll(lambda data, header: got.append(bytes(data)), 256) == 0:
            sub.wait(min(0.1, max(0.0, deadline - time.monotonic())))
    return got


def offer_all(pub: Any, messages: list[bytes], timeout: float = 5.0,
              drain: Callable[[], Any] | None = None) -> None:
    deadline = time.monotonic() + timeout
    for m in messages:
        while pub.offer(m) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"offer stuck at {m!r}")
            if drain is not None:
                drain()
            else:
                time.sleep(0.0005)


def python_process(code: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, env=env,
    )


def read_line(proc: subprocess.Popen[str], timeout: float = 10.0) -> str:
    """One stdout line of ``proc`` within ``timeout`` (kills it on timeout)."""
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            kill(proc)
            raise AssertionError(f"no output from pid {proc.pid} within {timeout}s")
        return proc.stdout.readline().strip()
    finally:
        sel.close()


def kill(proc: subprocess.Popen[str], sig: int = signal.SIGKILL) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


DRIVER_CODE = """
import sys
from exon.transport.aeron.driver_main import run_driver
run_driver(sys.argv[1], {
    "ipc_term_buffer_length": 65536, "to_driver_buffer_length": 65536,
    "to_clients_buffer_length": 65536, "counters_values_buffer_length": 65536,
    "error_buffer_length": 65536, "publication_linger_timeout_ns": 0,
    "client_liveness_timeout_ns": int(sys.argv[2]),
}, driver_timeout_ms=int(sys.argv[3]))
"""


def external_driver(dir: str, *, liveness_ns: int = 10 * 10**9,
                    driver_timeout_ms: int = 10_000) -> subprocess.Popen[str]:
    """A driver in its own process; returns once it printed its dir."""
    proc = python_process(DRIVER_CODE, dir, str(liveness_ns), str(driver_timeout_ms))
    line = read_line(proc, 20.0)
    assert line == dir, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc
