"""The cipher negotiation of encrypted links (docs/protocol.md 2.20): AESGCM when both
sides have hardware AES, ChaChaPoly when either lacks it, and no downgrade: an on-path
change of the offer (message 1) or of the choice (message 2) never gives a link."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from exon.core.events import LinkEstablished, LinkRefused, MessageReceived
from exon.core.frames import FrameType, decode_frame
from exon.core.socket_core import SocketCore
from exon.crypto import EncryptedPolicy, Keypair, libcrypto, seal
from exon.crypto.policy import CIPHER_BITS, choose_cipher
from exon.crypto.seal import AESGCM, CHACHAPOLY
from exon.errors import EncryptionUnavailable
from tests.core.helpers import make_core

pytestmark = pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing")
needs_aes = pytest.mark.skipif(not seal.aes_available(), reason="no hardware AES here")

SERVER, CLIENT = Keypair.generate(), Keypair.generate()
Tamper = Callable[[bytes], bytes]


def _noise_field(frame: bytes) -> bytes | None:
    decoded = decode_frame(frame)
    if decoded.type not in (FrameType.LINK, FrameType.LINKACK) or decoded.metadata is None:
        return None
    field = decoded.metadata.custom.get("noise")
    return field if isinstance(field, bytes) else None


def _rewrite(frame: bytes, kind: int, byte: int) -> bytes:
    """The frame with its handshake message's cipher byte (offer or choice) set to
    ``byte``, when it carries handshake message ``kind``."""
    field = _noise_field(frame)
    if field is None or field[0] != kind:
        return frame
    changed = field[:1] + bytes([byte]) + field[2:]
    assert frame.count(field) == 1
    return frame.replace(field, changed)


def _run(client_ciphers: tuple[str, ...] | None, server_ciphers: tuple[str, ...] | None,
         tamper: Tamper = lambda frame: frame):
    """A PUSH (client) links to a PULL (server), every frame from A to B and back through
    ``tamper``; returns both cores and both policies."""
    a, b = make_core("A"), make_core("B")
    client = EncryptedPolicy(CLIENT, peer_key=SERVER.public, ciphers=client_ciphers)
    server = EncryptedPolicy(SERVER, trusted=[CLIENT.public], ciphers=server_ciphers)
    a.open_socket(1, "push", policy=client)
    b.open_socket(2, "pull", policy=server)
    a.link(1, ("B", 2), now=0)
    cores: dict[str, SocketCore] = {"A": a, "B": b}
    for _ in range(100):
        batch = [(src, addr, data) for src, core in cores.items()
                 for addr, data in core.frames_to_send(now=0)]
        if not batch:
            break
        for src, addr, data in batch:
            cores[addr].receive_frame(src, tamper(data), now=0)
    return a, b, client, server


def _established(core: SocketCore) -> bool:
    return any(isinstance(e, LinkEstablished) for e in core.events())


def _refusal(core: SocketCore) -> LinkRefused:
    (refused,) = [e for e in core.events() if isinstance(e, LinkRefused)]
    return refused


class _Rewriter:
    """A tamper function that sets one handshake message's cipher byte, counting frames
    it changed."""

    def __init__(self, kind: int, byte: int) -> None:
        self.kind, self.byte, self.changed = kind, byte, 0

    def __call__(self, frame: bytes) -> bytes:
        out = _rewrite(frame, self.kind, self.byte)
        self.changed += out != frame
        return out


def _send_one(a: SocketCore, b: SocketCore) -> list[bytes]:
    a.send(1, b"after the handshake", now=0)
    for _, data in a.frames_to_send(now=0):
        b.receive_frame("A", data, now=0)
    return [e.payload for e in b.events() if isinstance(e, MessageReceived)]


@needs_aes
def test_both_sides_with_aes_choose_aesgcm() -> None:
    a, b, client, server = _run(None, None)
    assert _established(a)
    assert _established(b)
    assert client.negotiated() == server.negotiated() == {AESGCM: 1, CHACHAPOLY: 0}
    assert _send_one(a, b) == [b"after the handshake"]


@pytest.mark.parametrize("without_aes", ["client", "server"])
def test_a_side_without_aes_falls_back_to_chachapoly(without_aes: str) -> None:
    chacha = (CHACHAPOLY,)
    a, b, client, server = _run(chacha if without_aes == "client" else None,
                                chacha if without_aes == "server" else None)
    assert _established(a)
    assert _established(b)
    assert client.negotiated() == server.negotiated() == {AESGCM: 0, CHACHAPOLY: 1}
    assert _send_one(a, b) == [b"after the handshake"]


def test_a_host_without_aes_offers_only_chachapoly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seal, "aes_available", lambda: False)
    assert seal.local_ciphers() == (CHACHAPOLY,)
    assert EncryptedPolicy(CLIENT, peer_key=SERVER.public).ciphers == (CHACHAPOLY,)
    monkeypatch.setattr("exon.crypto.policy.aes_available", lambda: False)
    with pytest.raises(EncryptionUnavailable, match="hardware AES"):
        EncryptedPolicy(CLIENT, peer_key=SERVER.public, ciphers=(AESGCM, CHACHAPOLY))


@needs_aes
def test_no_cipher_in_common_is_refused() -> None:
    a, b, client, server = _run((AESGCM,), (CHACHAPOLY,))
    refused = _refusal(a)
    assert (refused.decision.name, refused.permanent, refused.by_peer) == (
        "UNAUTHORIZED", True, True)
    assert "no cipher in common" in refused.reason
    assert not _established(b)
    assert client.negotiated() == server.negotiated() == {AESGCM: 0, CHACHAPOLY: 0}


@needs_aes
@pytest.mark.parametrize("offer", [CIPHER_BITS[CHACHAPOLY], 0x03 | 0x80])
def test_a_changed_offer_never_links(offer: int) -> None:
    """An on-path attacker strips AESGCM from the offer (a downgrade) or adds a bit: the
    offer is in the prologue, so the initiator's message 2 does not authenticate."""
    tamper = _Rewriter(1, offer)
    a, b, client, _ = _run(None, None, tamper)
    assert tamper.changed >= 1
    refused = _refusal(a)
    assert (refused.decision.name, refused.permanent) == ("UNAUTHORIZED", True)
    assert "does not authenticate" in refused.reason
    assert not _established(b)
    assert client.negotiated() == {AESGCM: 0, CHACHAPOLY: 0}
    # and the unchanged handshake still links afterwards
    a2, b2, _, _ = _run(None, None)
    assert _established(a2)
    assert _established(b2)


