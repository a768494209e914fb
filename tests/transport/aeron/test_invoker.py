"""The INVOKER threading mode (exon_invoker.h): the embedding process's waiting thread runs
the sender and receiver duty cycles; its park ends on a datagram or a bridged ring."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from exon import errors
from exon.native import ffi, lib
from exon.transport.aeron import Aeron, MediaDriver
from tests.transport.aeron.driver_fixtures import SMALL, unique_dir, wait_until

pytestmark = pytest.mark.net

STREAM = 9


def launch(stack: ExitStack, mode: str) -> tuple[MediaDriver, Aeron]:
    opts = {**SMALL, "term_buffer_length": 64 * 1024, "dir_delete_on_shutdown": True,
            "threading_mode": mode}
    driver = stack.enter_context(MediaDriver.launch(dir=unique_dir("inv"), **opts))
    client = stack.enter_context(Aeron.connect(driver.dir, timeout=5.0))
    return driver, client


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def udp_pair(stack: ExitStack, rx_mode: str = "INVOKER") -> tuple[MediaDriver, Any, Any]:
    rx_driver, rx = launch(stack, rx_mode)
    _, tx = launch(stack, "SHARED")
    sub = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    port = int(sub.bound_endpoint.rsplit(":", 1)[1])
    pub = tx.add_publication(f"aeron:udp?endpoint=127.0.0.1:{port}", STREAM)
    assert wait_until(lambda: pub.is_connected and sub.image_count == 1, 5.0)
    return rx_driver, sub, pub


def image_array(sub: Any) -> Any:
    images = sub.images
    return ffi.new("exon_image_t *[]", [img.cdata for img in images]), len(images)


def test_invoker_is_one_shared_agent_thread(stack: ExitStack) -> None:
    invoker, _ = launch(stack, "INVOKER")
    shared, _ = launch(stack, "SHARED")
    assert invoker.invoker
    assert invoker.thread_count == 1
    assert not shared.invoker
    assert lib.exon_driver_invoke(shared.handle) == 0  # not INVOKER: nothing to run
    assert lib.exon_invoker_bridge(shared.handle, ffi.new("int32_t *")) < 0


def test_the_waiting_thread_receives_the_datagrams_itself(stack: ExitStack) -> None:
    driver, sub, pub = udp_pair(stack)
    arr, n = image_array(sub)
    got: list[bytes] = []
    for i in range(200):
        msg = i.to_bytes(4, "little") * 8
        while pub.offer(msg) < 0:
            time.sleep(0.0005)
        deadline = time.monotonic() + 5.0
        while not sub.poll(lambda data, _h: got.append(bytes(data)), 16):
            assert time.monotonic() < deadline, f"message {i} never arrived"
            rc = lib.exon_invoker_wait(driver.handle, arr, n, sub._doorbell, 0, 1_000_000_000)
            assert rc in (0, 1, lib.EXON_E_TIMEOUT)
    assert got == [i.to_bytes(4, "little") * 8 for i in range(200)]


def test_the_agent_receives_once_no_thread_invokes(stack: ExitStack) -> None:
    """After a client thread ran the duty cycles (exon_driver_invoke), datagrams that come
    while none invokes any more are received, in order, by the agent: it stands aside only
    while a thread is inside exon_invoker_wait."""
    driver, sub, pub = udp_pair(stack)
    got: list[bytes] = []
    for round_ in range(3):
        assert lib.exon_driver_invoke(driver.handle) >= 0  # a client thread ran the cycles
        sent = [bytes([round_, i]) * 16 for i in range(20)]
        for msg in sent:
            deadline = time.monotonic() + 5.0
            while pub.offer(msg) < 0:
                assert time.monotonic() < deadline, "the publication stayed back-pressured"
                time.sleep(0.0005)
        want = len(got) + len(sent)

        def arrived(want: int = want) -> bool:
            sub.poll(lambda d, _h: got.append(bytes(d)), 32)
            return len(got) >= want

        assert wait_until(arrived, 5.0)
        assert got[want - len(sent):] == sent


def test_an_empty_wait_times_out(stack: ExitStack) -> None:
    driver, sub, _pub = udp_pair(stack)
    arr, n = image_array(sub)
    start = time.monotonic()
    rc = lib.exon_invoker_wait(driver.handle, arr, n, sub._doorbell, 100_000, 30_000_000)
    assert rc == lib.EXON_E_TIMEOUT
    assert time.monotonic() - start >= 0.029


@pytest.mark.parametrize("bridged", [True, False])
def test_a_ring_ends_the_park(stack: ExitStack, bridged: bool) -> None:
    """A bridged ring (this process) writes the invoker's eventfd; an unbridged one (as from
    another process) is seen at the end of the current park slice. Either ends the wait
    long before its 5 s timeout, with 0 (rung for something else)."""
    driver, sub, _pub = udp_pair(stack)
    doorbell = sub._doorbell
    if bridged:
        assert lib.exon_invoker_bridge(driver.handle, doorbell) == 0
    try:
        ringer = threading.Timer(0.2, lambda: lib.exon_doorbell_ring(doorbell))
        ringer.start()
        start = time.monotonic()
        rc = lib.exon_invoker_wait(driver.handle, ffi.NULL, 0, doorbell, 0, 5_000_000_000)
        waited = time.monotonic() - start
        ringer.join()
        assert rc == 0
        assert 0.15 < waited < 2.5
    finally:
        if bridged:
            assert lib.exon_invoker_unbridge(driver.handle, doorbell) == 0
            assert lib.exon_invoker_unbridge(driver.handle, doorbell) < 0  # once only


def test_a_non_invoker_driver_waits_on_the_futex(stack: ExitStack) -> None:
    driver, sub, pub = udp_pair(stack, rx_mode="SHARED")
    arr, n = image_array(sub)
    assert pub.offer(b"hello") > 0
    rc = lib.exon_invoker_wait(driver.handle, arr, n, sub._doorbell, 0, 5_000_000_000)
    assert rc in (0, 1)
    got: list[bytes] = []
    assert wait_until(lambda: sub.poll(lambda d, _h: got.append(bytes(d)), 4) > 0 or got, 5.0)
    assert got == [b"hello"]


def test_a_node_embeds_an_invoker_driver(stack: ExitStack) -> None:
    import exon

    node = stack.enter_context(exon.Node(driver="embedded"))
    assert node._driver is not None
    assert node._driver.invoker
    other = stack.enter_context(exon.Node(driver="embedded",
                                          driver_options={"threading_mode": "SHARED"}))
    assert other._driver is not None
    assert not other._driver.invoker
    rep = node.socket("rep", tag=1)
    req = other.socket("req")
    req.link(f"{node.address}/1", timeout=5)
    for i in range(50):
        req.send(b"q%d" % i)
        msg = rep.receive(timeout=5)
        rep.send(msg.payload + b"!")
        assert req.receive(timeout=5).payload == b"q%d!" % i
    with pytest.raises(errors.ConfigurationError):
        exon.Node(driver="embedded", driver_options={"threading_mode": "INVOKERS"})
