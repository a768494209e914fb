"""The transport seal with AES-256-GCM (issue 28's speed goals): Noise's AESGCM nonces
against an independent implementation, both backends alike, and the per-key data limit
that renews keys before AES-GCM's bound."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from exon.crypto import libcrypto, seal
from exon.crypto.seal import AESGCM, AESGCM_DATA_LIMIT, CHACHAPOLY, TransportSeal
from exon.native import lib

pytestmark = [
    pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing"),
    pytest.mark.skipif(not seal.aes_available(), reason="no hardware AES on this host"),
]

AD = bytes(range(20))
BACKENDS = [lib.EXON_CRYPTO_OPENSSL, lib.EXON_CRYPTO_SODIUM]


@pytest.fixture(params=BACKENDS, ids=["openssl", "libsodium"])
def backend(request: pytest.FixtureRequest) -> Iterator[int]:
    """Seal and open with one backend (libsodium skipped where it is not loaded)."""
    before = lib.exon_crypto_backend(-1)
    if request.param == lib.EXON_CRYPTO_SODIUM and seal.backend() != "libsodium":
        pytest.skip("PyNaCl (libsodium) not installed")
    assert lib.exon_crypto_backend(request.param) == request.param
    yield request.param
    lib.exon_crypto_backend(before)


def _pair(**options: object) -> tuple[TransportSeal, TransportSeal]:
    k1, k2 = os.urandom(32), os.urandom(32)
    return (TransportSeal(k1, k2, cipher=AESGCM, **options),  # type: ignore[arg-type]
            TransportSeal(k2, k1, cipher=AESGCM, **options))  # type: ignore[arg-type]


def test_aes_seal_is_aes_256_gcm_with_noise_big_endian_nonces(backend: int) -> None:
    aead = pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")
    k1, k2 = os.urandom(32), os.urandom(32)
    a = TransportSeal(k1, k2, cipher=AESGCM)
    for n, payload in enumerate([b"", b"x", os.urandom(64), os.urandom(1000)]):
        sealed = a.seal(AD, payload)
        assert sealed[:8] == n.to_bytes(8, "little")  # the wire's counter stays LE64
        nonce = bytes(4) + n.to_bytes(8, "big")  # Noise's AESGCM nonce
        assert sealed[8:] == aead.AESGCM(k1).encrypt(nonce, payload, AD)


def test_frames_sealed_by_one_backend_open_with_the_other() -> None:
    if seal.backend() != "libsodium":
        pytest.skip("PyNaCl (libsodium) not installed")
    try:
        for sealer, opener in (BACKENDS, BACKENDS[::-1]):
            a, b = _pair(rekey_shift=2)
            payloads = [os.urandom(n) for n in (0, 1, 16, 64, 1000, 4096)] * 2  # 3 keys
            lib.exon_crypto_backend(sealer)
            sealed = [a.seal(AD, p) for p in payloads]
            lib.exon_crypto_backend(opener)
            assert [b.open(AD, s) for s in sealed] == payloads
            assert (b.opened, b.failures) == (len(payloads), 0)
    finally:
        lib.exon_crypto_backend(lib.EXON_CRYPTO_SODIUM)


def test_aes_refuses_replays_alterations_and_other_ciphers(backend: int) -> None:
    a, b = _pair()
    first = a.seal(AD, b"one")
    assert b.open(AD, first) == b"one"
    assert b.open(AD, first) is None  # replayed
    altered = bytearray(a.seal(AD, b"two"))
    altered[12] ^= 1
    assert b.open(AD, bytes(altered)) is None
    assert b.open(bytes(20), a.seal(AD, b"three")) is None  # another header
    k1, k2 = os.urandom(32), os.urandom(32)
    chacha = TransportSeal(k1, k2, cipher=CHACHAPOLY)
    aes = TransportSeal(k2, k1, cipher=AESGCM)
    assert aes.open(AD, chacha.seal(AD, b"same keys, other cipher")) is None
    assert b.failures == 3
    assert aes.failures == 1
    assert b.open(AD, a.seal(AD, b"four")) == b"four"  # and the link goes on


def test_a_key_seals_at_most_its_data_limit_then_the_next_epoch_begins(backend: int) -> None:
    """AES-GCM's per-key data limit: past it the sender jumps to the first counter of the
    next epoch (a new key), and the receiver follows; the frame that would cross it goes
    under the next key."""
    a, b = _pair(rekey_shift=8, data_limit=100)
    counters = []
    for n in range(7):
        sealed = a.seal(AD, b"%02d" % n * 20)  # 40 bytes: 2 frames per key
        counters.append(int.from_bytes(sealed[:8], "little"))
        assert b.open(AD, sealed) == b"%02d" % n * 20
    assert counters == [0, 1, 256, 257, 512, 513, 768]
    assert a.native.send.epoch == b.native.recv.epoch == 3
    assert a.native.send.bytes == 40
    big = a.seal(AD, bytes(300))  # larger than the limit alone: a key of its own
    assert int.from_bytes(big[:8], "little") == 1024
    assert b.open(AD, big) == bytes(300)
    assert b.failures == 0


def test_default_data_limits() -> None:
    aes, chacha = _pair()[0], TransportSeal(os.urandom(32), os.urandom(32))
    assert aes.native.data_limit == AESGCM_DATA_LIMIT == 1 << 36
    assert chacha.native.data_limit == lib.EXON_SEAL_NO_DATA_LIMIT
    assert (aes.cipher, chacha.cipher) == (AESGCM, CHACHAPOLY)
    with pytest.raises(ValueError, match="unknown cipher"):
        TransportSeal(os.urandom(32), os.urandom(32), cipher="AES128")
    with pytest.raises(ValueError, match="data_limit"):
        TransportSeal(os.urandom(32), os.urandom(32), data_limit=0)


def test_the_data_limit_never_skips_past_the_last_counter() -> None:
    """rekey_shift 62: the epoch after 1 is past the counter's end, so a sender at its data
    limit in the last usable epoch gets an error, never a reused nonce."""
    a, _ = _pair(rekey_shift=62, data_limit=10)
    a.native.send.next = 3 << 62  # epoch 3 (the last)
    a.seal(AD, bytes(10))
    assert a.native.send.epoch == 3
    with pytest.raises(Exception, match="exhausted"):
        a.seal(AD, bytes(10))
