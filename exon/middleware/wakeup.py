"""Who waits on one socket, and how its node wakes them: :class:`Wakeup`.

Each socket owns one (``sock.wakeup``). Its blocking calls sleep in it through
``SocketHost.wait_until``, its asyncio tasks register their event loops' wakers in it
(:mod:`exon.sockets.aio`), and the node, after handing the socket something, calls
:meth:`Wakeup.wake`, which costs one attribute test when nobody waits. Everything here is
used with the node's lock held.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

__all__ = ["LoopWake", "Wakeup"]


class LoopWake(Protocol):
    """An event loop's waker (:class:`exon.sockets.aio.LoopWaker`), as a Wakeup calls it."""

    def wake(self, sock: Any) -> None: ...  # any thread: retry sock's async waiters soon


class Wakeup:
    """The waiters of one socket: threads asleep in :meth:`wait`, and the event loops
    with tasks waiting on it (:attr:`loops`)."""

    __slots__ = ("_cond", "_owner", "loops", "threads")

    def __init__(self, lock: Any, owner: Any) -> None:
        self._cond = threading.Condition(lock)
        self._owner = owner  # the socket: what the loops' wakers retry
        #: threads asleep in wait() (counted here: the node wakes only those who wait)
        self.threads = 0
        #: event loops' wakers -> how many of their tasks wait on the socket
        self.loops: dict[LoopWake, int] = {}

    @property
    def has_waiters(self) -> bool:
        return bool(self.threads or self.loops)

    def wait(self, timeout: float) -> None:
        """Sleep (the lock held, released meanwhile) until notified or ``timeout`` s."""
        self.threads += 1
        try:
            self._cond.wait(timeout)
        finally:
            self.threads -= 1

    def notify_all(self) -> None:
        """Wake every thread asleep in :meth:`wait` (they re-check what they wait for)."""
        self._cond.notify_all()

    def wake_loops(self) -> None:
        """Have the event loops retry the socket's async waiters."""
        owner = self._owner
        for waker in self.loops:
            waker.wake(owner)

    def wake(self) -> None:
        """Wake whoever waits: threads and event loops."""
        if self.threads:
            self._cond.notify_all()
        if self.loops:
            self.wake_loops()

    def count_loop(self, waker: LoopWake, delta: int) -> bool:
        """``delta`` tasks of ``waker``'s loop start (+) or stop (-) waiting; whether any
        task of any loop still waits."""
        loops = self.loops
        n = loops.get(waker, 0) + delta
        if n > 0:
            loops[waker] = n
        else:
            loops.pop(waker, None)
        return bool(loops)
