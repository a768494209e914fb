"""Encrypted links in the sans-IO core: bad input on the wire (issue 28).

Altered, truncated, replayed, injected and other links' frames are dropped and counted
(``unopened_dropped``), never delivered, and the link goes on; a handshake message cut at
every byte is refused, never a crash."""

from __future__ import annotations

import pytest

from exon.core.events import LinkEstablished, LinkRefused, MessageReceived
from exon.core.frames import HEADER_LENGTH, Decision, FrameType, encode_data, encode_flow
from exon.core.sealing import PROTOCOL_SEALED, is_sealed
from exon.crypto import EncryptedPolicy, Keypair, libcrypto
from tests.core.helpers import make_core, pump

pytestmark = pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing")

SERVER, CLIENT = Keypair.generate(), Keypair.generate()


def _pair(tag_a: int = 1):
    a, b = make_core("A"), make_core("B")
    a.open_socket(tag_a, "push", policy=EncryptedPolicy(CLIENT, peer_key=SERVER.public))
    b.open_socket(2, "pull", policy=EncryptedPolicy(SERVER, trusted=[CLIENT.public]))
    a.link(tag_a, ("B", 2), now=0)
    pump([a, b])
    assert any(isinstance(e, LinkEstablished) for e in a.events())
    assert any(isinstance(e, LinkEstablished) for e in b.events())
    return a, b


def _sent(core, tag: int, payload: bytes) -> bytes:
    core.send(tag, payload, now=0)
    ((_, data),) = core.frames_to_send(now=0)
    return data


def _received(core) -> list[bytes]:
    return [e.payload for e in core.events() if isinstance(e, MessageReceived)]


def test_data_travels_sealed_and_hides_the_payload() -> None:
    a, b = _pair()
    data = _sent(a, 1, b"MARKER-secret-payload")
    assert is_sealed(data)
    assert data[3] == FrameType.DATA
    assert b"MARKER" not in data
    b.receive_frame("A", data, now=0)
    assert _received(b) == [b"MARKER-secret-payload"]


def test_replayed_frame_is_dropped_and_counted() -> None:
    a, b = _pair()
    data = _sent(a, 1, b"once")
    b.receive_frame("A", data, now=0)
    b.receive_frame("A", data, now=0)
    assert _received(b) == [b"once"]
    assert b.statistics().unopened_dropped == 1
    b.receive_frame("A", _sent(a, 1, b"next"), now=0)  # the link goes on
    assert _received(b) == [b"next"]


@pytest.mark.parametrize("offset", [2, 3, 4, 9, 13, 17, HEADER_LENGTH, HEADER_LENGTH + 8, -1])
def test_altered_frame_is_dropped_and_the_link_goes_on(offset: int) -> None:
    a, b = _pair()
    data = bytearray(_sent(a, 1, b"payload bytes"))
    data[offset] ^= 0x01
    b.receive_frame("A", bytes(data), now=0)
    assert _received(b) == []
    assert b.statistics().unopened_dropped + b.statistics().malformed_dropped >= 1
    assert b.statistics().unopened_dropped >= (1 if offset != 2 else 0)
    b.receive_frame("A", _sent(a, 1, b"after"), now=0)
    assert _received(b) == [b"after"]


def test_truncated_frames_are_dropped_at_every_length() -> None:
    a, b = _pair()
    data = _sent(a, 1, b"some payload")
    for n in range(len(data)):
        b.receive_frame("A", data[:n], now=0)
    assert _received(b) == []
    b.receive_frame("A", data, now=0)
    assert _received(b) == [b"some payload"]


def test_plaintext_frames_are_refused_on_an_encrypted_link() -> None:
    _a, b = _pair()
    link = b._sockets[2].links[next(iter(b._sockets[2].links))]
    inc = link.peer_incarnation
    b.receive_frame("A", encode_data(1, 2, inc, b"injected"), now=0)
    b.receive_frame("A", encode_flow(1, 2, inc, 0, 10_000), now=0)
    assert _received(b) == []
    assert b.statistics().unopened_dropped == 2


def test_a_frame_of_another_link_does_not_open() -> None:
    a, b = _pair(tag_a=1)
    a.open_socket(3, "push", policy=EncryptedPolicy(CLIENT, peer_key=SERVER.public))
    a.link(3, ("B", 2), now=0)
    pump([a, b])
    a.events()
    b.events()
    other = bytearray(_sent(a, 3, b"for link 3"))
    other[8:12] = (1).to_bytes(4, "little")  # re-addressed as if from socket 1
    b.receive_frame("A", bytes(other), now=0)
    assert _received(b) == []
    assert b.statistics().unopened_dropped == 1


def test_forged_plaintext_acceptance_does_not_establish() -> None:
    """A replayed LINK gets an answer, but without the initiator's keys nobody can send the
    sealed LINKACK that completes the link; a plaintext one is dropped."""
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push", policy=EncryptedPolicy(CLIENT, peer_key=SERVER.public))
    b.open_socket(2, "pull", policy=EncryptedPolicy(SERVER, trusted=[CLIENT.public]))
    a.link(1, ("B", 2), now=0)
    ((_, link_frame),) = a.frames_to_send(now=0)
    c = make_core("B")  # a second responder: the same LINK, replayed to it
    c.open_socket(2, "pull", policy=EncryptedPolicy(SERVER, trusted=[CLIENT.public]))
    c.receive_frame("A", link_frame, now=0)
    ((_, answer),) = c.frames_to_send(now=0)
    from exon.core.frames import decode_frame, encode_linkack
    ack = decode_frame(answer)
    forged = encode_linkack(1, 2, 7, Decision.ACCEPTED, answers=ack.incarnation)
    c.receive_frame("A", forged, now=0)
    assert not any(isinstance(e, LinkEstablished) for e in c.events())
    assert c.statistics().unopened_dropped == 1


