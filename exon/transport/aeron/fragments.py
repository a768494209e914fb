"""Pure-Python reference twins of the C log scanner (``exon_image.c``).

Slow and obviously correct: used by the parity tests, which run the C scanner and these
functions over the same random logs, and as executable documentation of the rules:

- a frame is committed when its length (int32 at offset 0) is > 0; a scan stops at the
  first frame that is not committed, whose term id is not the expected one (a region not
  reused yet), or whose length is impossible (< 32 or past the term end);
- frames are 32-byte aligned; PAD frames (type 0) are skipped and do not count against the
  fragment limit;
- BEGIN/END flags delimit fragmented messages; a middle or END frame without a BEGIN
  (joined mid-message) is dropped;
- the fragment limit stops a poll only between messages: a message begun within the limit
  is read to its END if its frames are committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exon.transport.aeron import layout as L

__all__ = ["FragmentAssembler", "FrameInfo", "Message", "read_messages", "scan_term"]


@dataclass(frozen=True, slots=True)
class FrameInfo:
    """One committed frame found by :func:`scan_term`."""

    term_offset: int
    frame_length: int
    type: int
    flags: int


@dataclass(frozen=True, slots=True)
class Message:
    """One whole message found by :func:`read_messages`."""

    data: bytes
    position: int  # stream position after the message's last frame
    fragments: int
    reserved_value: int
    term_id: int
    term_offset: int  # of the last frame


def scan_term(
    term: bytes | memoryview, term_offset: int, limit_offset: int, max_frames: int
) -> tuple[list[FrameInfo], int]:
    """Twin of ``exon_term_scan``: committed frames from ``term_offset``; returns the frames
    and the offset after the last one."""
    frames: list[FrameInfo] = []
    offset = term_offset
    while len(frames) < max_frames and offset < limit_offset:
        (frame_length,) = L.INT32_FIELD.unpack_from(term, offset)
        if frame_length <= 0:
            break
        aligned = L.align(frame_length, L.FRAME_ALIGNMENT)
        if frame_length < L.DATA_HEADER_LENGTH or offset + aligned > limit_offset:
            break
        _, _, flags, ftype = L.FRAME_HEADER.unpack_from(term, offset)
        frames.append(FrameInfo(offset, frame_length, ftype, flags))
        offset += aligned
    return frames, offset


@dataclass(slots=True)
class FragmentAssembler:
    """Reassembles BEGIN..END fragments into whole messages."""

    max_message_length: int = L.MAX_MESSAGE_LENGTH_CAP
    _parts: list[bytes] = field(default_factory=list)
    _length: int = 0

    @property
    def in_progress(self) -> bool:
        return bool(self._parts)

    def reset(self) -> None:
        self._parts.clear()
        self._length = 0

    def on_fragment(self, payload: bytes, flags: int) -> bytes | None:
        """Feed one DATA frame's payload; returns a whole message when one completes."""
        if flags & L.DATA_FLAG_UNFRAGMENTED == L.DATA_FLAG_UNFRAGMENTED:
            return payload
        if flags & L.DATA_FLAG_BEGIN:
            self.reset()
            self._append(payload)
            return None
        if not self._parts:
            return None  # joined mid-message: drop
        if flags & L.DATA_FLAG_END:
            if self._length + len(payload) > self.max_message_length:
                self.reset()
                return None
            message = b"".join(self._parts) + payload
            self.reset()
            return message
        self._append(payload)
        return None

    def _append(self, payload: bytes) -> None:
        if self._length + len(payload) > self.max_message_length:
            self.reset()
            return None
        self._parts.append(payload)
        self._length += len(payload)
        return None

    def fragments(self) -> int:
        return len(self._parts)


def read_messages(
    log: bytes | memoryview,
    position: int,
    *,
    term_length: int,
    initial_term_id: int,
    fragment_limit: int,
    assembler: FragmentAssembler | None = None,
) -> tuple[list[Message], int]:
    """Twin of ``exon_image_poll`` over a whole log file's bytes (terms first): whole
    messages from ``position`` and the new position. ``assembler`` carries a partial
    message between calls."""
    assembler = assembler or FragmentAssembler(L.max_message_length(term_length))
    bits = term_length.bit_length() - 1
    messages: list[Message] = []
    fragments = 0
    while fragments < fragment_limit or assembler.in_progress:
        index = (position >> bits) % L.LOG_PARTITION_COUNT
        base = index * term_length
        term_id = ((position >> bits) + initial_term_id + 2**31) % 2**32 - 2**31
        offset = position & (term_length - 1)
        start = offset
        stopped = False
        while (fragments < fragment_limit or assembler.in_progress) and offset < term_length:
            (frame_length,) = L.INT32_FIELD.unpack_from(log, base + offset)
            if frame_length <= 0:
                stopped = True
                break
            (hdr_term_id,) = L.INT32_FIELD.unpack_from(log, base + offset + L.DATA_TERM_ID_OFFSET)
            aligned = L.align(frame_length, L.FRAME_ALIGNMENT)
            if hdr_term_id != term_id or frame_length < L.DATA_HEADER_LENGTH or (
                aligned > term_length - offset
            ):
                stopped = True
                break
            (_, _, flags, ftype, t_off, _, _, t_id, reserved) = L.DATA_HEADER.unpack_from(
                log, base + offset
            )
            if ftype == L.HDR_TYPE_PAD:
                offset += aligned
                continue
            fragment_count = assembler.fragments() + 1
            start_of_payload = base + offset + L.DATA_HEADER_LENGTH
            payload = bytes(log[start_of_payload : base + offset + frame_length])
            message = assembler.on_fragment(payload, flags)
            fragments += 1
            offset += aligned
            if message is not None:
                after = position + (offset - start)
                messages.append(Message(message, after, fragment_count, reserved, t_id, t_off))
        position += offset - start
        if stopped or offset < term_length:
            break
    return messages, position
