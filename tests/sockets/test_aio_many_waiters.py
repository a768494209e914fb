"""More receives waiting at once than one credit window holds (issue #33).

An asyncio client starts N ``areceive()`` tasks, then sends N requests with ``asend``; a
plain thread answers on the other node. Once N passed about one window (1024 credits by
default), the sends that waited for credit sat behind the receives waiting for their
replies, the replies never came, and the receives timed out with every reply sent. Each
case runs with the loop otherwise idle ("plain"), after another socket of the node spun in
``areceive`` ("req"), and with a 1 ms ticker on the loop ("tick"). The same with threads
blocked in ``receive()``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import exon

NodeFactory = Callable[..., exon.Node]
T = 20.0  # every wait's timeout: a stall shows as Timeouts, never a hang
WINDOW = 1024  # the default credit window
VARIANTS = ["plain", "req", "tick"]
SIZES = [pytest.param(2000, id="2000"),
         pytest.param(4 * WINDOW, id="4x-window", marks=pytest.mark.slow)]


def _serve(stop: threading.Event, sock: exon.Socket, answer: Callable[[Any], None]) -> None:
    while not stop.is_set():
        try:
            m = sock.receive(timeout=0.2)
        except exon.Timeout:
            continue
        except exon.ClosedError:
            return
        answer(m)


@pytest.fixture
def servers() -> Iterator[Callable[..., None]]:
    """Start threads that answer on a socket until the test ends."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(sock: exon.Socket, answer: Callable[[Any], None]) -> None:
        t = threading.Thread(target=_serve, args=(stop, sock, answer), daemon=True)
        t.start()
        threads.append(t)

    yield start
    stop.set()
    for t in threads:
        t.join(5)


async def _prepare(variant: str, node: exon.Node, rep_address: str) -> None:
    if variant == "req":  # another socket of the node used from asyncio first (it spins)
        req = node.socket("req")
        await req.alink(rep_address, timeout=T)
        await req.asend(b"hello", timeout=T)
        assert (await req.areceive(timeout=T)).payload == b"hello"
    elif variant == "tick":  # the loop has other work
        async def ticker() -> None:
            while True:
                await asyncio.sleep(0.001)

        asyncio.get_running_loop().create_task(ticker())


def _echo_rep(node: exon.Node, start: Callable[..., None]) -> str:
    rep = node.socket("rep")
    start(rep, lambda m: rep.send(m.payload, timeout=T))
    return f"{node.address}/{rep.tag}"


def _outcome(got: list[Any]) -> tuple[int, list[str]]:
    errors = sorted({type(g).__name__ for g in got if isinstance(g, BaseException)})
    return sum(not isinstance(g, BaseException) for g in got), errors


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_dealer_gets_every_reply_with_more_receives_waiting_than_a_window(
        make_node: NodeFactory, servers: Callable[..., None], variant: str, n: int) -> None:
    a, b = make_node(), make_node()
    rep_address = _echo_rep(a, servers)
    router = a.socket("router")
    servers(router, lambda m: router.send(m.payload, peer=m.peer, timeout=T))
    dealer = b.socket("dealer")
    dealer.link(f"{a.address}/{router.tag}", timeout=T)

    async def main() -> tuple[list[Any], int]:
        await _prepare(variant, b, rep_address)
        waiting = [asyncio.create_task(dealer.areceive(timeout=T)) for _ in range(n)]
        for i in range(n):
            await dealer.asend(b"%d" % i, timeout=T)
        got = await asyncio.gather(*waiting, return_exceptions=True)
        return got, sum(1 for _ in dealer._aio_waiters)

    got, lines_left = asyncio.run(main())
    assert _outcome(got) == (n, [])
    assert sorted(g.payload for g in got) == sorted(b"%d" % i for i in range(n))
    assert lines_left == 0  # every line emptied and gone


@pytest.mark.parametrize("sockets", [1, 3])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_pulls_get_every_message_with_more_receives_waiting_than_a_window(
        make_node: NodeFactory, servers: Callable[..., None], variant: str, n: int,
        sockets: int) -> None:
    """N areceive on PULLs of node b (one, or several awaited from one loop), fed by
    asend from PUSHes of the same node, each through a relay on node a (a PULL that
    forwards to its PULL of b): the sends wait for credit while the receives wait for
    messages."""
    a, b = make_node(), make_node()
    rep_address = _echo_rep(a, servers)
    pulls = [b.socket("pull") for _ in range(sockets)]
    pushes = [b.socket("push") for _ in range(sockets)]
    for push, pull in zip(pushes, pulls, strict=True):  # push -> relay on a -> pull
        relay_in, relay_out = a.socket("pull"), a.socket("push")
        relay_out.link(f"{b.address}/{pull.tag}", timeout=T)
        servers(relay_in, lambda m, out=relay_out: out.send(m.payload, timeout=T))
        push.link(f"{a.address}/{relay_in.tag}", timeout=T)

    async def main() -> list[Any]:
        await _prepare(variant, b, rep_address)
        waiting = [asyncio.create_task(pulls[i % sockets].areceive(timeout=T))
                   for i in range(n)]
        for i in range(n):
            await pushes[i % sockets].asend(b"%d" % i, timeout=T)
        return await asyncio.gather(*waiting, return_exceptions=True)

    got = asyncio.run(main())
    assert _outcome(got) == (n, [])
    assert sorted(g.payload for g in got) == sorted(b"%d" % i for i in range(n))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dealer", "pull"])
def test_more_threads_blocked_in_receive_than_a_window(
        make_node: NodeFactory, servers: Callable[..., None], kind: str) -> None:
    """The same through threads: more than a window of threads blocked in receive() on
    one socket while another thread sends."""
    n = WINDOW + 200
    a, b = make_node(), make_node()
    send: Callable[[int], None]
    if kind == "dealer":
        router = a.socket("router")
        servers(router, lambda m: router.send(m.payload, peer=m.peer, timeout=T))
        sock = b.socket("dealer")
        sock.link(f"{a.address}/{router.tag}", timeout=T)

        def send(i: int) -> None:
            sock.send(b"%d" % i, timeout=T)
    else:
        sock = b.socket("pull")
        push = a.socket("push")
        push.link(f"{b.address}/{sock.tag}", timeout=T)

        def send(i: int) -> None:
            push.send(b"%d" % i, timeout=T)

    got: list[Any] = []

    def receive() -> None:
        try:
            got.append(sock.receive(timeout=T))
        except exon.ExonError as exc:
            got.append(exc)

    threads = [threading.Thread(target=receive, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for i in range(n):
        send(i)
    for t in threads:
        t.join(T + 5)
    assert _outcome(got) == (n, [])
    assert sorted(g.payload for g in got) == sorted(b"%d" % i for i in range(n))
