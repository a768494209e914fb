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
inside a link too). The counter stops below 2^64 - 1 (the nonce REKEY reserves):
:class:`exon.errors.StateError` then, which at 2^32 frames a second takes 136 years.
ChaCha20-Poly1305 sets no smaller limit per key (RFC 8439; RFC 9001 6.6: confidentiality
beyond 2^62 packets, integrity 2^36 forgery attempts, which :attr:`failures` counts).
"""

from __future__ import annotations

from typing import Final

from exon.crypto import libcrypto
from exon.errors import StateError

__all__ = ["COUNTER_LIMIT", "TransportSeal", "rekey"]

COUNTER_LIMIT: Final = (1 << 64) - 1  #: first counter never used (REKEY's nonce)
DEFAULT_REKEY_SHIFT: Final = 32


def rekey(key: bytes) -> bytes:
    """Noise's REKEY for ChaChaPoly: the first 32 bytes of ENCRYPT(k, 2^64-1, "", 0^32)."""
    return libcrypto.aead_seal(key, COUNTER_LIMIT, b"", bytes(32))[:32]


class _Direction:
    __slots__ = ("epoch", "key", "next")

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.epoch = 0
        self.next = 0  # next counter to seal, or lowest counter to open


class TransportSeal:
    """Both directions of one link. Not thread-safe: the core calls it under its lock."""

    __slots__ = ("_recv", "_send", "_shift", "failures", "opened", "sealed")

    def __init__(self, send_key: bytes, recv_key: bytes, *,
                 rekey_shift: int = DEFAULT_REKEY_SHIFT) -> None:
        if not 1 <= rekey_shift <= 62:
            raise ValueError("rekey_shift must be 1..62")
        self._send = _Direction(send_key)
        self._recv = _Direction(recv_key)
        self._shift = rekey_shift
        self.sealed = 0
        self.opened = 0
        self.failures = 0  #: frames that did not open

    def seal(self, ad: bytes, payload: bytes) -> bytes:
        d = self._send
        counter = d.next
        if counter >= COUNTER_LIMIT - 1:
            raise StateError("the link's send counter is exhausted; link again")
        epoch = counter >> self._shift
        while d.epoch < epoch:
            d.key = rekey(d.key)
            d.epoch += 1
        d.next = counter + 1
        self.sealed += 1
        return counter.to_bytes(8, "little") + libcrypto.aead_seal(d.key, counter, ad, payload)

    def open(self, ad: bytes, sealed: bytes) -> bytes | None:
        d = self._recv
        if len(sealed) < 8 + libcrypto.TAG_LENGTH:
            self.failures += 1
            return None
        counter = int.from_bytes(sealed[:8], "little")
        epoch = counter >> self._shift
        if counter < d.next or counter >= COUNTER_LIMIT or not d.epoch <= epoch <= d.epoch + 1:
            # replayed or old; or beyond the next key (a sender moves one key at a time)
            self.failures += 1
            return None
        key = d.key if epoch == d.epoch else rekey(d.key)
        payload = libcrypto.aead_open(key, counter, ad, sealed[8:])
        if payload is None:
            self.failures += 1
            return None
        if epoch != d.epoch:
            d.key, d.epoch = key, epoch
        d.next = counter + 1
        self.opened += 1
        return payload
