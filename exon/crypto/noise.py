"""The Noise handshake of encrypted links: ``Noise_IX_25519_{cipher}_SHA256``, sans-IO, with
``cipher`` ``AESGCM`` or ``ChaChaPoly`` (the policy negotiates it, docs/protocol.md 2.20).

Written from the Noise Protocol Framework, revision 34 (noiseprotocol.org), sections 5
(processing rules) and 7 (pattern IX)::

    IX:
      -> e, s
      <- e, ee, se, s, es

Message 1 travels in the LINK (its sender is the *initiator*), message 2 in the answering
LINKACK; :meth:`HandshakeState.split` then gives one key per direction. The initiator's
accepting LINKACK is the first frame sealed with its key, which confirms the keys to the
responder (docs/protocol.md 2.20). Primitives: :mod:`exon.crypto.libcrypto` (X25519,
AES-256-GCM, ChaCha20-Poly1305) and :mod:`hashlib`/:mod:`hmac` (SHA-256, HMAC); nothing here is a
primitive, only the framework's composition of them.

Decoding is total: a message of any length or content either reads or raises
:class:`HandshakeError`, and the state is unusable after an error.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from exon.crypto import libcrypto
from exon.errors import ProtocolError

__all__ = [
    "MESSAGE1_OVERHEAD",
    "MESSAGE2_OVERHEAD",
    "PROTOCOL_NAME",
    "HandshakeError",
    "HandshakeState",
    "protocol_name",
]

CIPHERS: Final = ("AESGCM", "ChaChaPoly")  #: Noise's names of the ciphers exon uses


def protocol_name(cipher: str) -> bytes:
    """The Noise protocol name of exon's handshake with ``cipher`` (one of :data:`CIPHERS`)."""
    if cipher not in CIPHERS:
        raise ValueError(f"unknown cipher {cipher!r}")
    return b"Noise_IX_25519_" + cipher.encode() + b"_SHA256"


PROTOCOL_NAME: Final = protocol_name("ChaChaPoly")  #: the default (and fallback) protocol
DHLEN: Final = 32
HASHLEN: Final = 32
TAGLEN: Final = libcrypto.TAG_LENGTH
MESSAGE1_OVERHEAD: Final = 2 * DHLEN  #: e, s in the clear, then the payload in the clear
MESSAGE2_OVERHEAD: Final = DHLEN + DHLEN + TAGLEN + TAGLEN  #: e, enc(s), enc(payload) tag
MAX_PAYLOAD: Final = 1024  #: longest handshake payload exon sends or reads


class HandshakeError(ProtocolError):
    """A handshake message that does not read: short, long, or failing to authenticate."""


def _hkdf2(chaining_key: bytes, ikm: bytes) -> tuple[bytes, bytes]:
    """Noise's HKDF with two outputs (section 4.3), HMAC-SHA256."""
    temp = hmac.new(chaining_key, ikm, hashlib.sha256).digest()
    out1 = hmac.new(temp, b"\x01", hashlib.sha256).digest()
    out2 = hmac.new(temp, out1 + b"\x02", hashlib.sha256).digest()
    return out1, out2


class _SymmetricState:
    """Noise section 5.2: chaining key, handshake hash and the current key."""

    __slots__ = ("aes", "ck", "h", "k", "n")

    def __init__(self, name: bytes, prologue: bytes) -> None:
        # a name of at most HASHLEN bytes is h, zero-padded, unhashed (section 5.2):
        # "..._ChaChaPoly_SHA256" is exactly 32 bytes, "..._AESGCM_SHA256" 28
        assert len(name) <= HASHLEN
        self.h = name.ljust(HASHLEN, b"\0")
        self.ck = self.h
        self.aes = b"_AESGCM_" in name
        self.k: bytes | None = None
        self.n = 0
        self.mix_hash(prologue)

    def mix_hash(self, data: bytes) -> None:
        self.h = hashlib.sha256(self.h + data).digest()

    def mix_key(self, ikm: bytes) -> None:
        self.ck, self.k = _hkdf2(self.ck, ikm)
        self.n = 0

    def encrypt_and_hash(self, plaintext: bytes) -> bytes:
        if self.k is None:
            out = plaintext
        else:
            out = libcrypto.aead_seal(self.k, self.n, self.h, plaintext, aes=self.aes)
            self.n += 1
        self.mix_hash(out)
        return out

    def decrypt_and_hash(self, data: bytes) -> bytes:
        plain = data
        if self.k is not None:
            opened = libcrypto.aead_open(self.k, self.n, self.h, data, aes=self.aes)
            if opened is None:
                raise HandshakeError("handshake message does not authenticate")
            plain = opened
            self.n += 1
        self.mix_hash(data)
        return plain

    def split(self) -> tuple[bytes, bytes]:
        return _hkdf2(self.ck, b"")


