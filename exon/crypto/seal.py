"""The transport keys of one encrypted link: :class:`TransportSeal` (a ``LinkSeal``).

Per direction: a key from the handshake's split for the AEAD the handshake chose
(:data:`AESGCM`, AES-256-GCM, where both hosts have AES in hardware, else
:data:`CHACHAPOLY`, ChaCha20-Poly1305), and a 64-bit counter that is the nonce (Noise's
``0^32 || LE64(counter)`` for ChaChaPoly, ``0^32 || BE64(counter)`` for AESGCM). Frames
carry the counter, so the receiver needs no state but the next counter it accepts: a
frame whose counter is lower (a replay, or an older frame) or that does not authenticate
is refused and changes nothing.

Keys are renewed every ``2^rekey_shift`` frames per direction (2^32 by default): frame
``c`` is sealed with key ``epoch(c >> rekey_shift)``, where epoch 0 is the split's key and
each next one is Noise's ``REKEY(k) = ENCRYPT(k, 2^64 - 1, "", zeros(32))[:32]``
(section 11.3). Old keys are forgotten as the counter moves past them (forward secrecy
inside a link too). The counter stops below 2^64 - 1 (the nonce REKEY reserves): an
error then, which at 2^32 frames a second takes 136 years. ChaCha20-Poly1305 sets no
smaller limit per key (RFC 8439; RFC 9001 6.6: confidentiality beyond 2^62 packets,
integrity 2^36 forgery attempts, which :attr:`failures` counts). AES-256-GCM does: a key
seals at most :data:`AESGCM_DATA_LIMIT` bytes (2^36, and 2^32 frames), after which the
sender moves its counter on to the next epoch's first frame (receivers allow gaps), so
the next frame goes under the next key (``exon_seal.h`` has the bound).

The state lives in C (``exon_seal_t``, ``exon/native/src/link/exon_seal.c``): the link table
seals and opens DATA and FLOW of an attached link with the same struct, without Python
and with the GIL released, so there is one counter per direction whoever seals.

The AEAD itself comes from libsodium where PyNaCl (a dependency) is installed, else from
OpenSSL's libcrypto (:func:`backend`): the same bytes, but libsodium's single call per
frame costs about half OpenSSL's when the caches are cold, as they are right after a
wake-up (``exon_seal.c`` has the figures).
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any, Final

from exon.native import check, ffi, lib

__all__ = [
    "AESGCM",
    "AESGCM_DATA_LIMIT",
    "CHACHAPOLY",
    "CIPHERS",
    "COUNTER_LIMIT",
    "DEFAULT_REKEY_SHIFT",
    "TransportSeal",
    "aes_available",
    "backend",
    "local_ciphers",
    "rekey",
]

COUNTER_LIMIT: Final = (1 << 64) - 1  #: first counter never used (REKEY's nonce)
DEFAULT_REKEY_SHIFT: Final = 32
_OVERHEAD: Final = 24

CHACHAPOLY: Final = "ChaChaPoly"  #: ChaCha20-Poly1305 (Noise's name): every host has it
AESGCM: Final = "AESGCM"  #: AES-256-GCM (Noise's name): only where the CPU has AES
#: the ciphers exon knows, best first, with their native codes (EXON_SEAL_*)
CIPHERS: Final = {AESGCM: lib.EXON_SEAL_AESGCM, CHACHAPOLY: lib.EXON_SEAL_CHACHAPOLY}
AESGCM_DATA_LIMIT: Final = int(lib.EXON_SEAL_AESGCM_DATA_LIMIT)  #: bytes per AES-GCM key


#: libsodium's shared object inside PyNaCl (which exports libsodium's API)
_SODIUM_MODULE: Final = "nacl._sodium"
_backend_lock = threading.Lock()
_backend_chosen = False


def _sodium_path() -> str | None:
    try:
        spec = importlib.util.find_spec(_SODIUM_MODULE)
    except ImportError:  # no nacl package at all
        return None
    return spec.origin if spec is not None and spec.has_location else None


def _choose_backend() -> None:
    """libsodium for the AEAD when PyNaCl is there (once per process); else OpenSSL."""
    global _backend_chosen
    if _backend_chosen:
        return
    with _backend_lock:
        if not _backend_chosen:
            path = _sodium_path()
            if path is not None:
                lib.exon_crypto_use_sodium(path.encode())  # < 0: OpenSSL stays
            _backend_chosen = True


def backend() -> str:
    """The library that seals and opens frames: ``"libsodium"`` or ``"openssl"``."""
    _choose_backend()
    rc = lib.exon_crypto_backend(-1)
    return "libsodium" if rc == lib.EXON_CRYPTO_SODIUM else "openssl"


def aes_available() -> bool:
    """Whether this host seals AES-256-GCM in hardware (AES-NI and carry-less multiply)."""
    _choose_backend()
    return bool(lib.exon_crypto_aes_available())


def local_ciphers() -> tuple[str, ...]:
    """The ciphers this host offers, best first: AESGCM (with hardware AES), ChaChaPoly."""
    return (AESGCM, CHACHAPOLY) if aes_available() else (CHACHAPOLY,)


def _cipher_code(cipher: str) -> int:
    try:
        return int(CIPHERS[cipher])
    except KeyError:
        raise ValueError(f"unknown cipher {cipher!r} (known: {', '.join(CIPHERS)})") from None


def rekey(key: bytes, cipher: str = CHACHAPOLY) -> bytes:
    """Noise's REKEY: the first 32 bytes of ENCRYPT(k, 2^64-1, "", 0^32) with ``cipher``."""
    _choose_backend()
    out = ffi.new("uint8_t[32]")
    check(lib.exon_seal_rekey(_cipher_code(cipher), key, out), "rekey")
    return bytes(out)


