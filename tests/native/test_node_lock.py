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


def test_activity_and_close_doors() -> None:
    lock = node_lock()
    assert lock.activity == 0
    assert lock.doors_open == 1
    lock.close_doors()
    assert lock.doors_open == 0
    with pytest.raises(AttributeError):
        lock.activity = 5  # read-only: only the doors count


@pytest.mark.parametrize(("rounds", "yield_every"), [(2000, 500), (300, 1)])
def test_mutual_exclusion_under_contention(rounds: int, yield_every: int) -> None:
    """Four threads increment under the lock, giving up the GIL inside it now and then
    (2000, 500) or every time (300, 1): then the others wait on the futex (state 2).
    Every increment happens once, and no waiter is left asleep."""
    lock = node_lock()
    state = {"n": 0}

    def work() -> None:
        for _ in range(rounds):
            with lock:
                v = state["n"]
                if v % yield_every == 0:
                    time.sleep(0)
                state["n"] = v + 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert state["n"] == 4 * rounds
    assert not lock.locked()
    assert lock.acquire(False) is True  # free, not stuck in the contended state
    lock.release()


def test_a_timed_acquire_gives_up_while_held_then_takes_it_once_free() -> None:
    lock = node_lock()
    lock.acquire()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(lock.acquire(timeout=0.05)))
    thread.start()
    thread.join(5)
    assert result == [False]
    released = threading.Event()

    def late_release() -> None:
        time.sleep(0.05)
        lock.release()  # by another thread than the one that took it: threading.Lock's rule
        released.set()

    other = threading.Thread(target=late_release)
    other.start()
    assert lock.acquire(timeout=5) is True
    assert released.wait(5)
    other.join(5)
    lock.release()


def test_a_signal_handler_runs_during_a_blocked_acquire() -> None:
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    lock = node_lock()
    holder_ready = threading.Event()
    stop = threading.Event()

    def holder() -> None:
        with lock:
            holder_ready.set()
            stop.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert holder_ready.wait(5)
    seen: list[int] = []

    class Interrupted(Exception):
        pass

    def handler(signum: int, frame: object) -> None:
        seen.append(signum)
        if len(seen) == 2:
            raise Interrupted

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
        with pytest.raises(Interrupted):
            lock.acquire(timeout=10)  # the first handler returns: the wait goes on
        assert seen == [signal.SIGALRM, signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        stop.set()
        thread.join(5)
    assert not lock.locked()