class HandshakeState:
    """One side of one IX handshake. ``initiator`` writes message 1 and reads message 2;
    the responder reads message 1 and writes message 2. ``static_secret`` is our keypair's
    secret key; ``prologue`` is bound into the handshake hash (both sides must agree), and so
    is ``cipher`` (through the protocol name)."""

    def __init__(self, *, initiator: bool, static_secret: bytes, prologue: bytes,
                 cipher: str = "ChaChaPoly", ephemeral_secret: bytes | None = None) -> None:
        self.initiator = initiator
        self.cipher = cipher
        self._s = static_secret
        self._s_pub = libcrypto.x25519_public(static_secret)
        # a given ephemeral: test vectors, fuzz seeds, and one fresh ephemeral shared by the
        # initiator's states of the ciphers it offers (policy.py); never reused otherwise
        self._e = ephemeral_secret or libcrypto.random_bytes(DHLEN)
        self._e_pub = libcrypto.x25519_public(self._e)
        self._re: bytes | None = None
        self._rs: bytes | None = None
        self._sym = _SymmetricState(protocol_name(cipher), prologue)
        self._step = 0  # messages processed
        self._failed = False

    @property
    def remote_static(self) -> bytes | None:
        """The peer's static public key, once read (message 1 for the responder, message 2
        for the initiator)."""
        return self._rs

    @property
    def remote_ephemeral(self) -> bytes | None:
        return self._re

    @property
    def complete(self) -> bool:
        return self._step == 2 and not self._failed

    def _dh(self, secret: bytes, public: bytes | None) -> bytes:
        shared = libcrypto.x25519(secret, public) if public is not None else None
        if shared is None:
            self._failed = True
            raise HandshakeError("the peer's key is not a usable X25519 public key")
        return shared

    def _expect(self, step: int, initiator: bool, what: str) -> None:
        if self._failed or self._step != step or self.initiator is not initiator:
            raise HandshakeError(f"{what} out of turn")

    # ---- message 1: -> e, s ---------------------------------------------------------------

    def write_message1(self, payload: bytes) -> bytes:
        self._expect(0, True, "message 1")
        sym = self._sym
        sym.mix_hash(self._e_pub)
        out = self._e_pub + sym.encrypt_and_hash(self._s_pub) + sym.encrypt_and_hash(payload)
        self._step = 1
        return out

    def read_message1(self, message: bytes) -> bytes:
        self._expect(0, False, "message 1")
        if not MESSAGE1_OVERHEAD <= len(message) <= MESSAGE1_OVERHEAD + MAX_PAYLOAD:
            self._failed = True
            raise HandshakeError(f"handshake message 1 of {len(message)} bytes (want "
                                 f"{MESSAGE1_OVERHEAD}..{MESSAGE1_OVERHEAD + MAX_PAYLOAD})")
        sym = self._sym
        self._re = bytes(message[:DHLEN])
        sym.mix_hash(self._re)
        self._rs = sym.decrypt_and_hash(bytes(message[DHLEN:2 * DHLEN]))
        payload = sym.decrypt_and_hash(bytes(message[2 * DHLEN:]))
        self._step = 1
        return payload

    # ---- message 2: <- e, ee, se, s, es ---------------------------------------------------

    def write_message2(self, payload: bytes) -> bytes:
        self._expect(1, False, "message 2")
        sym = self._sym
        sym.mix_hash(self._e_pub)
        sym.mix_key(self._dh(self._e, self._re))  # ee
        sym.mix_key(self._dh(self._e, self._rs))  # se: initiator's static, our ephemeral
        enc_s = sym.encrypt_and_hash(self._s_pub)
        sym.mix_key(self._dh(self._s, self._re))  # es: initiator's ephemeral, our static
        out = self._e_pub + enc_s + sym.encrypt_and_hash(payload)
        self._step = 2
        return out

    def read_message2(self, message: bytes) -> bytes:
        self._expect(1, True, "message 2")
        low, high = MESSAGE2_OVERHEAD, MESSAGE2_OVERHEAD + MAX_PAYLOAD
        if not low <= len(message) <= high:
            self._failed = True
            raise HandshakeError(f"handshake message 2 of {len(message)} bytes (want "
                                 f"{low}..{high})")
        sym = self._sym
        try:
            self._re = bytes(message[:DHLEN])
            sym.mix_hash(self._re)
            sym.mix_key(self._dh(self._e, self._re))  # ee
            sym.mix_key(self._dh(self._s, self._re))  # se: our static, responder's ephemeral
            rs = sym.decrypt_and_hash(bytes(message[DHLEN:2 * DHLEN + TAGLEN]))
            sym.mix_key(self._dh(self._e, rs))  # es: our ephemeral, responder's static
            payload = sym.decrypt_and_hash(bytes(message[2 * DHLEN + TAGLEN:]))
        except HandshakeError:
            self._failed = True
            raise
        self._rs = rs
        self._step = 2
        return payload

    # ---- the result -----------------------------------------------------------------------

    def split(self) -> tuple[bytes, bytes]:
        """(our sending key, our receiving key) once both messages are processed. Once:
        the ephemeral secret and the chaining key are dropped (forward secrecy), as Noise
        deletes the HandshakeState after Split()."""
        if not self.complete or self._sym.k is None:
            raise HandshakeError("the handshake is not complete (or was split already)")
        k1, k2 = self._sym.split()  # k1: initiator -> responder, k2: responder -> initiator
        self._e = b""
        self._sym.ck = b""
        self._sym.k = None
        return (k1, k2) if self.initiator else (k2, k1)
