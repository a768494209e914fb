"""The sockets' native doors (exon_fast.c SocketSend / SocketReceive): PUSH send and PULL
receive as one native call each, everything else handed to the Python methods unchanged."""

from __future__ import annotations

import pytest

import exon
from exon.native import _fast
from tests.sockets.helpers import linked_push_pull

pytestmark = pytest.mark.skipif(_fast is None or not hasattr(_fast, "SocketSend"),
                                reason="built without the fast door (exon.native._fast)")


def _pair(make_node, credits: int = 64):  # type: ignore[no-untyped-def]
    return linked_push_pull(make_node, credits)


def test_push_send_and_pull_receive_are_native_doors(make_node) -> None:
    a, b, push, pull = _pair(make_node)
    assert type(push.send).__name__ == "SocketSend"
    assert type(pull.receive).__name__ == "SocketReceive"
    sent_before, taken_before = a._lock.activity, b._lock.activity
    for i in range(20):
        push.send(b"m%d" % i, cookie=None, timeout=5)
    assert a._lock.activity - sent_before == 20  # all twenty sends completed in the door
    got = [pull.receive(timeout=5).payload for _ in range(20)]
    assert got == [b"m%d" % i for i in range(20)]
    assert b._lock.activity > taken_before  # and receives popped the native queue


def test_what_the_door_cannot_do_goes_to_the_method(make_node) -> None:
    _a, _b, push, pull = _pair(make_node)
    push.send(b"1")
    push.send(b"2", cookie="two")       # a cookie: the core's path
    push.send(bytearray(b"3"))          # not bytes: converted by the method
    push.send(memoryview(b"4"))
    push.send(b"5")
    got = [pull.receive(timeout=5).payload for _ in range(5)]
    assert got == [b"1", b"2", b"3", b"4", b"5"]  # one order across both paths
    item = push.receive(timeout=5)
    assert isinstance(item, exon.Cookie)
    assert item.value == "two"
    with pytest.raises(TypeError):
        push.send(b"x", colour="red")   # the method's own argument errors
    with pytest.raises(exon.ConfigurationError):
        push.send(b"x", timeout=-1)     # a negative timeout is the method's to refuse


def test_no_credit_blocks_and_times_out_through_the_door(make_node) -> None:
    _a, _b, push, pull = _pair(make_node, credits=3)
    for _ in range(3):
        push.send(b"x")
    with pytest.raises(exon.BackPressured):
        push.send_nowait(b"y")
    with pytest.raises(exon.Timeout):
        push.send(b"y", timeout=0.05)
    assert [pull.receive(timeout=5).payload for _ in range(3)] == [b"x"] * 3
    push.send(b"z", timeout=5)  # credit came back: the door sends again
    assert pull.receive(timeout=5).payload == b"z"


def test_receive_timeout_when_the_native_queue_is_empty(make_node) -> None:
    _a, _b, _push, pull = _pair(make_node)
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.05)
    with pytest.raises(exon.Timeout):
        pull.receive_nowait()


def test_closed_socket_doors_raise_closed(make_node) -> None:
    _a, _b, push, pull = _pair(make_node)
    send, receive = push.send, pull.receive  # references kept past close
    push.close(timeout=5)
    pull.close(timeout=5)
    with pytest.raises(exon.ClosedError):
        send(b"late")
    with pytest.raises(exon.ClosedError):
        receive(timeout=1)
    with pytest.raises(exon.ClosedError):
        push.send(b"late")
    with pytest.raises(exon.ClosedError):
        pull.receive(timeout=1)


def test_doors_kept_past_the_node_close_never_touch_the_freed_table(make_node) -> None:
    a, b, push, pull = _pair(make_node)
    push.send(b"first")
    push.send(b"second")
    assert pull.receive(timeout=5).payload == b"first"
    send, receive = push.send, pull.receive
    a.close()
    b.close()
    with pytest.raises(exon.ClosedError):
        send(b"after")
    with pytest.raises(exon.ClosedError):
        receive(timeout=1)


_CLOSE_UNDER_LOAD = r"""
import sys, threading, time
import exon

a = exon.Node("127.0.0.1:0", udp=False)
b = exon.Node("127.0.0.1:0", driver_dir=a.driver_dir, udp=False)
pull = b.socket("pull", tag=1, credits=64)
pushes = [a.socket("push") for _ in range(3)]
for push in pushes:
    push.link(f"{b.address}/1", timeout=5)
errors = []
stop = time.monotonic() + 0.4

def send(push):
    try:
        while time.monotonic() < stop + 5:
            push.send(b"x" * 32, timeout=1)
    except (exon.ClosedError, exon.Timeout, exon.BrokenLink, exon.SocketNotLinked):
        pass
    except BaseException as exc:
        errors.append(repr(exc))

def receive():
    try:
        while time.monotonic() < stop + 5:
            pull.receive(timeout=1)
    except (exon.ClosedError, exon.Timeout, exon.BrokenLink):
        pass
    except BaseException as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=send, args=(p,)) for p in pushes]
threads += [threading.Thread(target=receive) for _ in range(2)]
for t in threads:
    t.start()
time.sleep(0.4)
b.close(timeout=1)   # closes under the threads' feet: doors keep the table safe
a.close(timeout=1)
for t in threads:
    t.join(10)
print("alive", sum(t.is_alive() for t in threads), "errors", errors)
"""


def test_closing_nodes_under_door_traffic_neither_crashes_nor_hangs() -> None:
    """Three PUSH threads and two PULL threads hammer the doors while both nodes close: no
    crash (the table is freed only after the doors were closed), no hang, only exon errors."""
    from tests.sockets.helpers import python_process

    proc = python_process(_CLOSE_UNDER_LOAD)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err[-3000:]
    assert "alive 0 errors []" in out, out + err[-3000:]


def test_a_closed_socket_never_sends_on_its_old_slot(make_node) -> None:
    """A socket's link-table slot goes to the next socket opened; sends of the closed socket
    must not go out on the new socket's links."""
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=64)
    old = a.socket("push")
    old.link(f"{b.address}/1", timeout=5)
    slot = old._fast_slot
    old.close(timeout=5)
    new = a.socket("push")
    assert new._fast_slot == slot  # the slot was reused
    new.link(f"{b.address}/1", timeout=5)
    with pytest.raises(exon.ClosedError):
        old.send(b"from the closed socket")
    new.send(b"from the new socket")
    assert pull.receive(timeout=5).payload == b"from the new socket"
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.1)


def test_a_subclass_overriding_send_or_receive_keeps_its_own(make_node, monkeypatch) -> None:
    from exon.sockets.pull import PullSocket
    from exon.sockets.push import PushSocket
    from exon.sockets.socket import Socket

    # the subclasses register themselves as the "push" and "pull" types: restored afterwards
    monkeypatch.setitem(Socket._types, "push", PushSocket)
    monkeypatch.setitem(Socket._types, "pull", PullSocket)
    calls: list[str] = []

    class CountingPush(PushSocket):
        def send(self, data, **kwargs):  # type: ignore[no-untyped-def, override]
            calls.append("send")
            super().send(data, **kwargs)

    class CountingPull(PullSocket):
        def receive(self, timeout=None):  # type: ignore[no-untyped-def, override]
            calls.append("receive")
            return super().receive(timeout)

    a, b = make_node(), make_node()
    pull = CountingPull(tag=1, node=b)
    push = CountingPush(node=a)
    push.link(f"{b.address}/1", timeout=5)
    push.send(b"x")
    assert pull.receive(timeout=5).payload == b"x"
    assert calls == ["send", "receive"]
