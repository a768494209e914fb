"""Wire interop of exon's sender/receiver agents with the real Aeron 1.15.1 Java driver.

(a) a Java publisher feeds exon's receiver; (b) exon's sender feeds a Java subscriber; (c)
both again with 5% receive-side loss. Mixed sizes up to 8000 bytes (fragmented at the
1408-byte MTU), 64 KiB terms (so PAD frames and term rotation happen), byte-identical.
"""

from __future__ import annotations

import time

import pytest

from exon.native import lib
from tests.transport.aeron.interop_peer import JavaPeer, compile_peer, free_udp_port, message
from tests.transport.aeron.udp_harness import STREAM, ReceiverSide, SenderSide

pytestmark = [pytest.mark.interop, pytest.mark.net]
COUNT = 10_000
SEED = 20261122


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return compile_peer(tmp_path_factory.mktemp("java"))


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_java_publisher_to_exon_receiver(classes, tmp_path, loss: float) -> None:
    receiver = ReceiverSide(str(tmp_path), loss_rate=loss, loss_seed=42)
    channel = f"aeron:udp?endpoint=127.0.0.1:{receiver.port}|term-length=64k"
    peer = JavaPeer(classes, "pub", channel, STREAM, COUNT, SEED, 120)
    try:
        peer.wait_ready()
        deadline = time.monotonic() + 90
        while len(receiver.messages) < COUNT and time.monotonic() < deadline:
            if receiver.step(lib.exon_nano_clock_ns()) == 0:
                time.sleep(0.0002)
        got = len(receiver.messages)
        assert got == COUNT, f"{got} of {COUNT}; java: {peer.result(1)}"
        for i, m in enumerate(receiver.messages):
            assert m == message(SEED, i), f"message {i} differs"
        assert peer.result(30).endswith(f"OK {COUNT}")
        if loss:
            assert receiver.agent.receive_loss_drops > 0
            assert receiver.images[0][0].stats.naks_sent > 0
    finally:
        peer.stop()
        receiver.close()


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_exon_sender_to_java_subscriber(classes, tmp_path, loss: float) -> None:
    port = free_udp_port()
    props = []
    if loss:
        props = [
            "-Daeron.ReceiveChannelEndpoint.supplier="
            "io.aeron.driver.ext.DebugReceiveChannelEndpointSupplier",
            f"-Daeron.debug.receive.data.loss.rate={loss}",
            "-Daeron.debug.receive.data.loss.seed=42",
        ]
    peer = JavaPeer(classes, "sub", f"aeron:udp?endpoint=127.0.0.1:{port}", STREAM, COUNT, SEED,
                    120, props)
    sender = None
    try:
        peer.wait_ready()
        sender = SenderSide(str(tmp_path), port)
        sent = 0
        deadline = time.monotonic() + 90
        while peer.proc.poll() is None and time.monotonic() < deadline:
            while sent < COUNT:
                rc = sender.offer(message(SEED, sent))
                if rc == lib.EXON_PUBLICATION_ADMIN_ACTION:
                    continue
                if rc < 0:
                    break
                sent += 1
            if sender.step(lib.exon_nano_clock_ns()) == 0:
                time.sleep(0.0002)
        out = peer.result(30)
        assert out.endswith(f"OK {COUNT}"), out
        assert sent == COUNT
        if loss:
            assert sender.net.stats.naks_received > 0
            assert sender.net.stats.retransmits > 0
    finally:
        peer.stop()
        if sender is not None:
            sender.close()
