"""Test kit for the sockets: a small shared media driver and nodes on it (IPC)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import exon
from exon.transport.aeron import MediaDriver
from tests.transport.aeron.driver_fixtures import unique_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRIVER = {
    "ipc_term_buffer_length": 1024 * 1024,
    "to_driver_buffer_length": 256 * 1024,
    "to_clients_buffer_length": 256 * 1024,
    "counters_values_buffer_length": 256 * 1024,
    "publication_linger_timeout_ns": 0,
    # 2 s: a node whose client the driver times out loses every link (BrokenLink); 0.5 s
    # timed clients out on a loaded machine (keepalives go every quarter of it)
    "client_liveness_timeout_ns": 2_000_000_000,
    "threading_mode": "SHARED",
}


@contextlib.contextmanager
def launched_driver(tag: str, settings: dict[str, Any]) -> Iterator[MediaDriver]:
    """A media driver with ``settings`` in a fresh directory, removed afterwards."""
    path = unique_dir(tag)
    try:
        with MediaDriver.launch(dir=path, **settings) as d:
            yield d
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def driver() -> Iterator[MediaDriver]:
    with launched_driver("s", DRIVER) as d:
        yield d


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


def udp_nodes_with(driver_options: dict[str, Any]) -> Iterator[Callable[[], exon.Node]]:
    """Make nodes that each embed a driver (``driver_options``) and talk UDP; closed after
    (a fixture body: ``yield from udp_nodes_with(OPTIONS)``)."""
    nodes: list[exon.Node] = []

    def make() -> exon.Node:
        node = exon.Node("127.0.0.1:0", driver_options=driver_options)
        assert node.udp_enabled
        nodes.append(node)
        return node

    yield make
    for node in reversed(nodes):
        node.close(timeout=2.0)


def assert_refused_as_incompatible(make_node: Callable[..., exon.Node], left: str,
                                   right: str) -> None:
    """A ``left`` socket linking with a ``right`` one gets a permanent INCOMPATIBLE."""
    a, b = make_node(), make_node()
    b.socket(right, tag=1)
    sock = a.socket(left)
    with pytest.raises(exon.LinkRefused) as info:
        sock.link(f"{b.address}/1", timeout=5)
    assert info.value.reason == "INCOMPATIBLE"
    assert info.value.permanent


def python_process(code: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def exon_cli(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-m", "exon.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def run_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "exon.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout, check=False)


def read_line(proc: subprocess.Popen[str], timeout: float = 20.0) -> str:
    """One stdout line of ``proc``, bounded in time (a reader thread per process)."""
    import queue
    import threading

    lines: queue.Queue[str | None] | None = getattr(proc, "_lines", None)
    if lines is None:
        lines = queue.Queue()
        proc._lines = lines  # type: ignore[attr-defined]

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        line = None
    if line is None:
        err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
        raise AssertionError(f"no line from the subprocess in {timeout}s; stderr: {err[-2000:]}")
    return line.strip()


def rest_of_output(proc: subprocess.Popen[str], timeout: float = 20.0) -> str:
    """Every remaining stdout line until ``proc`` exits (after :func:`read_line`)."""
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            out.append(read_line(proc, max(0.01, deadline - time.monotonic())))
        except AssertionError:
            break
    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    return "\n".join(out)


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


def linked_push_pull(make_node: Callable[..., exon.Node], credits: int = 8
                     ) -> tuple[exon.Node, exon.Node, Any, Any]:
    """Two nodes of the test driver, a PULL (tag 1, ``credits``) on the second and a PUSH on
    the first linked to it: (push node, pull node, push, pull)."""
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=credits)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=5)
    pull.wait_for_links(1, timeout=5)
    return a, b, push, pull


def send_nowait_while_received(sender: Any, receiver: Any, count: int,
                               seconds: float = 10.0) -> tuple[int, list[bytes]]:
    """``sender.send_nowait`` messages ``m0``.. ``m<count-1>``, sleeping 0.5 ms whenever it
    is back-pressured, for at most ``seconds``, while a thread takes them from
    ``receiver``: (how many were sent, the payloads received)."""
    import threading

    got: list[bytes] = []

    def consume() -> None:
        while len(got) < count:
            got.append(receiver.receive(timeout=seconds).payload)

    consumer = threading.Thread(target=consume)
    consumer.start()
    sent = 0
    deadline = time.monotonic() + seconds
    while sent < count and time.monotonic() < deadline:
        try:
            sender.send_nowait(b"m%d" % sent)
            sent += 1
        except exon.BackPressured:
            time.sleep(0.0005)
    consumer.join(seconds + 5)
    return sent, got


def offers_find_peers_gone(node: exon.Node, monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on ``node``'s transport and link table answer every frame it offers
    NOT_CONNECTED, as when the peer's node was killed: the frame is dropped and the links
    with that node break inside the call that sent it (the link table's refusal sends it
    the core's way, whose offer breaks them)."""
    from exon.transport.aeron import NOT_CONNECTED

    transport = node._transport
    assert transport is not None
    monkeypatch.setattr(transport, "offer", lambda pub, data: NOT_CONNECTED)
    monkeypatch.setattr(node._fast, "send", lambda *args: NOT_CONNECTED)



def send_as_the_peer_goes(node: exon.Node, sock: exon.Socket, cookie: object,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``sock`` (of ``node``) sends with ``cookie`` while its peer's node is gone (see
    :func:`offers_find_peers_gone`): the link breaks inside the send, and the cookie comes
    back lost."""
    with monkeypatch.context() as patch:
        offers_find_peers_gone(node, patch)
        sock.send(b"hello?", cookie=cookie, timeout=5)
    assert sock.receive(timeout=5) == exon.CookieLost(cookie)
