"""Wire compatibility with the real Aeron 1.15.1 Java driver over UDP loopback.

(a) a real Aeron publisher -> an exon subscription; (b) an exon publication -> a real Aeron
subscriber; (c) both again with 5% loss injected on the receiving side: exon's own
receive loss generator for (a), Aeron's DebugReceiveChannelEndpoint
(-Daeron.debug.receive.data.loss.rate) for (b). 10,000 messages of mixed sizes (fragmented
ones included) with a deterministic content pattern; everything must arrive in order and
byte-identical.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron.counters import SystemCounter
from tests.interop.peer import JavaPeer, java_peer, message, stop
from tests.transport.aeron.driver_fixtures import unique_dir

pytestmark = [pytest.mark.interop, pytest.mark.net]

N = 10_000
STREAM = 1001
TERM = "term-length=1048576"


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> JavaPeer:
    return java_peer(str(tmp_path_factory.mktemp("interop-java")))


@pytest.fixture
def exon(request: pytest.FixtureRequest) -> Iterator[tuple[MediaDriver, Aeron]]:
    loss = getattr(request, "param", 0.0)
    with MediaDriver.launch(dir=unique_dir("interop"), dir_delete_on_shutdown=True,
                            term_buffer_length=1 << 20, receive_loss_rate=loss,
                            receive_loss_seed=11) as driver, \
            Aeron.connect(driver.dir, timeout=5.0) as client:
        yield driver, client


def free_udp_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("exon", [0.0, 0.05], indirect=True, ids=["clean", "loss5"])
def test_real_aeron_publisher_to_exon_subscription(
    peer: JavaPeer, exon: tuple[MediaDriver, Aeron]
) -> None:
    driver, client = exon
    sub = client.add_subscription("aeron:udp?endpoint=127.0.0.1:0", STREAM)
    assert sub.bound_endpoint.startswith("127.0.0.1:")
    assert not sub.bound_endpoint.endswith(":0")
    cmd, aeron_dir = peer.command("pub", f"{sub.resolved_channel}|{TERM}", STREAM, N)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 90
        while len(got) < N and time.monotonic() < deadline and proc.poll() is None:
            if sub.poll(lambda data, _h: got.append(bytes(data)), 256) == 0:
                sub.wait(0.01)
        assert len(got) == N, f"received {len(got)} of {N}"
        bad = [i for i, data in enumerate(got) if data != message(i)]
        assert not bad, f"{len(bad)} messages differ, first at {bad[0]}"
        assert sub.images[0].source_identity.startswith("127.0.0.1:")
        if driver.settings.receive_loss_rate > 0:
            assert client.counter_value(SystemCounter.NAK_MESSAGES_SENT) > 0
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        stop(proc, aeron_dir)


@pytest.mark.parametrize("loss", [0.0, 0.05], ids=["clean", "loss5"])
def test_exon_publication_to_real_aeron_subscriber(
    peer: JavaPeer, exon: tuple[MediaDriver, Aeron], loss: float
) -> None:
    _driver, client = exon
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}|{TERM}"
    props = (f"-Daeron.debug.receive.data.loss.rate={loss}",
             "-Daeron.debug.receive.data.loss.seed=5") if loss else ()
    cmd, aeron_dir = peer.command("sub", channel, STREAM, N, "90", props=props)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        pub = client.add_publication(channel, STREAM)
        deadline = time.monotonic() + 90
        while not pub.is_connected and time.monotonic() < deadline:
            time.sleep(0.005)
        i = 0
        while i < N and time.monotonic() < deadline:
            if pub.offer(message(i)) > 0:
                i += 1
            else:
                time.sleep(0.0001)
        assert i == N
        out, _ = proc.communicate(timeout=120)
        assert out.strip().splitlines()[-1] == f"RECEIVED {N} OK {N} BAD 0"
        if loss:
            assert client.counter_value(SystemCounter.NAK_MESSAGES_RECEIVED) > 0
            assert client.counter_value(SystemCounter.RETRANSMITS_SENT) > 0
        pub.close()
    finally:
        stop(proc, aeron_dir)
