"""The transport keys of one encrypted link: :class:`TransportSeal` (a ``LinkSeal``).

Per direction: a ChaCha20-Poly1305 key from the handshake's split, and a 64-bit counter
that is the nonce (Noise's ``0^32 || LE64(counter)``). Frames carry the counter, so the
receiver needs no state but the next counter it accepts: a frame whose counter is lower
(a replay, or an older frame) or that does not authenticate is refused and changes
nothing.

Keys are renewed every ``2^rekey_shift`` frames per direction (2^32 by default): frame
``c`` is sealed with key ``epoch(c >> rekey_shift)``, where epoch 0 is the split's key and
each next one is Noise's ``REKEY(k) = ENCRYPT(k, 2^64 - 1, "", zeros(32))[:32]``
(section 11.3). Old keys are forgotten as the counter moves past them (forward secrecy
inside a link too). The counter stops below 2^64 - 1 (the nonce REKEY reserves): an
error then, which at 2^32 frames a second takes 136 years. ChaCha20-Poly1305 sets no
smaller limit per key (RFC 8439; RFC 9001 6.6: confidentiality beyond 2^62 packets,
integrity 2^36 forgery attempts, which :attr:`failures` counts).

The state lives in C (``exon_seal_t``, ``exon/native/src/link/exon_seal.c``): the link table
seals and opens DATA and FLOW of an attached link with the same struct, without Python
and with the GIL released, so there is one counter per direction whoever seals.

The AEAD itself comes from libsodium where PyNaCl (a dependency) is installed, else from
OpenSSL's libcrypto (:func:`backend`): the same ChaCha20-Poly1305, byte for byte, but
libsodium's single call per frame costs about half OpenSSL's when the caches are cold,
as they are right after a wake-up (``exon_seal.c`` has the figures).
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any, Final

from exon.native import check, ffi, lib

__all__ = ["COUNTER_LIMIT", "DEFAULT_REKEY_SHIFT", "TransportSeal", "backend", "rekey"]

COUNTER_LIMIT: Final = (1 << 64) - 1  #: first counter never used (REKEY's nonce)
DEFAULT_REKEY_SHIFT: Final = 32
_OVERHEAD: Final = 24


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


def rekey(key: bytes) -> bytes:
    """Noise's REKEY for ChaChaPoly: the first 32 bytes of ENCRYPT(k, 2^64-1, "", 0^32)."""
    _choose_backend()
    out = ffi.new("uint8_t[32]")
    check(lib.exon_seal_rekey(key, out), "rekey")
    return bytes(out)


class TransportSeal:
    """Both directions of one link. Not thread-safe: the core and the link table call it
    under the Node's lock."""

    __slots__ = ("_gc", "native")

    def __init__(self, send_key: bytes, recv_key: bytes, *,
                 rekey_shift: int = DEFAULT_REKEY_SHIFT) -> None:
        if not 1 <= rekey_shift <= 62:
            raise ValueError("rekey_shift must be 1..62")
        if len(send_key) != 32 or len(recv_key) != 32:
            raise ValueError("keys are 32 bytes")
        _choose_backend()
        native = ffi.new("exon_seal_t *")
        check(lib.exon_seal_init(native, send_key, recv_key, rekey_shift), "seal")
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
