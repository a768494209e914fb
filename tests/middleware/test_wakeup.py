"""A socket's :class:`~exon.middleware.wakeup.Wakeup`: who waits on it, and how its node
wakes them; and the node takes of a socket only what ``HostedSocket`` declares."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path
from typing import Any

import exon.middleware
from exon.middleware.hosted import HostedSocket
from exon.middleware.wakeup import Wakeup


class _Waker:
    def __init__(self) -> None:
        self.woken: list[Any] = []

    def wake(self, sock: Any) -> None:
        self.woken.append(sock)


def test_threads_are_counted_while_they_wait_and_woken() -> None:
    lock = threading.RLock()
    wakeup = Wakeup(lock, owner="sock")
    assert not wakeup.has_waiters
    done = threading.Event()

    def sleeper() -> None:
        with lock:
            wakeup.wait(5.0)
        done.set()

    t = threading.Thread(target=sleeper, daemon=True)
    t.start()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        with lock:
            if wakeup.threads == 1:
                break
        time.sleep(0.001)
    with lock:
        assert wakeup.threads == 1
        assert wakeup.has_waiters
        wakeup.wake()
    assert done.wait(2.0)  # woken, well before its 5 s timeout
    t.join(2.0)
    assert wakeup.threads == 0
    assert not wakeup.has_waiters


def test_a_timed_out_wait_is_counted_out() -> None:
    lock = threading.RLock()
    wakeup = Wakeup(lock, owner=None)
    with lock:
        wakeup.wait(0.001)
    assert wakeup.threads == 0


def test_loops_are_counted_in_and_out_and_woken_with_the_owner() -> None:
    wakeup = Wakeup(threading.RLock(), owner="sock")
    a, b = _Waker(), _Waker()
    assert wakeup.count_loop(a, +2) is True
    assert wakeup.count_loop(b, +1) is True
    wakeup.wake()
    assert a.woken == ["sock"]
    assert b.woken == ["sock"]
    assert wakeup.count_loop(a, -2) is True  # b still waits
    wakeup.wake_loops()
    assert a.woken == ["sock"]
    assert b.woken == ["sock", "sock"]
    assert wakeup.count_loop(b, -1) is False
    assert not wakeup.has_waiters
    wakeup.wake()  # nobody waits: nobody woken
    assert b.woken == ["sock", "sock"]


#: names under which the middleware holds a hosted socket and its wakeup
SOCKET_SIDE = frozenset({"sock", "socket", "hosted", "wakeup"})


def _declared_private() -> set[str]:
    names = set(HostedSocket.__annotations__)
    names.update(n for n in vars(HostedSocket) if callable(getattr(HostedSocket, n)))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _private_socket_reads(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__"):
            continue
        base = node.value
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base.id in SOCKET_SIDE:
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_node_takes_of_a_socket_only_what_hosted_socket_declares() -> None:
    declared = _declared_private()
    assert "_on_message" in declared  # the scan sees the protocol's hooks
    root = Path(exon.middleware.__file__).parent
    files = sorted(p for p in root.rglob("*.py") if p.name != "wakeup.py")
    assert len(files) >= 10
    bad = [(f.name, line, expr) for f in files
           for line, expr in _private_socket_reads(f.read_text())
           if expr.rsplit(".", 1)[-1] not in declared or expr.count(".") > 1]
    assert bad == []


def test_the_scan_would_catch_one() -> None:
    source = "def f(sock):\n    sock._cond.notify_all()\n    sock.wakeup._cond\n"
    found = _private_socket_reads(source)
    assert [line for line, _ in found] == [2, 3]
    assert {e for _, e in found} == {"sock._cond", "sock.wakeup._cond"}
