"""The Noise IX handshake and the transport seal, against the reference implementation
(``noiseprotocol`` on ``cryptography``, when installed) and on their own (issue 28)."""

from __future__ import annotations

import os

import pytest

from exon.crypto import libcrypto, seal
from exon.crypto.noise import HandshakeError, HandshakeState, protocol_name
from exon.crypto.seal import TransportSeal, rekey

pytestmark = pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing")

AD, OTHER = bytes(20), bytes(range(20))  # a frame header's 20 bytes


def _ours(initiator: bool, secret: bytes, prologue: bytes = b"p",
          cipher: str = "ChaChaPoly") -> HandshakeState:
    return HandshakeState(initiator=initiator, static_secret=secret, prologue=prologue,
                          cipher=cipher)


def test_protocol_names_are_noise_names() -> None:
    assert protocol_name("ChaChaPoly") == b"Noise_IX_25519_ChaChaPoly_SHA256"
    assert protocol_name("AESGCM") == b"Noise_IX_25519_AESGCM_SHA256"
    with pytest.raises(ValueError, match="unknown cipher"):
        protocol_name("AESGCMSIV")


@pytest.mark.parametrize("cipher", ["ChaChaPoly", "AESGCM"])
@pytest.mark.parametrize("we_initiate", [True, False])
def test_interoperates_with_the_reference_noise_implementation(we_initiate: bool,
                                                               cipher: str) -> None:
    connection = pytest.importorskip("noise.connection", reason="noiseprotocol not installed")
    ours_secret, theirs_secret = os.urandom(32), os.urandom(32)
    theirs = connection.NoiseConnection.from_name(protocol_name(cipher))
    (theirs.set_as_responder if we_initiate else theirs.set_as_initiator)()
    theirs.set_keypair_from_private_bytes(connection.Keypair.STATIC, theirs_secret)
    theirs.set_prologue(b"p")
    theirs.start_handshake()
    ours = _ours(we_initiate, ours_secret, cipher=cipher)
    if we_initiate:
        assert theirs.read_message(ours.write_message1(b"one")) == b"one"
        assert ours.read_message2(theirs.write_message(b"two")) == b"two"
    else:
        assert ours.read_message1(theirs.write_message(b"one")) == b"one"
        assert theirs.read_message(ours.write_message2(b"two")) == b"two"
    send, recv = ours.split()
    aes = cipher == "AESGCM"
    assert libcrypto.aead_open(recv, 0, b"", theirs.encrypt(b"to us"), aes=aes) == b"to us"
    assert theirs.decrypt(libcrypto.aead_seal(send, 0, b"", b"to them", aes=aes)) == b"to them"
    assert ours.remote_static == libcrypto.x25519_public(theirs_secret)


def test_a_cipher_changes_the_handshake_hash() -> None:
    """Both sides must agree on the cipher: the responder's choice is bound into the hash
    (the protocol name), so a different one never completes."""
    i = _ours(True, os.urandom(32), cipher="AESGCM")
    r = _ours(False, os.urandom(32), cipher="ChaChaPoly")
    r.read_message1(i.write_message1(b""))
    with pytest.raises(HandshakeError):
        i.read_message2(r.write_message2(b""))


def test_both_sides_agree_and_keys_differ_per_direction_and_per_handshake() -> None:
    a_secret, b_secret = os.urandom(32), os.urandom(32)
    keys = []
    for _ in range(2):
        i, r = _ours(True, a_secret), _ours(False, b_secret)
        r.read_message1(i.write_message1(b""))
        i.read_message2(r.write_message2(b""))
        mine, theirs = i.split(), r.split()
        assert mine == tuple(reversed(theirs))
        assert mine[0] != mine[1]
        with pytest.raises(HandshakeError):
            i.split()  # once: the ephemeral secret is gone
        keys.append(mine)
    assert keys[0] != keys[1]  # fresh ephemerals: forward secrecy per link


def test_different_prologues_do_not_complete() -> None:
    i, r = _ours(True, os.urandom(32), b"a"), _ours(False, os.urandom(32), b"b")
    r.read_message1(i.write_message1(b""))
    with pytest.raises(HandshakeError):
        i.read_message2(r.write_message2(b""))


def test_message2_for_another_message1_does_not_read() -> None:
    secret = os.urandom(32)
    first, second = _ours(True, secret), _ours(True, secret)
    r = _ours(False, os.urandom(32))
    first.write_message1(b"")
    r.read_message1(second.write_message1(b""))
    with pytest.raises(HandshakeError):
        first.read_message2(r.write_message2(b""))


def test_out_of_turn_calls_raise() -> None:
    i = _ours(True, os.urandom(32))
    with pytest.raises(HandshakeError):
        i.read_message1(bytes(64))
    with pytest.raises(HandshakeError):
        i.split()


def test_low_order_peer_key_is_refused() -> None:
    i, r = _ours(True, os.urandom(32)), _ours(False, os.urandom(32))
    message = bytearray(i.write_message1(b""))
    message[:32] = bytes(32)  # an all-zero ephemeral: X25519 gives zeros, refused
    r.read_message1(bytes(message))
    with pytest.raises(HandshakeError):
        r.write_message2(b"")


def test_seal_counts_refuses_replays_and_rekeys_in_step() -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    a, b = TransportSeal(k1, k2, rekey_shift=2), TransportSeal(k2, k1, rekey_shift=2)
    sealed = [a.seal(AD, b"m%d" % n) for n in range(20)]  # 5 keys
    assert b.open(AD, sealed[0]) == b"m0"
    assert b.open(AD, sealed[0]) is None  # replay
    assert b.open(OTHER, sealed[1]) is None  # other associated data
    assert [b.open(AD, s) for s in sealed[1:]] == [b"m%d" % n for n in range(1, 20)]
    assert b.failures == 2
    assert sealed[4][8:] != TransportSeal(k1, k2, rekey_shift=2).seal(AD, b"m4")[8:]


def test_seal_accepts_gaps_but_not_a_jump_of_two_keys() -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    a, b = TransportSeal(k1, k2, rekey_shift=2), TransportSeal(k2, k1, rekey_shift=2)
    sealed = [a.seal(AD, b"%d" % n) for n in range(16)]
    assert b.open(AD, sealed[5]) == b"5"  # a gap within the next key: fine
    assert b.open(AD, sealed[15]) is None  # two keys ahead: refused
    assert b.open(AD, sealed[6]) == b"6"


@pytest.mark.parametrize("cipher", [seal.CHACHAPOLY, seal.AESGCM])
def test_rekey_is_nonces_max_encryption(cipher: str) -> None:
    key = os.urandom(32)
    aes = cipher == seal.AESGCM
    assert rekey(key, cipher) == libcrypto.aead_seal(key, 2**64 - 1, b"", bytes(32),
                                                     aes=aes)[:32]
    assert rekey(key, cipher) != key
    assert rekey(key, seal.AESGCM) != rekey(key, seal.CHACHAPOLY)


def test_native_seal_is_chacha20_poly1305_with_noise_nonces() -> None:
    """The C seal against an independent implementation (``cryptography``)."""
    aead = pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")
    k1, k2 = os.urandom(32), os.urandom(32)
    a = TransportSeal(k1, k2)
    for n, payload in enumerate([b"", b"x", os.urandom(1000)]):
        sealed = a.seal(OTHER, payload)
        nonce = bytes(4) + n.to_bytes(8, "little")
        assert sealed[:8] == n.to_bytes(8, "little")
        assert sealed[8:] == aead.ChaCha20Poly1305(k1).encrypt(nonce, payload, OTHER)
