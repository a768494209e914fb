"""The event loop's waker (:class:`exon.sockets.aio.LoopWaker`), without a node: every
wake of a socket is followed by a retry of that socket that starts after it."""

from __future__ import annotations

import asyncio

from exon.sockets.aio import LoopWaker


class _Sock:
    """Stands in for a socket: counts its retries; ``on_retry`` runs inside one."""

    def __init__(self) -> None:
        self.retries = 0
        self.on_retry = lambda: None

    def _retry_async_waiters(self) -> None:
        self.retries += 1
        self.on_retry()


def _settle(loop: asyncio.AbstractEventLoop) -> None:
    for _ in range(10):  # the eventfd's reader runs on one of these turns
        loop.run_until_complete(asyncio.sleep(0.001))


def test_a_socket_woken_again_during_the_drain_is_retried_again() -> None:
    """x is woken, then woken again while another socket's retry runs in the same drain
    (that retry polled the transport and handed x a message). The second wake must be
    followed by a second retry of x: skipping it as "seen in this drain" left the message
    in x's inbox with its receiver parked until its timeout (CI, stop 36)."""
    loop = asyncio.new_event_loop()
    try:
        waker = LoopWaker(loop)
        x, z = _Sock(), _Sock()
        z.on_retry = lambda: waker.wake(x)  # type: ignore[arg-type]
        waker.wake(x)  # type: ignore[arg-type]
        waker.wake(z)  # type: ignore[arg-type]
        _settle(loop)
        assert (x.retries, z.retries) == (2, 1)
    finally:
        loop.close()


def test_wakes_before_a_drain_retry_each_socket_once() -> None:
    loop = asyncio.new_event_loop()
    try:
        waker = LoopWaker(loop)
        x, z = _Sock(), _Sock()
        for sock in (x, z, x, x, z):
            waker.wake(sock)  # type: ignore[arg-type]
        _settle(loop)
        assert (x.retries, z.retries) == (1, 1)
    finally:
        loop.close()


def test_a_socket_that_keeps_waking_itself_does_not_hold_the_loop() -> None:
    """Each drain retries what was woken before it started: a retry that wakes its own
    socket again is served on a later turn, and other callbacks run in between."""
    loop = asyncio.new_event_loop()
    try:
        waker = LoopWaker(loop)
        x = _Sock()
        x.on_retry = lambda: waker.wake(x) if x.retries < 5 else None  # type: ignore[arg-type]
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            for _ in range(20):
                await asyncio.sleep(0)
                ticks += 1

        waker.wake(x)  # type: ignore[arg-type]
        loop.run_until_complete(ticker())
        _settle(loop)
        assert x.retries == 5
        assert ticks == 20
    finally:
        loop.close()
