"""PUSH.send_many over real nodes sharing one media driver (IPC): order, credit, cookies,
broken links, oversize payloads, timeouts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import exon
from exon.sockets.batch_cookie import BatchCookie


def _payloads(n: int, prefix: bytes = b"m") -> list[bytes]:
    return [prefix + b"%d" % i for i in range(n)]


def _pair(make_node: Callable[..., exon.Node], credits: int,
          tags: tuple[int, ...] = (1,)) -> tuple[Any, list[Any]]:
    a, b = make_node(), make_node()
    pulls = [b.socket("pull", tag=t, credits=credits) for t in tags]
    push = a.socket("push")
    for t in tags:
        push.link(f"{b.address}/{t}", timeout=5)
    return push, pulls


def _receive_all(pull: Any, count: int, pause: float = 0.0) -> list[bytes]:
    got = []
    for _ in range(count):
        got.append(pull.receive(timeout=5).payload)
        if pause:
            time.sleep(pause)
    return got


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def _no_more_cookies(push: Any) -> None:
    """Nothing pending or outstanding: a PUSH's receive() says so at once."""
    with pytest.raises(exon.StateError):
        push.receive(timeout=0.5)


def test_sends_every_payload_in_order(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=256)
    data = _payloads(200)
    assert push.send_many(data, timeout=5) == 200
    assert _receive_all(pull, 200) == data
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.05)


def test_big_payloads_arrive_whole_and_in_order(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=64)
    data = [bytes([i]) * (64 * 1024 + i) for i in range(12)]  # copied without the GIL
    reader, got = _in_thread(lambda: _receive_all(pull, 12))
    assert push.send_many(data, cookie="big", timeout=10) == 12
    reader.join(10)
    assert got == [data]
    assert push.receive(timeout=5) == exon.Cookie("big")


def test_with_credit_the_batch_takes_no_python_step_per_message(make_node, monkeypatch) -> None:
    push, (pull,) = _pair(make_node, credits=256)
    single = []
    original = push._send_locked
    monkeypatch.setattr(push, "_send_locked", lambda *a: single.append(1) or original(*a))
    push.send_many(_payloads(100), timeout=5)
    assert single == []  # the native walk sent all of them
    assert len(_receive_all(pull, 100)) == 100


def test_credit_running_out_midway_waits_and_goes_on(make_node, monkeypatch) -> None:
    push, (pull,) = _pair(make_node, credits=4)
    single = []
    original = push._send_locked
    monkeypatch.setattr(push, "_send_locked", lambda *a: single.append(1) or original(*a))
    data = _payloads(60)
    reader, got = _in_thread(lambda: _receive_all(pull, 60, pause=0.002))
    assert push.send_many(data, timeout=10) == 60
    reader.join(10)
    assert got == [data]
    assert 0 < len(single) < 60  # waited where credit ran out, walked natively between


def test_round_robin_over_pulls_keeps_each_ones_order(make_node) -> None:
    push, pulls = _pair(make_node, credits=8, tags=(1, 2))
    data = _payloads(40)
    sent = threading.Event()

    def drain(pull: Any) -> list[bytes]:  # until the batch is out and nothing more comes
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                got.append(pull.receive(timeout=0.2).payload)
            except exon.Timeout:
                if sent.is_set():
                    break
        return got

    readers = [_in_thread(lambda p=p: drain(p)) for p in pulls]
    push.send_many(data, cookie="rr", timeout=10)
    sent.set()
    parts = []
    for thread, got in readers:
        thread.join(15)
        parts.append(got[0])
    assert sorted(parts[0] + parts[1]) == sorted(data)
    assert parts[0]
    assert parts[1]  # both PULLs took a share
    for part in parts:
        assert part == [m for m in data if m in part]  # each PULL's share in order
    assert push.receive(timeout=5) == exon.Cookie("rr")
    _no_more_cookies(push)


def test_the_batch_cookie_comes_once_after_the_last_message_is_taken(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=64)
    push.send(b"before", cookie="single", timeout=5)
    push.send_many(_payloads(10), cookie="batch", timeout=5)
    assert pull.receive(timeout=5).payload == b"before"
    assert push.receive(timeout=5) == exon.Cookie("single")
    _receive_all(pull, 9)
    with pytest.raises(exon.Timeout):  # one message of the batch not taken yet
        push.receive(timeout=0.3)
    assert pull.receive(timeout=5).payload == b"m9"
    assert push.receive(timeout=5) == exon.Cookie("batch")
    _no_more_cookies(push)


def test_payload_objects_are_sent_as_send_takes_them(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=64)
    data = [b"a", bytearray(b"b"), memoryview(b"c"), b"d"]
    assert push.send_many(iter(data), timeout=5) == 4  # any iterable
    assert push.send_many(tuple(data), timeout=5) == 4
    assert _receive_all(pull, 8) == [b"a", b"b", b"c", b"d"] * 2


def test_empty_batch_sends_nothing_and_has_no_cookie(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=8)
    assert push.send_many([], cookie="empty", timeout=1) == 0
    _no_more_cookies(push)
    with pytest.raises(exon.Timeout):
        pull.receive(timeout=0.05)
    push.close()
    with pytest.raises(exon.ClosedError):
        push.send_many([], timeout=1)


