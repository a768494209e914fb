"""The transport seal's two AEAD backends, OpenSSL's libcrypto and libsodium (PyNaCl's):
the same ChaCha20-Poly1305 byte for byte, so frames sealed by one open with the other,
and each refuses what the other refuses (issue 28)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from exon.crypto import libcrypto, seal
from exon.crypto.seal import TransportSeal, rekey
from exon.native import lib

pytestmark = [
    pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing"),
    pytest.mark.skipif(seal.backend() != "libsodium",
                       reason="PyNaCl (libsodium) not installed: only OpenSSL here"),
]

AD = bytes(range(20))
BACKENDS = {"openssl": lib.EXON_CRYPTO_OPENSSL, "libsodium": lib.EXON_CRYPTO_SODIUM}


@pytest.fixture
def use() -> Iterator[Callable[[str], None]]:
    """use(name): seal and open with that backend from now on; libsodium again after."""
    def switch(name: str) -> None:
        assert lib.exon_crypto_backend(BACKENDS[name]) == BACKENDS[name]
        assert seal.backend() == name

    yield switch
    lib.exon_crypto_backend(lib.EXON_CRYPTO_SODIUM)


@pytest.mark.parametrize(("sealer", "opener"),
                         [("openssl", "libsodium"), ("libsodium", "openssl")])
def test_frames_sealed_by_one_backend_open_with_the_other(
        use: Callable[[str], None], sealer: str, opener: str) -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    a, b = TransportSeal(k1, k2, rekey_shift=2), TransportSeal(k2, k1, rekey_shift=2)
    payloads = [os.urandom(n) for n in (0, 1, 16, 63, 64, 65, 1000, 4096)] * 2  # 4 keys
    use(sealer)
    sealed = [a.seal(AD, p) for p in payloads]
    use(opener)
    assert [b.open(AD, s) for s in sealed] == payloads
    assert (b.opened, b.failures) == (len(payloads), 0)


def test_both_backends_give_the_same_bytes_and_the_same_rekey(
        use: Callable[[str], None]) -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    out = {}
    for name in BACKENDS:
        use(name)
        a = TransportSeal(k1, k2, rekey_shift=1)  # a new key every 2 frames
        out[name] = ([a.seal(AD, b"frame %d" % n) for n in range(7)],
                     rekey(k1))
    assert out["openssl"] == out["libsodium"]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_each_backend_refuses_altered_replayed_and_foreign_frames(
        use: Callable[[str], None], name: str) -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    a, b = TransportSeal(k1, k2), TransportSeal(k2, k1)
    use(name)
    first, second = a.seal(AD, b"one"), a.seal(AD, b"two")
    altered = bytearray(second)
    altered[10] ^= 1
    assert b.open(AD, bytes(altered)) is None  # ciphertext changed
    assert b.open(bytes(20), second) is None  # another header
    assert b.open(AD, TransportSeal(os.urandom(32), k1).seal(AD, b"two")) is None
    assert b.open(AD, second[:-1]) is None  # tag cut
    assert b.open(AD, second) == b"two"  # the untouched frame still opens after all that
    assert b.open(AD, first) is None  # an older counter: replay
    assert b.open(AD, second) is None  # replay
    assert (b.opened, b.failures) == (1, 6)


_FRESH_PROCESS = """
import sys
from exon.crypto import seal
from exon.native import ffi, lib
for path in (b"/nonexistent/libsodium.so", b"libcrypto.so.3"):  # missing; no libsodium
    rc = lib.exon_crypto_use_sodium(path)
    print(rc == lib.EXON_E_UNAVAILABLE, path.decode() in ffi.string(lib.exon_last_error()).decode())
print(lib.exon_crypto_backend(-1) == lib.EXON_CRYPTO_OPENSSL)
print(lib.exon_crypto_backend(lib.EXON_CRYPTO_SODIUM) == lib.EXON_E_UNAVAILABLE)
print(seal.backend())  # the first seal picks PyNaCl's libsodium
"""


def test_a_library_that_is_no_libsodium_is_refused_and_openssl_stays() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], env=env, check=True,
                         capture_output=True, text=True, timeout=60).stdout.split()
    assert out == ["True", "True", "True", "True", "True", "True", "libsodium"]
