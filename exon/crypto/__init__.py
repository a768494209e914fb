"""Encrypted, authenticated links: keys, the Noise handshake, sealed frames.

``exon.Keypair`` and ``exon.EncryptedPolicy`` are the user's names (docs/guide/security.md);
the wire is docs/protocol.md 2.20. Primitives come from OpenSSL's libcrypto, loaded at run
time (:mod:`exon.crypto.libcrypto`).
"""

from __future__ import annotations

from exon.crypto.keys import Keypair, key_from_text, key_to_text
from exon.crypto.policy import ANY_KEY, AnyKey, EncryptedPolicy

__all__ = ["ANY_KEY", "AnyKey", "EncryptedPolicy", "Keypair", "key_from_text", "key_to_text"]
