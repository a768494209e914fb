"""The sockets' native doors (exon_fast.c SocketSend / SocketReceive): PUSH send and PULL
receive as one native call each, everything else handed to the Python methods unchanged."""

from __future__ import annotations

import pytest

import exon
from exon.native import _fast

pytestmark = pytest.mark.skipif(_fast is None or not hasattr(_fast, "SocketSend"),
                                reason="built without the fast door (exon.native._fast)")


def _pair(make_node, credits: int = 64):  # type: ignore[no-untyped-def]
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1, credits=credits)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=5)
    pull.wait_for_links(1, timeout=5)
    return a, b, push, pull


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
