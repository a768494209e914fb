"""The receiver takes its endpoints, streams, images and sub-pos counters from the conductor
through a command queue and reports SETUPs and releases back (docs/internals.md, "Conductor
-> receiver"). The orderings that queue makes possible: a port reopened while the receiver
has not yet closed the old socket, images removed while their data still arrives, counters
freed only once the receiver let go, and subscribe/unsubscribe churn beside a publisher."""

from __future__ import annotations

import json
import os
import struct
import time
from contextlib import ExitStack
from typing import Any

import pytest

from exon.middleware.node_transport import free_port
from exon.native import ffi, lib
from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron import commands as cmd
from exon.transport.aeron.counters import SystemCounter
from tests.transport.aeron.driver_fixtures import (
    launch_udp,
    python_process,
    wait_until,
)
from tests.transport.aeron.test_commands import RawClient

pytestmark = pytest.mark.net

STREAM = 7
TERM = 64 * 1024
MODES = ["DEDICATED", "SHARED_NETWORK", "SHARED", "INVOKER"]
RECEIVER_LABELS = ("sub-pos:", "rcv-pos:", "rcv-hwm:", "rcv-rtt:")


def launch(stack: ExitStack, **settings: Any) -> tuple[MediaDriver, Aeron]:
    return launch_udp(stack, "rcvq", **{"term_buffer_length": TERM, **settings})


def receiver_counters(client: Aeron) -> list[str]:
    return [label for label in client.allocated_counters().values()
            if label.startswith(RECEIVER_LABELS)]


def add_subscription_command(raw: RawClient, correlation_id: int, channel: str,
                             stream_id: int) -> bytes:
    encoded = channel.encode()
    fixed = struct.pack("<qqiii", raw.client_id, correlation_id, stream_id, -1,
                        len(encoded))
    assert len(fixed) == ffi.sizeof("exon_subscription_command_t")
    return fixed + encoded


def remove_command(raw: RawClient, correlation_id: int, registration_id: int) -> bytes:
    data = struct.pack("<qqq", raw.client_id, correlation_id, registration_id)
    assert len(data) == ffi.sizeof("exon_remove_command_t")
    return data


def error_text(kind: int, data: bytes) -> str:
    return cmd.decode_error_response(data)[2] if kind == cmd.ON_ERROR else ""


@pytest.mark.parametrize("mode", MODES)
def test_a_port_closed_and_reopened_in_one_batch_of_commands_binds(stack: ExitStack,
                                                                   mode: str) -> None:
    """REMOVE_SUBSCRIPTION of an endpoint's last subscription and an ADD_SUBSCRIPTION of the
    same port, written back to back so the conductor reads them in one batch: the receiver
    closes the old socket on its own thread, so the new bind must not race it (EADDRINUSE).
    Forty times per threading mode, then data still flows into the last endpoint."""
    driver, rx = launch(stack, threading_mode=mode)
    _, tx = launch(stack, threading_mode=mode)
    raw = RawClient(driver.dir)
    stack.callback(raw.close)
    port = free_port("127.0.0.1")
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    current = raw.next_id()
    raw.send(lib.EXON_CMD_ADD_SUBSCRIPTION, add_subscription_command(raw, current, channel, STREAM))
    kind, data = raw.answer(current)
    assert kind == lib.EXON_RSP_ON_SUBSCRIPTION_READY, error_text(kind, data)
    for _ in range(40):
        remove, add = raw.next_id(), raw.next_id()
        raw.send(lib.EXON_CMD_REMOVE_SUBSCRIPTION, remove_command(raw, remove, current))
        raw.send(lib.EXON_CMD_ADD_SUBSCRIPTION, add_subscription_command(raw, add, channel, STREAM))
        kind, data = raw.answer(remove)
        assert kind == lib.EXON_RSP_ON_OPERATION_SUCCESS, error_text(kind, data)
        kind, data = raw.answer(add)
        assert kind == lib.EXON_RSP_ON_SUBSCRIPTION_READY, error_text(kind, data)
        current = add
    assert rx.counter_value(SystemCounter.ERRORS) == 0
    # the last endpoint is live: a publication connects to it (its SMs come back)
    pub = tx.add_publication(channel, STREAM)
    assert wait_until(lambda: pub.is_connected, 10.0), "no SM from the reopened endpoint"
    # and one subscription of it sees its image; the others' endpoints are all gone
    sub = rx.add_subscription(channel, STREAM)
    assert wait_until(lambda: sub.image_count == 1, 10.0)
    assert wait_until(lambda: len(os.listdir(os.path.join(driver.dir, "images"))) == 1)


