"""Issue 28 on the wire: two nodes with their own embedded drivers talk UDP on loopback while
an ``AF_PACKET`` socket reads every packet of ``lo`` (root only).

* plaintext: the marker is seen (the capture works);
* encrypted: neither the marker nor any 12-byte piece of any payload is seen;
* captured datagrams of an encrypted link, replayed as they are and injected as a new Aeron
  stream claiming the sender's address, deliver nothing twice and nothing changed, and the
  receiver's ``unopened_dropped`` moves.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

import exon
from exon.crypto import libcrypto
from exon.middleware.node_transport import UDP_STREAM_ID, encode_hello
from exon.transport.aeron import frames as F
from tests.sockets.helpers import udp_nodes_with

pytestmark = [
    pytest.mark.net,
    pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing"),
    pytest.mark.skipif(not hasattr(socket, "AF_PACKET") or os.geteuid() != 0,
                       reason="reading lo with AF_PACKET needs Linux and root"),
]

SMALL = {"ipc_term_buffer_length": 1024 * 1024, "term_buffer_length": 1024 * 1024}
MARKER = b"EXON-WIRE-MARKER-7f3a"
ETH_P_ALL = 0x0003
ETH_HEADER = 14


class Capture:
    """Every packet of ``lo`` while it runs: (IPv4 UDP destination port, UDP payload)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.05)
        self.packets: list[tuple[int, bytes]] = []
        self.raw: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 60
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                frame, addr = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            if addr[2] == socket.PACKET_OUTGOING:
                continue  # lo shows each packet twice: keep the incoming copy
            self.raw.append(frame)
            ip = frame[ETH_HEADER:]
            if len(ip) < 28 or ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_UDP:
                continue
            ihl = (ip[0] & 0x0F) * 4
            dport = struct.unpack_from("!H", ip, ihl + 2)[0]
            self.packets.append((dport, bytes(ip[ihl + 8:])))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def seen(self, needle: bytes) -> bool:
        return any(needle in frame for frame in self.raw)


@pytest.fixture
def udp_nodes() -> Iterator[object]:
    yield from udp_nodes_with(SMALL)


def _payloads(n: int) -> list[bytes]:
    return [MARKER + os.urandom(24) + b"%05d" % i + os.urandom(19) for i in range(n)]


def _exchange(udp_nodes, policies: tuple[object, object] | None, payloads: list[bytes]):
    a, b = udp_nodes(), udp_nodes()
    server, client = (None, None) if policies is None else policies
    pull = b.socket("pull", tag=1, policy=server)
    push = a.socket("push", policy=client)
    capture = Capture()
    try:
        push.link(f"{b.address}/1", timeout=10)
        for p in payloads:
            push.send(p, timeout=5)
        got = [pull.receive(timeout=5).payload for _ in payloads]
        time.sleep(0.2)  # the last FLOWs
    finally:
        capture.stop()
    return a, b, push, pull, got, capture


def _policies():
    server, client = exon.Keypair.generate(), exon.Keypair.generate()
    return (exon.EncryptedPolicy(server, trusted=[client.public]),
            exon.EncryptedPolicy(client, peer_key=server.public))


def test_plaintext_marker_is_seen_on_the_wire(udp_nodes) -> None:
    payloads = _payloads(20)
    *_, got, capture = _exchange(udp_nodes, None, payloads)
    assert got == payloads
    assert capture.seen(MARKER)


def test_encrypted_link_shows_no_marker_and_no_payload_bytes(udp_nodes) -> None:
    payloads = _payloads(50)
    *_, got, capture = _exchange(udp_nodes, _policies(), payloads)
    assert got == payloads
    assert capture.packets  # the capture saw the traffic
    assert not capture.seen(MARKER)
    for p in payloads:
        for i in range(0, len(p) - 12, 6):
            assert not capture.seen(p[i:i + 12]), (p, i)


def _exon_frames(datagram: bytes) -> list[bytes]:
    try:
        frames = F.split_datagram(datagram)
    except exon.ProtocolError:
        return []
    return [f.payload for f in frames if isinstance(f, F.DataFrame) and f.payload]


def test_replayed_and_injected_datagrams_deliver_nothing(udp_nodes) -> None:
    payloads = _payloads(30)
    a, b, push, pull, got, capture = _exchange(udp_nodes, _policies(), payloads)
    assert got == payloads
    port = int(b.address.rsplit(":", 1)[1])
    to_b = [d for dport, d in capture.packets if dport == port]
    sealed = [f for d in to_b for f in _exon_frames(d) if len(f) > 3 and f[2] == 0x03]
    assert sealed, "no sealed exon frame captured"
    before = b.statistics().unopened_dropped
    # 1. the datagrams again, as they were (Aeron takes them as duplicates)
    attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for d in to_b:
            attacker.sendto(d, ("127.0.0.1", port))
        # 2. a stream of our own claiming A's address, carrying the captured sealed frames
        session, term_id, offset = 0x5EED, 3, 0
        attacker.sendto(F.encode_setup(term_offset=0, session_id=session,
                                       stream_id=UDP_STREAM_ID, initial_term_id=term_id,
                                       active_term_id=term_id, term_length=SMALL[
                                           "term_buffer_length"], mtu=1408),
                        ("127.0.0.1", port))
        time.sleep(0.3)  # the image is made
        for payload in [encode_hello(a.address), *sealed]:
            frame = F.encode_data(flags=0xC0, term_offset=offset, session_id=session,
                                  stream_id=UDP_STREAM_ID, term_id=term_id, payload=payload)
            attacker.sendto(frame, ("127.0.0.1", port))
            offset += (len(payload) + 32 + 31) & ~31
        deadline = time.monotonic() + 5
        while b.statistics().unopened_dropped == before and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        attacker.close()
    assert b.statistics().unopened_dropped > before
    with pytest.raises(exon.Timeout):  # nothing delivered again
        pull.receive(timeout=0.5)
    push.send(b"after", timeout=5)  # the link goes on
    assert pull.receive(timeout=5).payload == b"after"