def test_oversize_payload_stops_the_batch_there(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=64)
    big = b"x" * (2 << 20)  # over the default 1 MiB maximum
    with pytest.raises(exon.MessageTooLarge, match="sent 2 of 4") as info:
        push.send_many([b"a", b"b", big, b"c"], cookie="big", timeout=5)
    assert info.value.sent == 2
    assert _receive_all(pull, 2) == [b"a", b"b"]
    with pytest.raises(exon.Timeout):  # nothing after the oversize payload
        pull.receive(timeout=0.1)
    assert push.receive(timeout=5) == exon.Cookie("big")  # covers what was sent
    _no_more_cookies(push)


def test_a_bad_payload_type_stops_the_batch_with_the_count(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=64)
    with pytest.raises(exon.ArgumentTypeError, match="sent 1 of 3") as info:
        push.send_many([b"a", "text", b"c"], timeout=5)
    assert info.value.sent == 1
    assert _receive_all(pull, 1) == [b"a"]


def test_timeout_when_credit_never_comes_back(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=3)
    with pytest.raises(exon.Timeout, match="sent 3 of 10") as info:
        push.send_many(_payloads(10), cookie="slow", timeout=0.3)
    assert isinstance(info.value, TimeoutError)
    assert info.value.sent == 3
    assert _receive_all(pull, 3) == _payloads(3)
    assert push.receive(timeout=5) == exon.Cookie("slow")


def test_broken_link_midway_loses_the_cookie_once(make_node) -> None:
    push, (pull,) = _pair(make_node, credits=4)
    push.send_many([b"first"], cookie="done", timeout=5)
    assert pull.receive(timeout=5).payload == b"first"
    assert push.receive(timeout=5) == exon.Cookie("done")
    closer = threading.Timer(0.2, lambda: pull.close(timeout=0))
    closer.start()
    with pytest.raises(exon.BrokenLink, match="sent 4 of 20") as info:
        push.send_many(_payloads(20), cookie="broken", timeout=5)
    closer.join()
    assert info.value.sent == 4
    assert push.receive(timeout=5) == exon.CookieLost("broken")
    _no_more_cookies(push)  # never duplicated, and the first batch's never again


def test_batch_cookie_settles_once() -> None:
    batch = BatchCookie("c")
    first, second = batch.part(), batch.part()
    assert first.batch is batch
    assert second.batch is batch
    assert batch.resolve(lost=False) is None  # one part back, one open, not sealed
    assert batch.seal() is None
    assert batch.resolve(lost=False) is False  # the last part: returned
    lost = BatchCookie("l")
    lost.part()
    lost.part()
    assert lost.resolve(lost=True) is True  # told at once
    assert lost.resolve(lost=False) is None  # and never again
    assert lost.seal() is None
    assert BatchCookie("none").seal() is None  # nothing sent: no cookie


def test_the_native_walk_rejects_bad_arguments_and_stops_where_it_cannot_send(
        make_node) -> None:
    push, (pull,) = _pair(make_node, credits=3)
    fast = push._host.fast
    walk = fast.send_many
    slot = push._fast_slot
    with push._lock:
        with pytest.raises(TypeError, match="list or a tuple"):
            walk(slot, -1, iter([b"a"]), 0)
        with pytest.raises(ValueError, match="start >= 0"):
            walk(slot, -1, [b"a"], -1)
        with pytest.raises(TypeError, match="send_many"):
            walk(slot, -1, [b"a"])
        assert walk(slot, -1, [b"a"], 5) == 1  # nothing from a start past the end
        assert walk(slot, -1, [b"a", "not bytes", b"c"], 0) == 1  # stops at the str
        assert walk(slot, -1, (b"b", b"c", b"d"), 0) == 2  # stops where credit ran out
    assert _receive_all(pull, 3) == [b"a", b"b", b"c"]


def test_once_a_batch_cookie_is_lost_its_other_parts_keep_no_receive_waiting(
        make_node) -> None:
    """A batch over two links loses its cookie when one link breaks; the other link's
    part is still pending then, but its outcome is told already: a receive() after the
    CookieLost says at once that no cookie is to come (it waited out its timeout)."""
    a = make_node()
    keep, drop = make_node(), make_node()
    kept = keep.socket("pull", tag=1, credits=8)
    gone = drop.socket("pull", tag=1, credits=8)
    push = a.socket("push")
    push.link(f"{keep.address}/1", timeout=5)
    push.link(f"{drop.address}/1", timeout=5)
    assert push.send_many(_payloads(4), cookie="batch", timeout=5) == 4
    deadline = time.monotonic() + 5
    while gone._queued() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    gone.close(timeout=0)  # its part breaks unconfirmed
    assert push.receive(timeout=5) == exon.CookieLost("batch")
    started = time.monotonic()
    _no_more_cookies(push)  # the other part is pending, its batch told
    assert time.monotonic() - started < 0.4
    assert sorted(_receive_all(kept, 2)) in (
        [b"m0", b"m2"], [b"m1", b"m3"])  # the surviving part confirms, silently
    _no_more_cookies(push)