@pytest.mark.parametrize("mode", ["DEDICATED", "INVOKER"])
def test_images_removed_while_their_data_flows(stack: ExitStack, mode: str) -> None:
    """Stream 8's image is removed (its one subscription closes) and made again thirty times
    while its publisher keeps sending, so the receiver still gets its DATA while the removal
    is under way; beside it stream 7 on the same endpoint carries 4000 messages, which must
    all arrive in order. Afterwards every image, counter and log the churn made is freed."""
    driver, rx = launch(stack, threading_mode=mode)
    _, tx = launch(stack, threading_mode=mode)
    steady = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    channel = steady.resolved_channel
    main_pub = tx.add_publication(channel, STREAM)
    churn_pub = tx.add_publication(channel, STREAM + 1)
    assert wait_until(lambda: main_pub.is_connected, 10.0)
    messages = [struct.pack("<I", i) + bytes(60 + i % 300) for i in range(4000)]
    got: list[bytes] = []
    sent = 0
    churned = 0
    churn_sub = None
    deadline = time.monotonic() + 60
    while (len(got) < len(messages) or churned < 30) and time.monotonic() < deadline:
        while sent < len(messages) and main_pub.offer(messages[sent]) > 0:
            sent += 1
        churn_pub.offer(b"churn" * 20)  # back pressure (no subscriber) is fine
        steady.poll(lambda data, _h: got.append(bytes(data)), 64)
        if churned < 30:
            if churn_sub is None:
                churn_sub = rx.add_subscription(channel, STREAM + 1)
            elif churn_sub.image_count > 0 and churn_sub.poll(lambda _d, _h: None, 8) >= 0:
                churn_sub.close()
                churn_sub = None
                churned += 1
        time.sleep(0.0005)
    assert churned == 30
    assert got == messages
    if churn_sub is not None:
        churn_sub.close()
    steady.close()
    assert rx.counter_value(SystemCounter.ERRORS) == 0
    # two-phase removal finished: no receiver counter, no image log is left
    assert wait_until(lambda: receiver_counters(rx) == [], 10.0), receiver_counters(rx)
    assert wait_until(lambda: os.listdir(os.path.join(driver.dir, "images")) == [], 10.0)


CHURN_CODE = r"""
import json, os, sys, time
from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron.counters import SystemCounter
from exon.transport.aeron.settings import fresh_driver_dir

mode, rounds, budget = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
opts = {"ipc_term_buffer_length": 65536, "to_driver_buffer_length": 65536,
        "to_clients_buffer_length": 65536, "counters_values_buffer_length": 1 << 20,
        "error_buffer_length": 65536, "publication_linger_timeout_ns": 0,
        "term_buffer_length": 65536, "dir_delete_on_shutdown": True, "threading_mode": mode}
labels = ("sub-pos:", "rcv-pos:", "rcv-hwm:", "rcv-rtt:")
with MediaDriver.launch(dir=fresh_driver_dir("exon-test-churn-rx"), **opts) as rxd, \
        MediaDriver.launch(dir=fresh_driver_dir("exon-test-churn-tx"), **opts) as txd, \
        Aeron.connect(rxd.dir, timeout=5.0) as rx, Aeron.connect(txd.dir, timeout=5.0) as tx:
    anchor = rx.add_subscription("aeron:udp?endpoint=127.0.0.1:0", 1)
    port = int(anchor.bound_endpoint.rsplit(":", 1)[1])
    anchor.close()  # the port is free again: the churn below opens and closes its endpoint
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    pubs = [tx.add_publication(channel, 10 + k) for k in range(3)]
    subs = []
    images = received = done = 0
    end = time.monotonic() + budget
    while done < rounds and time.monotonic() < end:
        for k, pub in enumerate(pubs):
            pub.offer(b"%d" % done * (1 + 40 * k))
        subs.append(rx.add_subscription(channel, 10 + done % 3))
        for sub in subs:
            received += sub.poll(lambda d, h: None, 16)
            images += sub.image_count
        if len(subs) > 4:
            # sometimes the newest, sometimes the oldest: a stream's last one takes its
            # images away while the publication still sends (the next one elicits a SETUP)
            subs.pop(-1 if done % 2 else 0).close()
        if done % 25 == 24:
            # all of them: the endpoint closes, and the next round reopens its port
            for sub in subs:
                sub.close()
            subs.clear()
        time.sleep(0.002)
        done += 1
    for sub in subs:
        sub.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
            v.startswith(labels) for v in rx.allocated_counters().values()):
        time.sleep(0.01)
    left = [v for v in rx.allocated_counters().values() if v.startswith(labels)]
    print(json.dumps({"rounds": done, "images_seen": images, "received": received,
                      "errors": rx.counter_value(SystemCounter.ERRORS), "left": left,
                      "image_logs": os.listdir(os.path.join(rxd.dir, "images"))}), flush=True)
"""


@pytest.mark.parametrize("mode", ["DEDICATED", "SHARED", "INVOKER"])
def test_subscribe_unsubscribe_churn_beside_a_publisher(mode: str) -> None:
    """300 rounds (at most 25 s) of adding and closing subscriptions on three streams of
    one port while three publications send to it, in a child process (a crash there fails
    this test instead of the session): subscriptions join and leave live images, images go
    mid-stream and come back, the endpoint closes and its port reopens every 25 rounds.
    The driver logs no error and, once all is closed, every receiver counter and image log
    is freed."""
    proc = python_process(CHURN_CODE, mode, "300", "25")
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:  # pragma: no cover
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["rounds"] >= 50, report
    assert report["images_seen"] > 0, report  # the churn did meet live images
    assert report["errors"] == 0, report
    assert report["left"] == [], report
    assert report["image_logs"] == [], report
