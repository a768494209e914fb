"""The asyncio face of every socket: ``asend``, ``areceive``, ``alink`` and ``async for``.

An async call first tries its non-blocking form under the node's lock. When that would
block, the task parks on a future in one of the socket's lines of async waiters, and the
event loop never blocks. A line holds the waiters of one kind that wait for the same thing:
receives; sends (one line per ROUTER destination); the links with one peer. Wake-ups come
from the node itself: when the node's polling thread hands something to a socket that has
async waiters (a message, a cookie, credit, a link event, a close), it writes an eventfd
that the loop watches (``loop.add_reader``; one per loop). The loop then retries each of
that socket's lines in order, stopping in each at the first waiter that would still block,
so a wake-up costs the waiters it completes plus one per line, however many wait. A line
never waits behind another: a send waiting for credit is not held up by the receives
waiting for its replies, nor they by it (issue #33: one FIFO for all made a DEALER whose
sends outran its credit wait behind its own receives until they timed out).
While any task waits, the node's dispatcher thread keeps polling the transport (a thread
that blocks in a sync call would do it otherwise), so the sync and async faces can share
a socket.

A reply comes within microseconds, and that hand-off (the dispatcher's futex wake, the GIL
passing to it and back, the eventfd, a loop turn) costs several times the round trip
itself. So ``areceive`` on a socket that spins in its blocking receive (REQ, REP: their
``_wait_spin``, :data:`~exon.middleware.node_polling.CLIENT_SPIN`) first *spins on the
loop*: up to that many seconds it yields to the loop (``await asyncio.sleep(0)``: every
other ready task and callback runs in between) and retries, polling the transport itself
when nobody else does, with the dispatcher standing aside. The loop is held for one
poll at a time, and once more when the spin starts while the dispatcher holds the poll
role: up to the spin's budget for the hand-over (``SocketHost.loop_polling``); a spin
costs CPU, not latency of the other tasks. Only one task of a
node spins at a time, and only while no task waits in the socket's line; the others, and
the spinner once its budget is spent, park as above. A spin that runs out makes the
socket's next receives park without one (1, 2, 4, ... up to 64; a spin that gets its
answer halves the count for the next that runs out; the rule of the native waits,
``exon_spin_policy.h``, on a policy of the socket's own): on a machine
too loaded for the peer to answer within the spin, spinning only takes CPU from it, and
the park that follows a spin that ran out costs more than one without (the dispatcher
must be woken to poll, where it would still be polling).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, ClassVar

from exon import errors
from exon.middleware.spin_policy import spin_budget as _spin_budget
from exon.middleware.spin_policy import spin_outcome as _spin_outcome
from exon.sockets.timeouts import check_timeout as _check_timeout

if TYPE_CHECKING:
    from exon.sockets.messages import Cookie, CookieLost, Message, Peer
    from exon.sockets.socket import Socket

__all__ = ["AsyncSocketMixin", "LoopWaker"]

#: an attempt returns its result, or raises WOULD_BLOCK (or an error for the caller)
WOULD_BLOCK = BlockingIOError
_NOT_YET: Any = object()  #: a spin that ended without a result
_NOT_SPUN: Any = object()  #: a spin refused: another task of the node spins


def _running_loop(what: str) -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise errors.StateError(
            f"{what} needs a running asyncio event loop in this thread (await it inside a "
            f"coroutine run by asyncio; from plain threads use the blocking calls)") from None


#: the line of the waiting receives (a send's line is ("send", its options), a link's
#: ("link", the peer))
RECEIVE_LINE = "receive"


def _send_line(options: dict[str, Any]) -> Hashable:
    """The line of a send: one per destination (a ROUTER's ``peer=``), so that a send
    waiting for one peer's credit holds up no send to another."""
    key: Hashable = ("send", tuple(sorted(options.items())))
    try:
        hash(key)
    except TypeError:  # an unhashable option value: the socket's one send line
        return ("send", ())
    return key


class _Waiter:
    __slots__ = ("attempt", "future", "line", "waker")

    def __init__(self, attempt: Callable[[], Any], future: asyncio.Future[Any],
                 waker: LoopWaker, line: Hashable) -> None:
        self.attempt = attempt
        self.future = future
        self.waker = waker
        self.line = line


class LoopWaker:
    """One per event loop: an eventfd (a pipe where there is none) the loop reads. Node
    threads call :meth:`wake` (the node's lock held); the loop retries the woken sockets'
    waiters."""

    _by_loop: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWaker]] = \
        weakref.WeakKeyDictionary()
    _guard: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> LoopWaker:
        with cls._guard:
            waker = cls._by_loop.get(loop)
            if waker is None or waker._closed:
                waker = cls._by_loop[loop] = cls(loop)
            return waker

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        if hasattr(os, "eventfd"):
            self._rfd = self._wfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        else:  # pragma: no cover - non-Linux
            self._rfd, self._wfd = os.pipe()
            os.set_blocking(self._rfd, False)
            os.set_blocking(self._wfd, False)
        self._woken: deque[Socket] = deque()
        self._armed = False  # written and not yet read: further wakes need no syscall
        self._closed = False
        loop.add_reader(self._rfd, self._on_readable)
        weakref.finalize(self, LoopWaker._close_fds, self._rfd, self._wfd)

    @staticmethod
    def _close_fds(rfd: int, wfd: int) -> None:
        for fd in {rfd, wfd}:
            with contextlib.suppress(OSError):
                os.close(fd)

    def wake(self, sock: Socket) -> None:
        """Any thread: retry ``sock``'s waiters on the loop soon."""
        self._woken.append(sock)
        if not self._armed:
            self._armed = True
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(self._wfd, b"\x01\0\0\0\0\0\0\0")

    def _on_readable(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.read(self._rfd, 8 if self._rfd == self._wfd else 4096)
        self._armed = False  # before draining: a wake from now on writes again
        # Retry what was woken before this drain, each socket once. A wake that comes
        # during the drain (a retry polled the transport; the node's thread handed over
        # more) may concern a socket already retried here: it stays queued, and its write
        # (the first wake after the flag fell) brings the loop back for a later drain.
        seen: set[int] = set()
        woken = self._woken
        for _ in range(len(woken)):
            sock = woken.popleft()
            if id(sock) not in seen:
                seen.add(id(sock))
                sock._retry_async_waiters()


class AsyncSocketMixin:
    """``asend`` / ``areceive`` / ``alink`` and ``async for`` for :class:`Socket`."""

    _aio_waiters: dict[Hashable, deque[_Waiter]]  # the lines, by what they wait for
    _aio_spin: Any  # exon_spin_policy_t *: when areceive spins (exon_spin_policy.h)

    # ---- on the loop ----------------------------------------------------------------------

    def _retry_async_waiters(self: Socket) -> None:  # type: ignore[misc]
        """Complete the waiters of each line, in order, until one would still block. The
        lines are only changed on the loops' threads; the node reads the per-loop counts,
        under its lock."""
        lines = self._aio_waiters
        for line in list(lines):
            waiters = lines.get(line)
            if waiters is not None:
                self._retry_line(waiters)
                if not waiters and lines.get(line) is waiters:
                    del lines[line]

    def _retry_line(self: Socket, waiters: deque[_Waiter]) -> None:  # type: ignore[misc]
        while waiters:
            w = waiters[0]
            if w.future.done():  # cancelled or timed out meanwhile
                waiters.popleft()
                self._async_waiting(w.waker, -1)
                continue
            if w.waker.loop is not asyncio.get_running_loop():
                w.waker.wake(self)  # another loop's waiter: its own loop retries it
                return
            try:
                result = w.attempt()
            except WOULD_BLOCK:
                return
            except BaseException as exc:
                waiters.popleft()
                self._async_waiting(w.waker, -1)
                w.future.set_exception(exc)
                continue
            waiters.popleft()
            self._async_waiting(w.waker, -1)
            w.future.set_result(result)

    def _async_waiting(self: Socket, waker: LoopWaker, delta: int) -> None:  # type: ignore[misc]
        """Count a waiter in or out: the node's dispatcher polls while any waits, and the
        node wakes each loop with waiters on this socket."""
        with self._lock:
            self._host.async_waiting(self, delta, self.wakeup.count_loop(waker, delta))

    async def _spin(self: Socket, loop: asyncio.AbstractEventLoop,  # type: ignore[misc]
                    attempt: Callable[[], Any], budget: float) -> Any:
        """Retry ``attempt`` between yields to the loop for up to ``budget`` seconds, this
        task polling the transport (the dispatcher aside); its result, or _NOT_YET."""
        host = self._host
        with self._lock:
            if not host.loop_polling(+1, budget):
                return _NOT_SPUN  # another task of the node spins: it polls for this one too
        try:
            end = loop.time() + budget
            while True:
                await asyncio.sleep(0)  # the loop runs everything else that is ready
                try:
                    return attempt()
                except WOULD_BLOCK:
                    pass
                if loop.time() >= end:
                    return _NOT_YET
        finally:
            with self._lock:
                host.loop_polling(-1)

    async def _park(self: Socket, what: str, attempt: Callable[[], Any],  # type: ignore[misc]
                    timeout: float | None, on_timeout: Callable[[], None] | None = None,
                    spin: float = 0.0, line: Hashable = RECEIVE_LINE) -> Any:
        """Try ``attempt`` now; else (``spin`` > 0) retry it between yields for ``spin``
        seconds; else wait in ``line`` for it, up to ``timeout`` seconds."""
        loop = _running_loop(what)
        try:
            return attempt()
        except WOULD_BLOCK:
            pass
        if timeout == 0:
            if on_timeout is not None:
                on_timeout()
            raise errors.Timeout(f"{what}: would block")
        lines = self._aio_waiters
        if spin > 0 and line not in lines:
            policy = self._aio_spin
            if _spin_budget(policy, 1):
                started = loop.time()
                budget = spin if timeout is None else min(spin, timeout)
                got = await self._spin(loop, attempt, budget)
                if got is _NOT_YET:
                    if budget == spin:  # it ran out (not the caller's timeout)
                        _spin_outcome(policy, False)
                elif got is not _NOT_SPUN:
                    _spin_outcome(policy, True)
                    return got
                if timeout is not None:
                    timeout = max(0.0, timeout - (loop.time() - started))
        future: asyncio.Future[Any] = loop.create_future()
        waiter = _Waiter(attempt, future, LoopWaker.of(loop), line)
        waiters = lines.get(line)
        if waiters is None:
            waiters = lines[line] = deque()
        waiters.append(waiter)
        self._async_waiting(waiter.waker, +1)
        if waiters[0] is waiter:
            # anything that arrived between the first attempt and joining the line
            self._retry_line(waiters)
        try:
            if timeout is None:
                return await future
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            if future.done() and not future.cancelled() and future.exception() is None:
                return future.result()  # completed in the same instant
            if on_timeout is not None:
                on_timeout()
            raise errors.Timeout(f"{what}: nothing in {timeout}s") from None
        finally:
            if not future.done():
                future.cancel()
            waiters = lines.get(line)
            if waiters is not None:
                with contextlib.suppress(ValueError):
                    waiters.remove(waiter)  # timed out or cancelled: out of line
                    self._async_waiting(waiter.waker, -1)
                if waiters and not waiters[0].future.done():
                    self._retry_line(waiters)  # the next in line may go now
                if not waiters and lines.get(line) is waiters:
                    del lines[line]

    # ---- the API ------------------------------------------------------------------------------

    def asend(self: Socket, data: bytes, *, cookie: Any = None,  # type: ignore[misc]
              timeout: float | None = None, **options: Any) -> Any:
        """Send like :meth:`send`, as an awaitable: waits (without blocking the loop) while
        no linked peer has credit; raises :class:`exon.Timeout` after ``timeout`` seconds.
        ``options`` go to the socket's ``send_nowait`` (a ROUTER's ``peer=``)."""
        _running_loop("asend")
        timeout = _check_timeout(timeout)
        epoch = self._broken_epoch

        def attempt() -> None:
            try:
                self.send_nowait(data, cookie=cookie, **options)
            except errors.BackPressured:
                with self._lock:
                    broke = self._every_link_broke(epoch)
                if broke is not None:
                    raise broke from None
                raise WOULD_BLOCK from None

        return self._park("asend", attempt, timeout, line=_send_line(options))

    def areceive(self: Socket,  # type: ignore[misc]
                 timeout: float | None = None) -> Any:
        """The next cookie or message, like :meth:`receive`, as an awaitable."""
        _running_loop("areceive")
        timeout = _check_timeout(timeout)
        with self._lock:
            self._check_open()
            self._check_receive_locked()
            epoch = self._broken_epoch

        def attempt() -> Message | Cookie | CookieLost:
            with self._lock:
                try:
                    self._check_open()
                    item = self._take_locked()
                    if item is not None:
                        return item
                    if self.node.poll_once_if_idle():  # as receive_nowait does
                        item = self._take_locked()
                        if item is not None:
                            return item
                    failure = self._receive_blocked_error(epoch)
                    if failure is not None:
                        self._on_receive_failure()
                        raise failure
                    raise WOULD_BLOCK
                finally:
                    if self._inbox.nq is not None:
                        self._sync_direct()

        def on_timeout() -> None:
            with self._lock:
                self._on_receive_timeout()

        return self._park("areceive", attempt, timeout, on_timeout, self._wait_spin)

    def alink(self: Socket, peer: str | Peer,  # type: ignore[misc]
              timeout: float | None = 5.0) -> Any:
        """Link with ``peer`` like :meth:`link`, as an awaitable."""
        loop = _running_loop("alink")
        timeout = _check_timeout(timeout)
        pid = self._peer_id(peer)
        linking = self._linking
        established = linking.begin(pid)

        def attempt() -> None:
            with self._lock:
                if not linking.settled(pid):
                    raise WOULD_BLOCK
                linking.conclude(pid, True, timeout)  # established, or raises

        def applied() -> None:
            with self._lock:
                self._check_open()
                if not self._link_applied_locked(pid):
                    raise WOULD_BLOCK

        async def run() -> None:
            started = loop.time()
            if not established:
                try:
                    await self._park("alink", attempt, timeout, line=("link", pid))
                except errors.Timeout:
                    with self._lock:
                        linking.conclude(pid, False, timeout)  # raises the precise error
                    raise
            # what the socket type still needs once linked (a SUB: the PUB has its prefixes)
            left = None if timeout is None else max(0.0, timeout - (loop.time() - started))
            await self._park("alink", applied, left, line=("link", pid))

        return run()

    def __aiter__(self) -> AsyncSocketMixin:
        return self

    async def __anext__(self: Socket) -> Any:  # type: ignore[misc]
        try:
            return await self.areceive()
        except errors.ClosedError:
            raise StopAsyncIteration from None
