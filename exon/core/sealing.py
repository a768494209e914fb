"""Sealed frames of encrypted links: the layout, and the interface of a link's keys.

A sealed frame is an exon frame whose payload is sealed with the link's key for its
direction (docs/protocol.md 2.20)::

    offset size field
         0   20 the exon header, as a plaintext frame's, but protocol = PROTOCOL_SEALED
                (0x03) and remaining_length = 12 + 8 + len(payload) + 16
        20    8 counter   u64  (per link and direction, from 0, strictly increasing)
        28    n ciphertext of the plaintext frame's payload
      28+n   16 tag

The 20 header bytes (type, tags, incarnation, length) are the AEAD's associated data, so
a frame cannot be re-routed, re-typed or cut without failing to open. The counter is the
nonce, and a receiver opens only counters above the last one it opened, so a replayed
frame fails too. Opening gives back the plaintext frame (protocol 0x01), which the core
decodes as any other.

The core seals and opens through a :class:`LinkSeal`, which a link policy supplies once the
handshake has agreed on keys (``exon.crypto``: ChaCha20-Poly1305 from libcrypto); the core
itself does no cryptography.
"""

from __future__ import annotations

import struct
from typing import Final, Protocol

from exon.core.frames import (
    EXON_VERSION,
    FIXED_HEADER_LENGTH,
    HEADER,
    HEADER_LENGTH,
    MAX_FRAME_LENGTH,
    PROTOCOL_SOCKETS,
    FrameType,
)

__all__ = [
    "COUNTER_LENGTH",
    "PROTOCOL_SEALED",
    "SEAL_OVERHEAD",
    "TAG_LENGTH",
    "LinkSeal",
    "is_sealed",
    "open_frame",
    "seal_frame",
]

PROTOCOL_SEALED: Final = 0x03
COUNTER_LENGTH: Final = 8
TAG_LENGTH: Final = 16
SEAL_OVERHEAD: Final = COUNTER_LENGTH + TAG_LENGTH
_PROTOCOL_OFFSET: Final = 3 - 1  # the u8 after the u16 version
_LENGTH = struct.Struct("<I")
_LENGTH_OFFSET: Final = 4


class LinkSeal(Protocol):
    """The keys of one encrypted link, both directions."""

    def seal(self, ad: bytes, payload: bytes) -> bytes:
        """counter + ciphertext + tag of ``payload`` under our sending key."""
        ...

    def open(self, ad: bytes, sealed: bytes) -> bytes | None:
        """The payload, or None when ``sealed`` (counter + ciphertext + tag) does not open
        under the peer's key with ``ad``, or repeats or precedes an opened counter."""
        ...


def is_sealed(data: bytes | memoryview) -> bool:
    """Whether ``data`` claims to be a sealed frame (its protocol byte only)."""
    return len(data) > _PROTOCOL_OFFSET and data[_PROTOCOL_OFFSET] == PROTOCOL_SEALED


def seal_frame(seal: LinkSeal, frame: bytes) -> bytes:
    """The sealed form of a plaintext frame (encoded by :mod:`exon.core.frames`)."""
    payload = frame[HEADER_LENGTH:]
    header = bytearray(frame[:HEADER_LENGTH])
    header[_PROTOCOL_OFFSET] = PROTOCOL_SEALED
    _LENGTH.pack_into(header, _LENGTH_OFFSET,
                      HEADER_LENGTH - FIXED_HEADER_LENGTH + SEAL_OVERHEAD + len(payload))
    ad = bytes(header)
    return ad + seal.seal(ad, payload)


def open_frame(seal: LinkSeal, data: bytes | memoryview) -> bytes | None:
    """The plaintext frame of a sealed one, or None when it does not open (malformed,
    altered, replayed, or sealed for another link)."""
    n = len(data)
    if n < HEADER_LENGTH + SEAL_OVERHEAD or n > MAX_FRAME_LENGTH + SEAL_OVERHEAD:
        return None
    version, protocol, ftype, remaining, _s, _d, _i = HEADER.unpack_from(data, 0)
    if (version != EXON_VERSION or protocol != PROTOCOL_SEALED
            or remaining != n - FIXED_HEADER_LENGTH
            or not FrameType.ERROR <= ftype <= FrameType.FLOW):
        return None
    ad = bytes(data[:HEADER_LENGTH])
    payload = seal.open(ad, bytes(data[HEADER_LENGTH:]))
    if payload is None:
        return None
    header = bytearray(ad)
    header[_PROTOCOL_OFFSET] = PROTOCOL_SOCKETS
    _LENGTH.pack_into(header, _LENGTH_OFFSET, HEADER_LENGTH - FIXED_HEADER_LENGTH + len(payload))
    return bytes(header) + payload