def test_the_same_link_replayed_to_the_same_socket_is_refused() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push", policy=EncryptedPolicy(CLIENT, peer_key=SERVER.public))
    b.open_socket(2, "pull", policy=EncryptedPolicy(SERVER, trusted=[CLIENT.public]))
    a.link(1, ("B", 2), now=0)
    ((_, link_frame),) = a.frames_to_send(now=0)
    pump([a, b])  # (nothing: the LINK was taken off A's queue) B never saw it
    b.receive_frame("A", link_frame, now=0)
    b.frames_to_send(now=0)
    b._sockets[2].links.clear()  # as if B had forgotten the attempt
    b.receive_frame("A", link_frame, now=0)
    ((_, answer),) = b.frames_to_send(now=0)
    from exon.core.frames import decode_frame
    assert decode_frame(answer).decision is Decision.UNAUTHORIZED


def test_handshake_messages_cut_at_every_byte_are_refused() -> None:
    a = make_core("A")
    a.open_socket(1, "push", policy=EncryptedPolicy(CLIENT, peer_key=SERVER.public))
    a.link(1, ("B", 2), now=0)
    ((_, link_frame),) = a.frames_to_send(now=0)
    from exon.core.frames import decode_frame, encode_link
    frame = decode_frame(link_frame)
    assert frame.metadata is not None
    message = frame.metadata.custom["noise"]
    for n in range(len(message)):
        core = make_core("B")
        core.open_socket(2, "pull", policy=EncryptedPolicy(SERVER, trusted=[CLIENT.public]))
        meta = frame.metadata.__class__(**{**{s: getattr(frame.metadata, s) for s in
                                              frame.metadata.__slots__},
                                           "custom": {"noise": message[:n]}})
        core.receive_frame("A", encode_link(1, 2, frame.incarnation, meta), now=0)
        ((_, answer),) = core.frames_to_send(now=0)
        assert decode_frame(answer).decision is Decision.UNAUTHORIZED
        assert not any(isinstance(e, LinkEstablished) for e in core.events())


def test_every_frame_after_the_handshake_is_sealed_including_unlink() -> None:
    a, b = _pair()
    for n in range(40):
        a.send(1, b"x%d" % n, now=0)
    seen: list[bytes] = []
    by = {"A": a, "B": b}
    a.unlink(1, ("B", 2), now=0)
    for _ in range(50):
        batch = [(c.reply_address, addr, d) for c in (a, b) for addr, d in c.frames_to_send(now=0)]
        if not batch:
            break
        for src, addr, d in batch:
            seen.append(d)
            by[addr].receive_frame(src, d, now=0)
        for m in [e for e in b.events() if isinstance(e, MessageReceived)]:
            b.deliver(m, now=0)
    kinds = {(d[2], d[3]) for d in seen}
    assert (PROTOCOL_SEALED, FrameType.UNLINK) in kinds
    assert (PROTOCOL_SEALED, FrameType.FLOW) in kinds
    assert all(d[2] == PROTOCOL_SEALED for d in seen)
    assert a.statistics().unopened_dropped == 0
    assert b.statistics().unopened_dropped == 0


def test_plaintext_socket_refuses_an_encrypted_link() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push", policy=EncryptedPolicy(CLIENT, peer_key=SERVER.public))
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    pump([a, b])
    refused = [e for e in a.events() if isinstance(e, LinkRefused)]
    assert refused
    assert refused[0].decision is Decision.UNAUTHORIZED
    assert refused[0].permanent


def test_handshake_message2_cut_at_every_byte_is_refused() -> None:
    a = make_core("A")
    a.open_socket(1, "push", policy=EncryptedPolicy(CLIENT, peer_key=SERVER.public))
    b = make_core("B")
    b.open_socket(2, "pull", policy=EncryptedPolicy(SERVER, trusted=[CLIENT.public]))
    a.link(1, ("B", 2), now=0)
    ((_, link_frame),) = a.frames_to_send(now=0)
    b.receive_frame("A", link_frame, now=0)
    ((_, answer),) = b.frames_to_send(now=0)
    from exon.core.frames import decode_frame, encode_linkack
    ack = decode_frame(answer)
    assert ack.metadata is not None
    message = ack.metadata.custom["noise"]
    meta = ack.metadata
    for n in range(len(message)):
        cut = meta.__class__(**{**{s: getattr(meta, s) for s in meta.__slots__},
                                "custom": {"noise": message[:n]}})
        core = make_core("A")  # a fresh initiator each time: same LINK, its own state
        policy = EncryptedPolicy(CLIENT, peer_key=SERVER.public)
        core.open_socket(1, "push", policy=policy)
        core.link(1, ("B", 2), now=0)
        ((_, own_link),) = core.frames_to_send(now=0)
        inc = decode_frame(own_link).incarnation
        core.receive_frame("B", encode_linkack(2, 1, ack.incarnation, Decision.ACCEPTED, cut,
                                               answers=inc), now=0)
        refused = [e for e in core.events() if isinstance(e, LinkRefused)]
        assert refused, n
        assert refused[0].decision is Decision.UNAUTHORIZED
