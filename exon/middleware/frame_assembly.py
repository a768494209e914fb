"""Joining the node-protocol FRAGMENTs of one exon frame again (docs/protocol.md 2.14).

A sending node cuts an exon frame longer than its publication's largest message into
FRAGMENTs (:func:`~exon.middleware.node_transport.encode_fragments`) and offers them in
order, offset 0 first. Aeron keeps the order of one publication, so the receiver needs
one assembly per image (per sending node): :class:`FrameAssembler` keeps it, sans-IO.

Rules, per key (the image):

* offset 0 starts an assembly; an unfinished one of that key is given up;
* a chunk continues the assembly when its offset is where the assembly ends and its total
  is the assembly's; anything else gives the assembly up (and the chunk: it cannot start
  one);
* a total above :attr:`FrameAssembler.max_total` is refused (and with it the chunk's
  assembly, if it was one);
* when the assembly holds ``total`` bytes, :meth:`FrameAssembler.feed` returns the whole
  frame: the receiver hands it to where an unfragmented frame would go.

An assembly takes one buffer of at least its announced ``total`` at its first chunk
(refused above ``max_total``) and copies each chunk into place at once: the frames fed in
may be views of a buffer that the caller reuses (the Node's poll buffer), and none is
kept. A finished frame is handed out as a view of that buffer, valid until the key's next
FRAGMENT: the key's next assembly reuses the buffer when it is long enough (a large
buffer freed and taken again for every frame cost page faults: glibc gives such buffers
back to the kernel). Memory is bounded by ``max_total`` per key (one buffer per key,
until :meth:`FrameAssembler.forget`). Every FRAGMENT that is thrown away (malformed, out
of place, oversize, or part of an assembly given up, also by
:meth:`FrameAssembler.forget` when the image goes) counts once in
:attr:`FrameAssembler.dropped`; nothing raises.
"""

from __future__ import annotations

from exon import errors
from exon.middleware.node_transport import decode_fragment

__all__ = ["FrameAssembler"]


class _Assembly:
    __slots__ = ("buffer", "chunks", "filled", "total")

    def __init__(self, total: int, chunk: memoryview, spare: bytearray | None) -> None:
        self.total = total
        # one allocation, filled in place (or the key's last one, when long enough)
        self.buffer = spare if spare is not None and len(spare) >= total else bytearray(total)
        self.filled = len(chunk)
        self.buffer[: self.filled] = chunk
        self.chunks = 1


class FrameAssembler:
    """FRAGMENTs in, whole exon frames out, one assembly per key (see the module)."""

    def __init__(self, *, max_total: int) -> None:
        #: the largest frame (total) accepted; the Node keeps it at its sockets' largest
        #: ``max_message_size`` plus the 20-byte exon header
        self.max_total = max_total
        #: FRAGMENT frames thrown away (see the module docstring)
        self.dropped = 0
        self._assemblies: dict[int, _Assembly] = {}
        self._spares: dict[int, bytearray] = {}  # per key: the buffer of its last frame

    def feed(self, key: int, data: bytes | memoryview) -> memoryview | None:
        """One FRAGMENT frame of ``key``: the whole frame once its last chunk came (a view
        of the assembly's buffer, no copy, valid until the next ``feed`` of ``key``; or,
        for a frame in one FRAGMENT, a view of ``data``), else None (waiting for more, or
        dropped and counted). ``data`` is not kept: its chunk is copied before this
        returns."""
        try:
            total, offset, chunk = decode_fragment(data)
        except errors.FrameDecodeError:
            self._give_up(key)
            self.dropped += 1
            return None
        if offset == 0:
            self._give_up(key)
            if total > self.max_total:
                self.dropped += 1
                return None
            if len(chunk) == total:
                return chunk
            self._assemblies[key] = _Assembly(total, chunk, self._spares.pop(key, None))
            return None
        assembly = self._assemblies.get(key)
        if assembly is None or assembly.total != total or assembly.filled != offset:
            self._give_up(key)
            self.dropped += 1
            return None
        end = offset + len(chunk)  # <= total (decode_fragment)
        assembly.buffer[offset:end] = chunk
        assembly.filled = end
        assembly.chunks += 1
        if end < total:
            return None
        del self._assemblies[key]
        buffer = self._spares[key] = assembly.buffer
        return memoryview(buffer)[:total]

    def forget(self, key: int) -> None:
        """The image of ``key`` is gone: its unfinished assembly goes (counted), and its
        buffer."""
        self._give_up(key)
        self._spares.pop(key, None)

    def _give_up(self, key: int) -> None:
        assembly = self._assemblies.pop(key, None)
        if assembly is not None:
            self.dropped += assembly.chunks

    @property
    def pending_bytes(self) -> int:
        """Bytes held by unfinished assemblies."""
        return sum(a.filled for a in self._assemblies.values())

    def __len__(self) -> int:
        """Unfinished assemblies."""
        return len(self._assemblies)
