"""PUB/SUB payloads (docs/protocol.md 2.19) and the publisher's prefix filter.

PUB/SUB adds no frame type: both directions of a pub-sub link carry ordinary DATA frames
(credits and FLOW as on every link), whose payload starts with a kind byte::

    PUB -> SUB   0x00 MESSAGE      then the application's bytes
                 0x01 DROPPED      then count u64 (little-endian; 9 bytes in all): the
                                   publisher dropped ``count`` messages for this subscriber
                                   (policy "drop", no credit) just before the next one
    SUB -> PUB   0x01 SUBSCRIBE    then the prefix (0..MAX_PREFIX bytes; empty = everything)
                 0x02 UNSUBSCRIBE  then the prefix

Pure functions; decoders raise :class:`~exon.errors.FrameDecodeError` on anything else.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

from exon.errors import FrameDecodeError

MESSAGE: Final = b"\x00"  #: the kind byte in front of a published message
MAX_PREFIX: Final = 4096  #: longest subscription prefix, bytes
_DROPPED = struct.Struct("<BQ")


class PubKind(enum.IntEnum):
    """Kind byte of a PUB -> SUB payload."""

    MESSAGE = 0x00
    DROPPED = 0x01


class SubKind(enum.IntEnum):
    """Kind byte of a SUB -> PUB payload."""

    SUBSCRIBE = 0x01
    UNSUBSCRIBE = 0x02


def encode_dropped(count: int) -> bytes:
    return _DROPPED.pack(PubKind.DROPPED, count)


def decode_published(payload: bytes) -> tuple[PubKind, bytes | int]:
    """(MESSAGE, the application's bytes) or (DROPPED, count)."""
    if not payload:
        raise FrameDecodeError("empty pub payload (no kind byte)")
    kind = payload[0]
    if kind == PubKind.MESSAGE:
        return PubKind.MESSAGE, payload[1:]
    if kind == PubKind.DROPPED:
        if len(payload) != _DROPPED.size:
            raise FrameDecodeError(f"DROPPED payload must be 9 bytes, got {len(payload)}")
        return PubKind.DROPPED, _DROPPED.unpack(payload)[1]
    raise FrameDecodeError(f"unknown pub payload kind 0x{kind:02x}")


def encode_subscription(kind: SubKind, prefix: bytes) -> bytes:
    if len(prefix) > MAX_PREFIX:
        raise ValueError(f"a prefix is at most {MAX_PREFIX} bytes")
    return bytes((kind,)) + prefix


def decode_subscription(payload: bytes) -> tuple[SubKind, bytes]:
    if not payload:
        raise FrameDecodeError("empty sub payload (no kind byte)")
    kind = payload[0]
    if kind not in (SubKind.SUBSCRIBE, SubKind.UNSUBSCRIBE):
        raise FrameDecodeError(f"unknown sub payload kind 0x{kind:02x}")
    if len(payload) - 1 > MAX_PREFIX:
        raise FrameDecodeError(f"prefix of {len(payload) - 1} bytes exceeds {MAX_PREFIX}")
    return SubKind(kind), payload[1:]


class PrefixFilter:
    """A set of prefixes; :meth:`matches` says whether a message starts with one of them."""

    __slots__ = ("_by_length", "_prefixes", "everything")

    def __init__(self) -> None:
        self._prefixes: set[bytes] = set()
        self._by_length: dict[int, set[bytes]] = {}
        self.everything = False  #: the empty prefix is in the set

    def __len__(self) -> int:
        return len(self._prefixes)

    def __contains__(self, prefix: object) -> bool:
        return prefix in self._prefixes

    def add(self, prefix: bytes) -> None:
        self._prefixes.add(prefix)
        self._by_length.setdefault(len(prefix), set()).add(prefix)
        self.everything = b"" in self._prefixes

    def discard(self, prefix: bytes) -> None:
        self._prefixes.discard(prefix)
        group = self._by_length.get(len(prefix))
        if group is not None:
            group.discard(prefix)
            if not group:
                del self._by_length[len(prefix)]
        self.everything = b"" in self._prefixes

    def prefixes(self) -> list[bytes]:
        """The prefixes, each once (in no particular order)."""
        return list(self._prefixes)

    def as_tuple(self) -> tuple[bytes, ...] | None:
        """The prefixes as a tuple, or None when the empty prefix (everything) is one: the
        form the PUB door matches with, by the same rule as :meth:`matches`
        (``exon_fast_pubsub.c`` pub_matches; tests/middleware/test_rule_parity.py)."""
        return None if self.everything else tuple(self._prefixes)

    def matches(self, data: bytes) -> bool:
        if self.everything:
            return True
        size = len(data)
        for length, group in self._by_length.items():
            if length <= size and data[:length] in group:
                return True
        return False
