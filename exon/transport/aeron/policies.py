"""Pure-Python reference twins of the C transport policies (sans-IO, integer clock).

These mirror ``exon/native/src/driver/exon_term_rebuilder.c`` and ``exon_loss_detector.c`` line for
line in behaviour; parity tests run both on the same random inputs. They are slow and
meant for tests, docs and tools, not for the data path.
"""

from __future__ import annotations

from dataclasses import dataclass

from exon.transport.aeron import layout as L

__all__ = ["LossDetector", "ScanResult", "term_gap_scan", "term_rebuilder_insert"]

NO_TIMER = 2**63 - 1


def _frame_length(term: bytes | bytearray | memoryview, offset: int) -> int:
    return int(L.INT32_FIELD.unpack_from(term, offset)[0])


def term_rebuilder_insert(term: bytearray, term_offset: int, packet: bytes) -> int:
    """Insert the frames of ``packet`` at ``term_offset``; return how many were new."""
    length = len(packet)
    if (term_offset < 0 or length < L.DATA_HEADER_LENGTH or term_offset % L.FRAME_ALIGNMENT
            or length % L.FRAME_ALIGNMENT or term_offset + length > len(term)):
        raise ValueError(f"packet of {length} bytes at {term_offset} does not fit the term")
    inserted = 0
    pos = 0
    while pos + L.DATA_HEADER_LENGTH <= length:
        frame_length, _v, _f, type_ = L.FRAME_HEADER.unpack_from(packet, pos)
        if frame_length <= 0:
            break
        if type_ == L.HDR_TYPE_PAD:
            wire = L.DATA_HEADER_LENGTH
        else:
            wire = L.align(frame_length, L.FRAME_ALIGNMENT)
            if wire > length - pos:
                break
        dest = term_offset + pos
        if _frame_length(term, dest) == 0:
            term[dest + 4 : dest + wire] = packet[pos + 4 : pos + wire]
            term[dest : dest + 4] = packet[pos : pos + 4]  # the commit, last
            inserted += 1
        pos += wire
    return inserted


def term_gap_scan(term: bytes | bytearray, offset: int, limit_offset: int) -> tuple[int, int]:
    """Return (end of the contiguous frames from ``offset``, gap length or 0)."""
    term_length = len(term)
    limit_offset = min(limit_offset, term_length)
    offset = max(offset, 0) & ~(L.FRAME_ALIGNMENT - 1)
    while offset < limit_offset:
        frame_length = _frame_length(term, offset)
        if frame_length <= 0:
            break
        offset = min(offset + L.align(frame_length, L.FRAME_ALIGNMENT), term_length)
    if offset >= limit_offset:
        return offset, 0
    end = offset + L.FRAME_ALIGNMENT
    while end < limit_offset and _frame_length(term, end) == 0:
        end += L.FRAME_ALIGNMENT
    return offset, min(end, limit_offset) - offset


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanResult:
    rebuild_position: int
    loss_found: bool = False
    nak: tuple[int, int, int] | None = None  #: (term_id, term_offset, length) to send now
    nak_suppressed: bool = False  #: a NAK was due but withheld (unverified, or over the cap)


def _wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


class LossDetector:
    """Gap detection and NAK timing for one image (twin of ``exon_loss_detector_t``).

    With the defaults it is Aeron's plain timer: a NAK ``delay_ns`` after a gap appears, then
    one every ``retry_delay_ns`` while it stays. The NAK policy (``max_retry_delay_ns``,
    ``window_ns``/``max_per_window``, ``verified``) adds what issue 13 asked for: an
    unverified detector withholds every NAK (the image's source has not proved real yet),
    the same gap NAKed again doubles its retry delay up to ``max_retry_delay_ns``, and at
    most ``max_per_window`` NAKs go per ``window_ns``.
    """

    def __init__(
        self, *, delay_ns: int = 1_000, retry_delay_ns: int = 100_000,
        max_retry_delay_ns: int | None = None, window_ns: int = 0, max_per_window: int = 0,
        verified: bool = True,
    ) -> None:
        self.delay_ns = delay_ns
        self.retry_delay_ns = retry_delay_ns
        self.max_retry_delay_ns = max(max_retry_delay_ns or retry_delay_ns, retry_delay_ns)
        self.window_ns = window_ns if window_ns > 0 and max_per_window > 0 else 0
        self.max_per_window = max_per_window
        self.verified = verified
        self.expiry_ns = NO_TIMER
        self.backoff_ns = retry_delay_ns
        self.window_start_ns = 0
        self.window_count = 0
        self.window_suppressed = False
        self.withheld = False  # the active gap's NAK was due while unverified
        self.active: tuple[int, int] | None = None  # (term_id, term_offset)
        self.active_length = 0

    def verify(self, now_ns: int) -> None:
        """The source proved real: NAKs may go; a gap whose NAK was withheld is due at
        ``now_ns`` (one not yet due keeps its delay)."""
        if self.verified:
            return
        self.verified = True
        self.backoff_ns = self.retry_delay_ns
        if self.active is not None and self.withheld and self.expiry_ns > now_ns:
            self.expiry_ns = now_ns
        self.withheld = False

    def _step(self) -> int:
        delay = self.backoff_ns
        cap = self.max_retry_delay_ns
        self.backoff_ns = cap if delay > cap // 2 else delay * 2
        return delay

    def scan(
        self, term: bytes | bytearray, rebuild_position: int, hwm_position: int, now_ns: int,
        initial_term_id: int,
    ) -> ScanResult:
        if rebuild_position >= hwm_position:
            return ScanResult(rebuild_position=rebuild_position)
        term_length = len(term)
        bits = term_length.bit_length() - 1
        mask = term_length - 1
        rebuild_term_count = rebuild_position >> bits
        rebuild_offset = rebuild_position & mask
        same_term = rebuild_term_count == hwm_position >> bits
        limit = hwm_position & mask if same_term else term_length
        term_id = _wrap32(initial_term_id + rebuild_term_count)
        end, gap_length = term_gap_scan(term, rebuild_offset, limit)
        position = rebuild_position - rebuild_offset + end
        if end >= limit:
            return ScanResult(rebuild_position=position)
        loss_found = False
        if self.active != (term_id, end):
            self.active = (term_id, end)
            self.expiry_ns = now_ns + self.delay_ns
            self.backoff_ns = self.retry_delay_ns
            self.withheld = False
            loss_found = True
        self.active_length = gap_length
        nak = None
        suppressed = False
        if now_ns >= self.expiry_ns:
            if self.window_ns and now_ns - self.window_start_ns >= self.window_ns:
                self.window_start_ns = now_ns
                self.window_count = 0
                self.window_suppressed = False
            if not self.verified:
                suppressed = True
                self.withheld = True
                self.expiry_ns = now_ns + self._step()
            elif self.window_ns and self.window_count >= self.max_per_window:
                suppressed = not self.window_suppressed
                self.window_suppressed = True
                self.expiry_ns = self.window_start_ns + self.window_ns
            else:
                nak = (term_id, end, gap_length)
                self.expiry_ns = now_ns + self._step()
                self.window_count += 1
        return ScanResult(rebuild_position=position, loss_found=loss_found, nak=nak,
                          nak_suppressed=suppressed)
