"""exon_fast.c's NodeLock: threading.Lock's interface (so threading.Condition works over
it) and the counters its doors keep."""

from __future__ import annotations

import threading
import time

import pytest

from exon.native import node_lock

lock_type = type(node_lock())
pytestmark = pytest.mark.skipif(lock_type.__name__ != "NodeLock",
                                reason="built without the fast door (exon.native._fast)")


def test_acquire_release_and_locked() -> None:
    lock = node_lock()
    assert not lock.locked()
    assert lock.acquire() is True
    assert lock.locked()
    assert lock.acquire(False) is False  # not re-entrant, like threading.Lock
    assert lock.acquire(timeout=0.01) is False
    lock.release()
    assert not lock.locked()
    with pytest.raises(RuntimeError, match="release unlocked lock"):
        lock.release()


def test_context_manager() -> None:
    lock = node_lock()
    with lock:
        assert lock.locked()
    assert not lock.locked()
    with pytest.raises(KeyError), lock:
        raise KeyError("inside")
    assert not lock.locked()


def test_bad_arguments() -> None:
    lock = node_lock()
    with pytest.raises(ValueError):
        lock.acquire(False, 1.0)
    with pytest.raises(ValueError):
        lock.acquire(timeout=-5.0)
    assert not lock.locked()


def test_a_blocked_acquire_waits_for_the_holder_and_releases_the_gil() -> None:
    lock = node_lock()
    lock.acquire()
    took: list[float] = []
    counter = [0]

    def waiter() -> None:
        t0 = time.monotonic()
        with lock:
            took.append(time.monotonic() - t0)

    thread = threading.Thread(target=waiter)
    thread.start()
    end = time.monotonic() + 0.1
    while time.monotonic() < end:  # this thread keeps running Python: the waiter gave up the GIL
        counter[0] += 1
    assert not took
    lock.release()
    thread.join(5)
    assert not thread.is_alive()
    assert len(took) == 1  # it got the lock once the holder let go
    assert counter[0] > 1000


def test_condition_over_the_lock() -> None:
    lock = node_lock()
    cond = threading.Condition(lock)
    items: list[int] = []

    def producer() -> None:
        for i in range(50):
            with cond:
                items.append(i)
                cond.notify_all()

    thread = threading.Thread(target=producer)
    with cond:
        thread.start()
        assert cond.wait_for(lambda: len(items) == 50, timeout=5)
    thread.join(5)
    assert items == list(range(50))
    with cond:
        assert cond.wait(0.01) is False  # times out, lock held again afterwards
        assert lock.locked()


def test_mutual_exclusion_under_contention() -> None:
    lock = node_lock()
    state = {"n": 0}

    def work() -> None:
        for _ in range(2000):
            with lock:
                v = state["n"]
                time.sleep(0) if v % 500 == 0 else None
                state["n"] = v + 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert state["n"] == 8000


def test_activity_and_close_doors() -> None:
    lock = node_lock()
    assert lock.activity == 0
    assert lock.doors_open == 1
    lock.close_doors()
    assert lock.doors_open == 0
    with pytest.raises(AttributeError):
        lock.activity = 5  # read-only: only the doors count
