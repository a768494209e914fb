"""The asyncio face: asend / areceive / alink / async for (exon.sockets.aio)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import exon

NodeFactory = Callable[..., exon.Node]


def run(coro: Any, timeout: float = 60.0) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def test_req_rep_round_trips_with_async_for(make_node: NodeFactory) -> None:
    server, client = make_node(), make_node()
    rep = server.socket("rep", tag=1)
    req = client.socket("req")

    async def main() -> list[bytes]:
        await req.alink(f"{server.address}/1", timeout=5)

        async def serve() -> None:
            async for request in rep:
                await rep.asend(request.payload.upper(), timeout=5)

        task = asyncio.create_task(serve())
        answers = []
        for i in range(200):
            await req.asend(b"q%d" % i, timeout=5)
            answers.append((await req.areceive(timeout=5)).payload)
        rep.close()
        await asyncio.wait_for(task, 5)  # async for ends when the socket closes
        return answers

    assert run(main()) == [b"Q%d" % i for i in range(200)]


def test_ten_thousand_tasks_on_one_loop(make_node: NodeFactory) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=2, credits=64)
    pushes = [a.socket("push") for _ in range(4)]
    tasks_n = 10_000

    async def main() -> tuple[list[bytes], int]:
        for push in pushes:
            await push.alink(f"{b.address}/2", timeout=5)
        receivers = [asyncio.create_task(pull.areceive(timeout=30)) for _ in range(tasks_n)]

        async def send(i: int) -> None:
            await pushes[i % 4].asend(b"%d" % i, timeout=30)

        senders = [asyncio.create_task(send(i)) for i in range(tasks_n)]
        await asyncio.gather(*senders)
        got = await asyncio.gather(*receivers)
        return [m.payload for m in got], len(asyncio.all_tasks())

    payloads, left = run(main(), timeout=120)
    assert sorted(payloads) == sorted(b"%d" % i for i in range(tasks_n))  # each exactly once
    assert left == 2  # only run()'s wrapper and main() itself: no task left behind


def test_waiting_uses_no_timer_and_never_blocks_the_loop(make_node: NodeFactory) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=3)
    push = a.socket("push")
    push.link(f"{b.address}/3", timeout=5)

    async def main() -> tuple[int, bool, bytes]:
        loop = asyncio.get_running_loop()
        waiting = [asyncio.create_task(pull.areceive()) for _ in range(100)]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        # the only timer is run()'s own bound (a minute away): none polls for the waiters
        no_timers = all(h.when() - loop.time() > 10
                        for h in loop._scheduled)  # type: ignore[attr-defined]
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            for _ in range(20):
                await asyncio.sleep(0.01)
                ticks += 1

        threading.Timer(0.3, lambda: push.send(b"from a thread", timeout=5)).start()
        await ticker()
        done, _ = await asyncio.wait(waiting, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        first = done.pop().result().payload
        for t in waiting:
            t.cancel()
        return ticks, no_timers, first

    ticks, no_timers, first = run(main())
    assert no_timers  # woken by the node's eventfd, not by polling
    assert ticks == 20  # the loop kept running while 100 tasks waited
    assert first == b"from a thread"


def test_sync_and_async_share_a_socket(make_node: NodeFactory) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=4)
    push = a.socket("push")
    push.link(f"{b.address}/4", timeout=5)
    total = 3000

    async def async_only() -> list[bytes]:  # the async face alone, then the sync one alone
        for i in range(10):
            await push.asend(b"a%d" % i, timeout=5)
        return [(await pull.areceive(timeout=5)).payload for _ in range(10)]

    assert run(async_only()) == [b"a%d" % i for i in range(10)]
    for i in range(10):
        push.send(b"s%d" % i, timeout=5)
    assert [pull.receive(timeout=5).payload for _ in range(10)] == [b"s%d" % i
                                                                     for i in range(10)]

    sync_got: list[bytes] = []
    stop = threading.Event()

    def sync_reader() -> None:  # then both at once, on one socket
        while not stop.is_set():
            try:
                sync_got.append(pull.receive(timeout=0.2).payload)
            except exon.Timeout:
                continue

    reader = threading.Thread(target=sync_reader)
    reader.start()

    async def main() -> list[bytes]:
        got: list[bytes] = []

        async def async_reader() -> None:
            while len(got) + len(sync_got) < total:
                try:
                    got.append((await pull.areceive(timeout=0.2)).payload)
                except exon.Timeout:
                    continue

        task = asyncio.create_task(async_reader())
        for i in range(total):
            await push.asend(b"%d" % i, timeout=5)
        await asyncio.wait_for(task, 30)
        return got

    try:
        async_got = run(main())
    finally:
        stop.set()
        reader.join(5)
    # nothing lost, nothing twice, whichever face took each message
    assert sorted(async_got + sync_got) == sorted(b"%d" % i for i in range(total))


def test_timeouts_and_misuse_raise_exon_errors(make_node: NodeFactory) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=5, credits=1)
    push = a.socket("push")
    push.link(f"{b.address}/5", timeout=5)
    with pytest.raises(exon.StateError, match="running asyncio event loop"):
        push.asend(b"x")  # no loop in this thread: refused at once, no coroutine left over
    with pytest.raises(exon.StateError, match="running asyncio event loop"):
        pull.areceive()

    async def main() -> None:
        with pytest.raises(exon.Timeout):
            await pull.areceive(timeout=0.05)
        with pytest.raises(exon.Timeout):
            await pull.areceive(timeout=0)
        await push.asend(b"one", timeout=1)  # spends the only credit
        started = time.monotonic()
        with pytest.raises(exon.Timeout):
            await push.asend(b"two", timeout=0.1)
        assert time.monotonic() - started < 5
        for bad in (math.nan, -1.0):
            with pytest.raises(exon.ConfigurationError):
                await pull.areceive(timeout=bad)
        with pytest.raises(exon.ExonError):
            await push.areceive(timeout=0.1)  # a PUSH with no cookie pending
        with pytest.raises(exon.SocketNotFound):
            await push.alink(f"{b.address}/999", timeout=1)

    run(main())


def test_close_wakes_async_waiters(make_node: NodeFactory) -> None:
    a = make_node()
    pull = a.socket("pull", tag=6)

    async def main() -> BaseException:
        waiter = asyncio.create_task(pull.areceive())
        await asyncio.sleep(0.05)
        await asyncio.get_running_loop().run_in_executor(None, pull.close)
        try:
            await asyncio.wait_for(waiter, 5)
        except BaseException as exc:  # the error the waiter got
            return exc
        raise AssertionError("the waiter returned")

    assert isinstance(run(main()), exon.ClosedError)


def test_cancelled_waiter_leaves_the_line(make_node: NodeFactory) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=7)
    push = a.socket("push")
    push.link(f"{b.address}/7", timeout=5)

    async def main() -> bytes:
        first = asyncio.create_task(pull.areceive())
        second = asyncio.create_task(pull.areceive(timeout=5))
        await asyncio.sleep(0.02)
        first.cancel()
        await asyncio.sleep(0)
        push.send(b"for the second", timeout=5)
        return (await second).payload

    assert run(main()) == b"for the second"
    assert b._poll.async_waiters == 0
    assert not pull._aio_waiters


def test_router_answers_and_sub_links_through_the_async_face(make_node: NodeFactory) -> None:
    a, b = make_node(), make_node()
    router = a.socket("router", tag=8)
    dealer = b.socket("dealer")
    pub = a.socket("pub", tag=9)
    sub = b.socket("sub")
    sub.subscribe(b"keep")

    async def main() -> tuple[list[bytes], bytes]:
        await dealer.alink(f"{a.address}/8", timeout=5)
        for i in range(5):
            await dealer.asend(b"q%d" % i, timeout=5)
        for _ in range(5):
            request = await router.areceive(timeout=5)
            await router.asend(request.payload.upper(), peer=request.peer, timeout=5)
        answers = sorted([(await dealer.areceive(timeout=5)).payload for _ in range(5)])
        # alink returns once the PUB applied the SUB's prefixes, as link does: the very
        # first publication after it is filtered and delivered
        await sub.alink(f"{a.address}/9", timeout=5)
        pub.send(b"drop this", timeout=5)
        pub.send(b"keep this", timeout=5)
        return answers, (await sub.areceive(timeout=5)).payload

    answers, first = run(main())
    assert answers == [b"Q%d" % i for i in range(5)]
    assert first == b"keep this"


def test_async_timeouts_follow_the_sync_rule(make_node: NodeFactory) -> None:
    pull = make_node().socket("pull", tag=11)

    async def main() -> None:
        with pytest.raises(exon.ArgumentTypeError):
            await pull.areceive(timeout="1")  # type: ignore[arg-type]
        with pytest.raises(exon.ConfigurationError):
            await pull.areceive(timeout=-0.5)
        with pytest.raises(exon.Timeout):
            await pull.areceive(timeout=0.01)

    run(main())


def _serve_once_after(rep: Any, go: threading.Event) -> threading.Thread:
    """A thread that takes one request on ``rep`` and answers it once ``go`` is set."""

    def serve() -> None:
        request = rep.receive(timeout=10)
        go.wait(10)
        rep.send(request.payload.upper(), timeout=10)

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


def test_a_spinning_reply_needs_no_parking_and_the_loop_runs_meanwhile(
        make_node: NodeFactory) -> None:
    from exon.sockets.aio import LoopWaker

    server, client = make_node(), make_node()
    rep = server.socket("rep", tag=12)
    req = client.socket("req")
    req.link(f"{server.address}/12", timeout=5)  # sync: nothing of the loop parks before
    req._wait_spin = 30.0  # spin until the reply comes (the default is microseconds)
    go = threading.Event()
    serving = _serve_once_after(rep, go)

    async def main() -> tuple[bytes, int, bool, bool, bool]:
        loop = asyncio.get_running_loop()
        ticks = 0
        parked = False
        spinning = False

        async def ticker() -> None:  # other tasks keep running while the REQ spins
            nonlocal ticks, parked, spinning
            while ticks < 5:
                await asyncio.sleep(0.005)
                ticks += 1
                parked = parked or bool(req._aio_waiters)
                spinning = spinning or client._poll.loop_pollers == 1
            go.set()  # only now may the reply come: the REQ waited through the ticks

        await req.asend(b"ping", timeout=5)
        tick_task = asyncio.create_task(ticker())
        reply = (await req.areceive(timeout=30)).payload
        await tick_task
        return reply, ticks, parked, spinning, LoopWaker._by_loop.get(loop) is None

    try:
        reply, ticks, parked, spinning, no_waker = run(main())
    finally:
        go.set()
        serving.join(10)
    assert reply == b"PING"
    assert ticks == 5  # the loop served the ticker all along the REQ's wait
    assert spinning  # the REQ spun (polling the transport itself)...
    assert not parked  # ...and never joined a line
    assert no_waker  # nothing on this loop ever waited for the node's eventfd
    assert client._poll.loop_pollers == 0  # the spin ended: the dispatcher may poll again


def test_a_spinner_takes_the_poll_role_from_the_dispatcher_and_polls_for_all(
        make_node: NodeFactory) -> None:
    server, client = make_node(), make_node()
    rep = server.socket("rep", tag=13)
    req = client.socket("req")
    req.link(f"{server.address}/13", timeout=5)
    pull = client.socket("pull", tag=14)  # a second socket of the REQ's node
    push = server.socket("push")
    push.link(f"{client.address}/14", timeout=5)
    req._wait_spin = 30.0
    go = threading.Event()
    serving = _serve_once_after(rep, go)

    async def main() -> tuple[bytes, bytes, bool, bool]:
        parked = asyncio.create_task(pull.areceive(timeout=30))  # PULL: parks at once
        for _ in range(1000):  # the dispatcher takes the poll role for the parked task
            await asyncio.sleep(0.005)
            if client._poll.role == -1:
                break
        dispatcher_polled = client._poll.role == -1
        await req.asend(b"ping", timeout=5)
        req_parked = False

        async def feed() -> None:
            nonlocal req_parked
            await asyncio.sleep(0.02)
            req_parked = bool(req._aio_waiters)
            push.send(b"for the parked task", timeout=5)  # the spinner's polls hand it out
            got = await asyncio.wait_for(asyncio.shield(parked), 10)
            req_parked = req_parked or bool(req._aio_waiters)
            go.set()
            assert got.payload == b"for the parked task"

        feeder = asyncio.create_task(feed())
        reply = (await req.areceive(timeout=30)).payload
        await feeder
        return reply, (await parked).payload, dispatcher_polled, req_parked

    try:
        reply, other, dispatcher_polled, req_parked = run(main())
    finally:
        go.set()
        serving.join(10)
    assert dispatcher_polled  # it held the role when the REQ started to spin...
    assert reply == b"PING"
    assert not req_parked  # ...and the REQ got it and spun instead of parking
    assert other == b"for the parked task"  # the parked PULL task was served meanwhile
    assert client._poll.async_waiters == 0
    assert client._poll.loop_pollers == 0


def test_a_spin_honours_the_timeout_and_cancellation(make_node: NodeFactory) -> None:
    server, client = make_node(), make_node()
    server.socket("rep", tag=15)  # never answers
    req = client.socket("req")
    req.link(f"{server.address}/15", timeout=5)
    req._wait_spin = 30.0

    async def main() -> bool:
        await req.asend(b"lost", timeout=5)
        with pytest.raises(exon.Timeout):
            await req.areceive(timeout=0.05)  # the spin ends at the timeout, not after 30 s
        after_timeout = client._poll.loop_pollers == 0
        await req.asend(b"again", timeout=5)  # the timed-out request was abandoned
        task = asyncio.create_task(req.areceive(timeout=30))
        for _ in range(5):
            await asyncio.sleep(0)
        spinning = client._poll.loop_pollers == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return after_timeout and spinning

    assert run(main(), timeout=20)
    assert client._poll.loop_pollers == 0  # a cancelled spinner let the dispatcher back in
    assert not req._aio_waiters


def test_a_spin_that_runs_out_makes_the_next_receives_park_at_once(
        make_node: NodeFactory) -> None:
    server, client = make_node(), make_node()
    rep = server.socket("rep", tag=16)
    req = client.socket("req")
    req.link(f"{server.address}/16", timeout=5)
    short, long = 0.001, 30.0  # a spin that runs out before the answer, one that catches it
    spins = [short, long, short, long, long, long, long]
    gates = [threading.Event() for _ in spins]

    def serve() -> None:
        for gate in gates:
            request = rep.receive(timeout=10)
            gate.wait(10)
            rep.send(request.payload.upper(), timeout=10)

    serving = threading.Thread(target=serve)
    serving.start()

    async def round_trip(i: int) -> tuple[Any, ...]:
        """One round trip whose answer waits for 20 ms of loop turns: the reply, whether
        the REQ was seen spinning (polling from the loop) or parked meanwhile, and its
        backoff state after it."""
        req._wait_spin = spins[i]
        await req.asend(b"q%d" % i, timeout=5)
        spun = parked = False

        async def watch() -> None:
            nonlocal spun, parked
            for _ in range(4):
                await asyncio.sleep(0.005)
                spun = spun or client._poll.loop_pollers == 1
                parked = parked or bool(req._aio_waiters)
            gates[i].set()

        watcher = asyncio.create_task(watch())
        reply = (await req.areceive(timeout=30)).payload
        await watcher
        return reply, spun, parked, req._aio_spin.skip, req._aio_spin.backoff

    async def main() -> list[tuple[Any, ...]]:
        return [await round_trip(i) for i in range(len(spins))]

    try:
        steps = run(main())
    finally:
        for gate in gates:
            gate.set()
        serving.join(10)
    assert [step[0] for step in steps] == [b"Q%d" % i for i in range(len(spins))]
    # (parked, receives left to skip the spin, backoff); a 1 ms spin ends unseen
    assert steps[0][2:] == (True, 1, 1)  # the spin ran out: it parked; skip the next one
    assert steps[1][1:] == (False, True, 0, 1)  # parked at once: no spin
    assert steps[2][2:] == (True, 2, 2)  # ran out again: the backoff doubles
    assert steps[3][1:] == (False, True, 1, 2)
    assert steps[4][1:] == (False, True, 0, 2)
    assert steps[5][1:] == (True, False, 0, 1)  # spun and got it: the backoff halves
    assert steps[6][1:] == (True, False, 0, 0)
