"""Who leads a node's polling: a thread receiving on a socket without links does not (it is
served by whoever polls), so an idle socket's thread never stands between a busy socket
and the transport."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import exon


def _receive_in_thread(sock: Any, timeout: float) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(sock.receive(timeout=timeout))
        except exon.ExonError as exc:
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def _roles_seen(node: Any, seconds: float) -> set[Any]:
    seen = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.add(node._poll.role)
        time.sleep(0.001)
    return seen


def test_a_receive_without_links_does_not_lead_and_is_served(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    t, out = _receive_in_thread(pull, 10.0)
    try:
        time.sleep(0.05)  # the thread is waiting
        assert t.ident not in _roles_seen(b, 0.3)
        assert b._poll.role_waiters == []  # nor does it queue for the role
        push = a.socket("push")
        push.link(f"{b.address}/1", timeout=5)
        push.send(b"hello", timeout=5)  # served by the dispatcher
        t.join(5)
        assert not t.is_alive()
        assert [m.payload for m in out] == [b"hello"]
        # linked now: the next wait leads the polling itself
        t, out = _receive_in_thread(pull, 10.0)
        assert t.ident in _roles_seen(b, 0.3)
        push.send(b"again", timeout=5)
        t.join(5)
        assert [m.payload for m in out] == [b"again"]
    finally:
        t.join(10)


def test_a_receive_without_links_still_times_out(make_node) -> None:
    b = make_node()
    pull = b.socket("pull", tag=1)
    start = time.monotonic()
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.2)
    assert time.monotonic() - start < 2.0
