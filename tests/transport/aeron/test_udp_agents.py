"""Sender and receiver agents over real UDP on loopback: delivery, loss, garbage, liveness."""

from __future__ import annotations

import random
import socket
import time

import pytest

from exon.native import ffi, lib
from tests.transport.aeron.udp_harness import ReceiverSide, SenderSide

pytestmark = pytest.mark.net
MS = 1_000_000


def _messages(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    sizes = [0, 1, 31, 100, 1000, 1376, 1377, 3000, 8000]
    return [rng.randbytes(rng.choice(sizes)) for _ in range(n)]


def _run(sender: SenderSide, receiver: ReceiverSide, messages: list[bytes], *,
         timeout: float = 30.0, garbage: socket.socket | None = None) -> None:
    sent = 0
    deadline = time.monotonic() + timeout
    rng = random.Random(7)
    while len(receiver.messages) < len(messages) and time.monotonic() < deadline:
        while sent < len(messages):
            rc = sender.offer(messages[sent])
            if rc == lib.EXON_PUBLICATION_ADMIN_ACTION:
                continue
            if rc < 0:
                break
            sent += 1
        now = lib.exon_nano_clock_ns()
        sender.step(now)
        receiver.step(now)
        if garbage is not None and rng.random() < 0.3:
            garbage.sendto(rng.randbytes(rng.randint(0, 200)), ("127.0.0.1", receiver.port))
    assert len(receiver.messages) == len(messages), (
        f"{len(receiver.messages)} of {len(messages)} arrived (sent {sent})")
    assert receiver.messages == messages


@pytest.fixture
def link(tmp_path):
    made = []

    def factory(*, loss: float = 0.0, sender_params=None, image_params=None):
        receiver = ReceiverSide(str(tmp_path), loss_rate=loss, image_params=image_params)
        sender = SenderSide(str(tmp_path), receiver.port, params=sender_params)
        made.extend([sender, receiver])
        return sender, receiver

    yield factory
    for side in made:
        side.close()


def test_clean_delivery_in_order(link) -> None:
    sender, receiver = link()
    messages = _messages(3000, 1)
    _run(sender, receiver, messages)
    stats = sender.net.stats
    assert stats.setups_sent >= 1
    assert stats.sms_received >= 1
    assert sender.net.connected
    assert stats.naks_received == 0
    assert receiver.images[0][0].stats.naks_sent == 0
    assert sender.log.meta.is_connected == 1


def test_delivery_under_5_percent_receive_loss(link) -> None:
    sender, receiver = link(loss=0.05)
    messages = _messages(3000, 2)
    _run(sender, receiver, messages)
    net_image = receiver.images[0][0]
    assert receiver.agent.receive_loss_drops > 0
    assert net_image.stats.naks_sent > 0
    assert sender.net.stats.retransmits > 0


def test_garbage_datagrams_while_streaming(link) -> None:
    sender, receiver = link()
    messages = _messages(2000, 3)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as garbage:
        _run(sender, receiver, messages, garbage=garbage)
    assert receiver.agent.invalid_packets + receiver.agent.unknown_stream_packets > 0


def test_publisher_vanishes_image_times_out(link) -> None:
    params = ffi.new("exon_net_image_params_t *")
    lib.exon_net_image_default_params(params)
    params.liveness_timeout_ns = 300 * MS
    sender, receiver = link(image_params=params)
    _run(sender, receiver, _messages(50, 4))
    deadline = time.monotonic() + 5
    while not receiver.removed and time.monotonic() < deadline:
        receiver.step(lib.exon_nano_clock_ns())  # the sender no longer runs
        time.sleep(0.005)
    assert len(receiver.removed) == 1
    assert receiver.removed[0].state == lib.EXON_NETIMG_DONE_TIMEOUT
    assert receiver.images[0][1].meta.is_connected == 0


def test_subscriber_vanishes_publication_not_connected(link) -> None:
    params = ffi.new("exon_net_publication_params_t *")
    lib.exon_net_publication_default_params(params)
    params.connection_timeout_ns = 300 * MS
    sender, receiver = link(sender_params=params)
    _run(sender, receiver, _messages(50, 5))
    assert lib.exon_publication_is_connected(sender.pub) == 1
    deadline = time.monotonic() + 5
    while sender.net.connected and time.monotonic() < deadline:
        sender.step(lib.exon_nano_clock_ns())  # the receiver no longer runs
        time.sleep(0.005)
    assert not sender.net.connected
    assert lib.exon_publication_is_connected(sender.pub) == 0
    assert sender.net.stats.setups_sent >= 2  # back to SETUPs


def test_close_sends_eos_and_image_ends(link) -> None:
    params = ffi.new("exon_net_publication_params_t *")
    lib.exon_net_publication_default_params(params)
    params.linger_ns = 300 * MS
    sender, receiver = link(sender_params=params)
    _run(sender, receiver, _messages(100, 6))
    lib.exon_net_publication_close(sender.net, lib.exon_nano_clock_ns())
    deadline = time.monotonic() + 5
    while not lib.exon_net_publication_is_done(sender.net) and time.monotonic() < deadline:
        now = lib.exon_nano_clock_ns()
        sender.step(now)
        receiver.step(now)
        time.sleep(0.002)
    assert lib.exon_net_publication_is_done(sender.net)
    assert sender.net.stats.eos_heartbeats_sent >= 1
    assert len(receiver.removed) == 1
    assert receiver.removed[0].state == lib.EXON_NETIMG_DONE_EOS
    assert receiver.removed[0].eos_position == sender.net.sender_position
