"""UDP multicast channels: Aeron's group rules, bad input, and one publisher to three
namespaces (one of them losing 5% of its datagrams) over a bridge."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exon.errors import ChannelUriError, ConfigurationError
from exon.native import ffi, lib
from exon.transport.aeron import Aeron, MediaDriver, channel
from exon.transport.aeron.counters import SystemCounter
from tests.chaos.netns import REPO
from tests.transport.aeron.driver_fixtures import unique_dir
from tests.transport.aeron.multicast_lab import MulticastLab, Peer, built_lab

GROUP = "224.0.1.1:40456"


def _addr(host: str, port: int = 0) -> object:
    addr = ffi.new("exon_udp_addr_t *")
    assert lib.exon_udp_addr_resolve(addr, host.encode(), port) == 0
    return addr


def _text(addr: object) -> str:
    buf = ffi.new("char[]", 64)
    lib.exon_udp_addr_format(addr, buf, 64)
    return ffi.string(buf).decode()


@pytest.mark.parametrize(("host", "multicast"), [
    ("224.0.0.1", True), ("239.255.255.255", True), ("223.255.255.255", False),
    ("240.0.0.1", False), ("127.0.0.1", False), ("::1", False),
])
def test_is_multicast(host: str, multicast: bool) -> None:
    assert lib.exon_udp_addr_is_multicast(_addr(host)) == multicast


def test_control_group_is_the_odd_data_group_plus_one() -> None:
    control = ffi.new("exon_udp_addr_t *")
    assert lib.exon_udp_multicast_control_addr(_addr("224.0.1.1", 40456), control) == 0
    assert _text(control) == "224.0.1.2:40456"
    assert lib.exon_udp_multicast_control_addr(_addr("239.1.2.3", 9), control) == 0
    assert _text(control) == "239.1.2.4:9"
    assert (lib.exon_udp_multicast_control_addr(_addr("224.0.1.2", 40456), control)
            == lib.EXON_E_ARGUMENT)


def test_interface_lookup() -> None:
    out = ffi.new("exon_udp_addr_t *")
    name = ffi.new("char[]", 32)
    assert lib.exon_udp_interface_resolve(b"127.0.0.1", out, name, 32) == 0
    assert _text(out) == "127.0.0.1:0"
    assert ffi.string(name) == b"lo"
    assert lib.exon_udp_interface_resolve(b"127.9.9.9/8", out, name, 32) == 0  # a prefix search
    assert _text(out) == "127.0.0.1:0"
    assert lib.exon_udp_interface_resolve(b"10.254.254.253", out, name, 32) == lib.EXON_E_ARGUMENT
    assert lib.exon_udp_interface_resolve(b"eth0", out, name, 32) == lib.EXON_E_ARGUMENT
    assert lib.exon_udp_interface_resolve(b"127.0.0.1/33", out, name, 32) == lib.EXON_E_ARGUMENT


@pytest.fixture
def client() -> Iterator[Aeron]:
    with MediaDriver.launch(dir=unique_dir("mcbad"), dir_delete_on_shutdown=True) as driver, \
            Aeron.connect(driver.dir, timeout=5.0) as aeron:
        yield aeron


@pytest.mark.parametrize(("channel", "words"), [
    (f"aeron:udp?endpoint={GROUP}|interface=10.254.254.253",
     "interface=10.254.254.253 matches no local interface"),
    (f"aeron:udp?endpoint={GROUP}|interface=10.254.254.0/24",
     "interface=10.254.254.0/24 matches no local interface"),
    (f"aeron:udp?endpoint={GROUP}|interface=eth0", "interface=eth0: not an IPv4 address"),
    ("aeron:udp?endpoint=224.0.1.2:40456", "multicast data address must be odd"),
    ("aeron:udp?endpoint=224.0.1.1:0", "endpoint port"),
    (f"aeron:udp?endpoint={GROUP}|control=127.0.0.1:5000", "control="),
    ("aeron:udp?endpoint=127.0.0.1:40456|ttl=4", "ttl= applies to a multicast endpoint only"),
    ("aeron:udp?endpoint=127.0.0.1:40456|fc=min", "fc= applies to a multicast endpoint only"),
    (f"aeron:udp?endpoint={GROUP}|fc=tagged", "fc"),
])
@pytest.mark.parametrize("kind", ["publication", "subscription"])
def test_bad_multicast_channel_is_a_configuration_error(
    client: Aeron, channel: str, words: str, kind: str
) -> None:
    add = client.add_publication if kind == "publication" else client.add_subscription
    if kind == "subscription" and words == "endpoint port":
        words = "a multicast endpoint needs a port"
    if kind == "subscription" and words == "control=":
        words = "on a subscription is not supported"
    with pytest.raises(ConfigurationError, match=words.replace("?", r"\?").replace("|", r"\|")):
        add(channel, 1)
    # the driver is unharmed: the next command works
    assert client.add_publication("aeron:ipc", 2).stream_id == 2


def test_fc_grammar_error_names_the_part(client: Aeron) -> None:
    bad = f"aeron:udp?endpoint={GROUP}|fc=min,t:soon"
    with pytest.raises(ChannelUriError, match=r"expected min, max or min,t:DURATION \[fc\]"):
        client.add_publication(bad, 1)
    with pytest.raises(ChannelUriError) as info:
        channel.parse(bad)
    assert info.value.part == "fc"  # type: ignore[attr-defined]
    good = channel.parse(f"aeron:udp?endpoint={GROUP}|fc=min,t:500ms")
    assert (good.fc, good.fc_timeout_ns) == ("min", 500_000_000)


# ---- loopback (no root: interface=127.0.0.1 needs no multicast route) -----------------


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.net
def test_loopback_group_reaches_every_driver() -> None:
    """Two drivers on this host subscribe to one group on lo; one publication reaches both
    (each datagram sent once, looped back to both sockets), and both receivers' SMs reach
    it on the control group."""
    group = f"aeron:udp?endpoint=239.255.0.{2 * (_free_port() % 120) + 1}:{_free_port()}"
    channel = f"{group}|interface=127.0.0.1|term-length=64k"
    with MediaDriver.launch(dir=unique_dir("mclo"), dir_delete_on_shutdown=True) as d1, \
            MediaDriver.launch(dir=unique_dir("mclo"), dir_delete_on_shutdown=True) as d2, \
            Aeron.connect(d1.dir, timeout=5.0) as c1, Aeron.connect(d2.dir, timeout=5.0) as c2:
        subs = [c1.add_subscription(channel, 5), c2.add_subscription(channel, 5)]
        pub = c1.add_publication(channel, 5)
        deadline = time.monotonic() + 10
        while not pub.is_connected and time.monotonic() < deadline:
            time.sleep(0.005)
        assert pub.is_connected
        n, sent = 3000, 0
        got: list[list[bytes]] = [[], []]
        while (len(got[0]) < n or len(got[1]) < n) and time.monotonic() < deadline + 20:
            if sent < n and pub.offer(b"m%d" % sent) > 0:
                sent += 1
            for i, sub in enumerate(subs):
                sub.poll(lambda data, _h, i=i: got[i].append(bytes(data)), 64)
        expected = [b"m%d" % i for i in range(n)]
        assert got == [expected, expected]
        for sub in subs:
            assert len(sub.images) == 1
            assert sub.images[0].source_identity.startswith("127.0.0.1:")
        invalid = c1.counter_value(SystemCounter.INVALID_PACKETS) + c2.counter_value(
            SystemCounter.INVALID_PACKETS)
        assert invalid == 0
        # SMs of both drivers' images arrived (each sends at least its first at once)
        assert c1.counter_value(SystemCounter.STATUS_MESSAGES_RECEIVED) >= 2


# ---- namespaces ----------------------------------------------------------------------

N = 5000
CHANNEL = f"aeron:udp?endpoint={GROUP}|interface=10.78.0.0/24|term-length=1m"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[MulticastLab]:
    with built_lab(tmp_path, hosts=4) as built:
        yield built


def _joined_from_the_start(subs: list[Peer]) -> None:
    """Wait until every subscriber has its image and its driver has sent the publisher a
    status message, before anything is sent. The publisher counts as connected at the
    first receiver's SM and from then on sends SETUP only when asked: a receiver that lost
    the first SETUPs (the loss rules drop them too) or was slow to make its image joins,
    as in Aeron, where the stream is by then, and never sees what came before (it once
    started 286 messages late on a loaded machine). And fc=min paces the publisher by the
    receivers it has heard from: a receiver whose first SM comes late (its agent starved
    on a loaded machine) may find the publisher more than a term past data it lost, which
    no NAK brings back, and stall it for good (seen once: 1416 of 5000 sent)."""
    for sub in subs:
        joined = sub.ok("joined", wait=20)
        assert (joined["joined"], joined["join_position"]) == (True, 0), joined
        assert joined["sm_sent_since"] > 0, joined


@pytest.mark.netns
@pytest.mark.net
def test_one_publisher_three_namespaces_one_lossy(lab: MulticastLab) -> None:
    """Host 0 publishes to the group; hosts 1-3 subscribe; host 3 drops 5% of the UDP it
    receives. Under the default flow control (fc=min: the slowest receiver paces the
    publisher) every subscriber gets all N messages, in order and intact: host 3 by NAKs to
    the control group and retransmits to the data group."""
    lab.loss(3, 5)
    subs = [lab.peer(host, "sub", CHANNEL) for host in (1, 2, 3)]
    assert all(sub.ready["bound"] == GROUP for sub in subs)
    pub = lab.peer(0, "pub", CHANNEL)
    assert pub.ok("connect", wait=10)["connected"]
    _joined_from_the_start(subs)
    assert pub.ok("send", wait=60, count=N)["sent"] == N
    results = [sub.ok("wait", wait=60, count=N) for sub in subs]
    for host, result in zip((1, 2, 3), results, strict=True):
        assert result["received"] == N, (host, result)
        assert result["bad"] == 0, (host, result)
    assert lab.dropped(3) > 0
    assert results[2]["naks_sent"] > 0
    assert results[0]["naks_sent"] == 0
    assert results[1]["naks_sent"] == 0
    final = pub.ok("send", wait=5, count=0)
    assert final["naks_received"] > 0
    assert final["retransmits_sent"] > 0
    # every receiver's SMs reached the one publisher on the control group
    assert final["status_messages_received"] >= 3


@pytest.mark.netns
@pytest.mark.net
def test_fc_max_is_paced_by_the_fastest_receiver(lab: MulticastLab) -> None:
    """fc=max: the publisher follows the fastest receiver and does not wait for the others:
    it finishes, the fastest subscriber gets everything, and a slower one (host 3 also
    loses 5%) gets an intact, in-order prefix; data sent beyond its window while it lagged
    is dropped there, and whatever the publisher no longer holds is gone, as in Aeron."""
    lab.loss(3, 5)
    channel = f"{CHANNEL}|fc=max"
    subs = [lab.peer(host, "sub", channel) for host in (1, 2, 3)]
    pub = lab.peer(0, "pub", channel)
    assert pub.ok("connect", wait=10)["connected"]
    _joined_from_the_start(subs)
    assert pub.ok("send", wait=60, count=N)["sent"] == N
    first = subs[0].ok("wait", wait=20, count=N)
    results = [first] + [sub.ok("wait", wait=1, count=N) for sub in subs[1:]]
    assert max(r["received"] for r in results) == N, results
    assert all(r["bad"] == 0 for r in results), results


@pytest.mark.netns
@pytest.mark.net
def test_fc_min_waits_for_a_stalled_receiver_until_it_times_out(lab: MulticastLab) -> None:
    """fc=min,t:500ms: a subscriber that stops reading holds the publisher back (its window
    closes); once that subscriber's driver is gone its SMs stop, the publisher drops it
    after the timeout and finishes; the other subscriber gets everything, in order."""
    channel = f"{CHANNEL}|fc=min,t:500ms"
    steady, stalled = lab.peer(1, "sub", channel), lab.peer(2, "sub", channel)
    pub = lab.peer(0, "pub", channel)
    assert pub.ok("connect", wait=10)["connected"]
    _joined_from_the_start([steady, stalled])
    stalled.ok("pause", wait=5)
    # the stalled receiver's window (at most half a 1 MiB term) stops the publisher well
    # before N messages (about 8.5 MiB)
    first = pub.ok("send", wait=3, count=N)["sent"]
    assert 0 < first < N
    stalled.close()
    rest = pub.ok("send", wait=30, start=first, count=N - first)["sent"]
    assert first + rest == N
    result = steady.ok("wait", wait=30, count=N)
    assert (result["received"], result["bad"]) == (N, 0), result


@pytest.mark.netns
@pytest.mark.net
def test_receivers_that_lose_the_same_datagrams_mostly_share_one_nak(lab: MulticastLab) -> None:
    """The bridge drops 5% of what the publisher sends, so all three receivers see the same
    gaps. Each waits a random delay (exon_feedback_delay) before NAKing; the first NAK's
    retransmit fills the others' gaps, so the NAKs sent in all stay well below one per
    receiver per gap."""
    lab.loss_from(0, 5)
    subs = [lab.peer(host, "sub", CHANNEL) for host in (1, 2, 3)]
    pub = lab.peer(0, "pub", CHANNEL)
    assert pub.ok("connect", wait=10)["connected"]
    _joined_from_the_start(subs)
    assert pub.ok("send", wait=60, count=N)["sent"] == N
    results = [sub.ok("wait", wait=60, count=N) for sub in subs]
    assert [(r["received"], r["bad"]) for r in results] == [(N, 0)] * 3, results
    final = pub.ok("send", wait=5, count=0)
    naks = sum(r["naks_sent"] for r in results)
    assert lab.dropped(None) > 0
    print(f"dropped {lab.dropped(None)} naks {naks} retransmits {final['retransmits_sent']}")
    assert final["retransmits_sent"] > 0
    # about 2.2 with a static delay, 3 with none (one NAK per receiver per gap); a loaded
    # machine delays the timers and suppresses less (1.79 was seen in a full suite run)
    assert naks < 2.0 * final["retransmits_sent"]


@pytest.mark.netns
def test_group_without_a_route_is_a_driver_error_not_a_crash(lab: MulticastLab) -> None:
    """No route for 224.0.0.0/4 and no interface=: the kernel cannot pick an interface to
    join on; the subscription is refused with an error that says what failed (and the
    publication, which needs no membership of the data group, still opens)."""
    from tests.chaos.netns import _run

    _run("ip", "-n", lab.ns[0], "route", "del", "224.0.0.0/4")
    script = (
        "import tempfile\n"
        "from exon.errors import DriverError\n"
        "from exon.transport.aeron import Aeron, MediaDriver\n"
        "ch = 'aeron:udp?endpoint=224.0.1.1:40456'\n"
        "with MediaDriver.launch(dir=tempfile.mkdtemp(dir='/dev/shm'),"
        " dir_delete_on_shutdown=True) as d, Aeron.connect(d.dir) as a:\n"
        "    try:\n"
        "        a.add_subscription(ch, 1)\n"
        "    except DriverError as exc:\n"
        "        print('REFUSED', exc)\n"
        "    a.add_publication('aeron:ipc', 2)\n"
        "    print('DRIVER OK')\n")
    proc = lab.popen(0, [sys.executable, "-c", script], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "REFUSED" in out, out
    assert "IP_ADD_MEMBERSHIP" in out, out
    assert "224.0.1.1:40456" in out, out
    assert out.strip().endswith("DRIVER OK")