@needs_aes
@pytest.mark.parametrize("choice", [CIPHER_BITS[CHACHAPOLY], 0x03, 0x04, 0x00])
def test_a_changed_choice_never_links(choice: int) -> None:
    """The responder chose AESGCM; the attacker rewrites message 2's choice: ChaChaPoly
    (offered, but the protocol name differs, so the hash does) or a choice never offered."""
    tamper = _Rewriter(2, choice)
    a, b, client, _ = _run(None, None, tamper)
    assert tamper.changed >= 1
    refused = _refusal(a)
    assert refused.decision.name == "UNAUTHORIZED"
    assert ("does not authenticate" in refused.reason if choice == CIPHER_BITS[CHACHAPOLY]
            else "not offered" in refused.reason)
    assert not _established(b)
    assert client.negotiated() == {AESGCM: 0, CHACHAPOLY: 0}


def test_choose_cipher_prefers_the_responders_order() -> None:
    both = CIPHER_BITS[AESGCM] | CIPHER_BITS[CHACHAPOLY]
    assert choose_cipher(both, (AESGCM, CHACHAPOLY)) == AESGCM
    assert choose_cipher(both, (CHACHAPOLY, AESGCM)) == CHACHAPOLY
    assert choose_cipher(CIPHER_BITS[CHACHAPOLY], (AESGCM, CHACHAPOLY)) == CHACHAPOLY
    assert choose_cipher(0x80, (AESGCM, CHACHAPOLY)) is None


def test_bad_cipher_lists_are_refused() -> None:
    for ciphers in ((), ("AES128",), (CHACHAPOLY, CHACHAPOLY)):
        with pytest.raises(ValueError, match="ciphers"):
            EncryptedPolicy(CLIENT, peer_key=SERVER.public, ciphers=ciphers)


@needs_aes
def test_the_initiator_keeps_no_unchosen_handshake_state() -> None:
    """Forward secrecy: once message 2 chose, the other offered state (which holds the
    same ephemeral secret) is dropped, as Noise deletes a HandshakeState after Split()."""
    _, _, client, _ = _run(None, None)
    (attempt,) = client._attempts.values()
    assert attempt.offered is None
    assert attempt.state.cipher == AESGCM
