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


def test_a_request_reply_wait_does_not_invoke_the_driver_again_after_its_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An INVOKER wait runs the driver's duty cycles last thing before it returns: the poll
    right after it does not run them again (two more syscalls a round trip and side)."""
    from exon.middleware.node_transport import NodeTransport

    with exon.Node(driver="embedded") as server, exon.Node(driver="embedded") as client:
        assert server._driver is not None
        assert server._driver.invoker
        rep = server.socket("rep", tag=1)
        req = client.socket("req")
        req.link(f"{server.address}/1", timeout=5)
        req.send(b"warm")
        rep.send(rep.receive(timeout=5).payload)
        assert req.receive(timeout=5).payload == b"warm"
        calls = {"invoke": 0, "wait": 0}
        invoke, wait = NodeTransport.invoke, NodeTransport.wait

        def counted_invoke(self: NodeTransport) -> int:
            calls["invoke"] += self is server._transport
            return invoke(self)

        def counted_wait(self: NodeTransport, timeout: float, spin: float = 0.0) -> bool:
            calls["wait"] += self is server._transport
            return wait(self, timeout, spin)

        monkeypatch.setattr(NodeTransport, "invoke", counted_invoke)
        monkeypatch.setattr(NodeTransport, "wait", counted_wait)
        rounds = 30
        for i in range(rounds):
            req.send(b"q%d" % i)
            rep.send(rep.receive(timeout=5).payload + b"!")
            assert req.receive(timeout=5).payload == b"q%d!" % i
        assert calls["wait"] >= rounds // 2  # the REP's receives waited (its own thread)
        assert calls["invoke"] < calls["wait"] // 2
