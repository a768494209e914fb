"""Multicast wire compatibility with the real Aeron 1.15.1 Java driver, in two network
namespaces on a bridge (:mod:`tests.transport.aeron.multicast_lab`).

(a) a real Aeron publisher -> an exon subscription; (b) an exon publication -> a real Aeron
subscriber; each clean and with 5% of the UDP arriving at the receiver's namespace dropped
(nftables), so NAKs go to the control group and retransmits come back on the data group
across the two implementations. 5,000 messages of mixed sizes (fragmented ones included);
everything must arrive in order and byte-identical.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.peer import FLAGS, JavaPeer, java_peer
from tests.transport.aeron.multicast_lab import MulticastLab, built_lab

pytestmark = [pytest.mark.interop, pytest.mark.net, pytest.mark.netns]

N = 5000
STREAM = 1001
CHANNEL = "aeron:udp?endpoint=224.0.1.1:{port}|interface=10.78.0.0/24|term-length=1m"


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> JavaPeer:
    return java_peer(str(tmp_path_factory.mktemp("interop-java-mc")))


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[MulticastLab]:
    with built_lab(tmp_path, hosts=2) as built:
        try:
            yield built
        finally:
            shutil.rmtree(f"/dev/shm/exon-mc-java-{built.name}", ignore_errors=True)


def _java(lab: MulticastLab, peer: JavaPeer, host: int, args: list[str],
          **kwargs: object) -> subprocess.Popen[str]:
    return lab.popen(host, ["java", *FLAGS, "-cp", peer.classpath, "ExonInterop", *args],
                     stdout=subprocess.PIPE, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("loss", [0, 5], ids=["clean", "loss5"])
def test_real_aeron_multicast_publisher_to_exon_subscription(
    peer: JavaPeer, lab: MulticastLab, loss: int
) -> None:
    channel = CHANNEL.format(port=40456)
    if loss:
        lab.loss(1, loss)
    sub = lab.peer(1, "sub", channel, STREAM)
    assert sub.ready["bound"] == "224.0.1.1:40456"
    java = _java(lab, peer, 0, ["pub", f"/dev/shm/exon-mc-java-{lab.name}", channel,
                                str(STREAM), str(N)], stdin=subprocess.PIPE)
    assert java.stdout is not None
    assert java.stdin is not None
    assert java.stdout.readline().strip() == "READY"
    result = sub.ok("wait", wait=60, count=N)
    assert (result["received"], result["bad"]) == (N, 0), result
    if loss:
        assert lab.dropped(1) > 0
        assert result["naks_sent"] > 0
    assert java.stdout.readline().strip() == f"SENT {N}"
    java.stdin.close()
    assert java.wait(timeout=30) == 0


@pytest.mark.parametrize("loss", [0, 5], ids=["clean", "loss5"])
def test_exon_multicast_publication_to_real_aeron_subscriber(
    peer: JavaPeer, lab: MulticastLab, loss: int
) -> None:
    channel = CHANNEL.format(port=40460)
    if loss:
        lab.loss(1, loss)
    java = _java(lab, peer, 1, ["sub", f"/dev/shm/exon-mc-java-{lab.name}", channel,
                                str(STREAM), str(N), "60"])
    assert java.stdout is not None
    assert java.stdout.readline().strip() == "READY"
    pub = lab.peer(0, "pub", channel, STREAM)
    assert pub.ok("connect", wait=20)["connected"]
    sent = pub.ok("send", wait=60, count=N)
    assert sent["sent"] == N
    out, _ = java.communicate(timeout=90)
    assert out.strip().splitlines()[-1] == f"RECEIVED {N} OK {N} BAD 0"
    final = pub.ok("send", wait=5, count=0)
    assert final["status_messages_received"] > 0
    if loss:
        assert lab.dropped(1) > 0
        assert final["naks_received"] > 0
        assert final["retransmits_sent"] > 0