class TransportSeal:
    """Both directions of one link. Not thread-safe: the core and the link table call it
    under the Node's lock."""

    __slots__ = ("_gc", "cipher", "native")

    def __init__(self, send_key: bytes, recv_key: bytes, *, cipher: str = CHACHAPOLY,
                 rekey_shift: int = DEFAULT_REKEY_SHIFT, data_limit: int | None = None) -> None:
        if not 1 <= rekey_shift <= 62:
            raise ValueError("rekey_shift must be 1..62")
        if len(send_key) != 32 or len(recv_key) != 32:
            raise ValueError("keys are 32 bytes")
        code = _cipher_code(cipher)
        if data_limit is None:
            data_limit = AESGCM_DATA_LIMIT if cipher == AESGCM else lib.EXON_SEAL_NO_DATA_LIMIT
        if not 1 <= data_limit <= lib.EXON_SEAL_NO_DATA_LIMIT:
            raise ValueError("data_limit must be at least 1 byte")
        _choose_backend()
        native = ffi.new("exon_seal_t *")
        check(lib.exon_seal_init(native, code, send_key, recv_key, rekey_shift, data_limit),
              "seal")
        #: the AEAD: :data:`AESGCM` or :data:`CHACHAPOLY`
        self.cipher = cipher
        #: the C state (exon_seal_t *), shared with the link table while attached
        self.native: Any = native
        self._gc = ffi.gc(native, lib.exon_seal_close)  # keys wiped, contexts freed

    @property
    def sealed(self) -> int:
        return int(self.native.sealed)

    @property
    def opened(self) -> int:
        return int(self.native.opened)

    @property
    def failures(self) -> int:
        """Frames that did not open."""
        return int(self.native.failures)

    def seal(self, ad: bytes, payload: bytes) -> bytes:
        """counter + ciphertext + tag of ``payload``; ``ad``: the frame's 20-byte header."""
        if len(ad) != 20:
            raise ValueError("the associated data is the frame's 20-byte header")
        out = ffi.new("uint8_t[]", len(payload) + _OVERHEAD)
        check(lib.exon_seal_seal(self.native, ad, payload, len(payload), out), "seal")
        return bytes(ffi.buffer(out, len(payload) + _OVERHEAD))

    def open(self, ad: bytes, sealed: bytes) -> bytes | None:
        """The payload, or None (counted in :attr:`failures`)."""
        if len(ad) != 20:
            raise ValueError("the associated data is the frame's 20-byte header")
        n = len(sealed) - _OVERHEAD
        out = ffi.new("uint8_t[]", max(n, 1))
        opened = lib.exon_seal_open(self.native, ad, sealed, len(sealed), out)
        if n < 0 or opened != n:
            return None
        return bytes(ffi.buffer(out, n))
