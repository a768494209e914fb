"""Retransmit handler: resend at once, ignore duplicates while lingering, cap concurrency."""

from __future__ import annotations

from exon.native import ffi, lib

TERM = 64 * 1024
MS = 1_000_000


class Handler:
    """Drives the C handler with an integer clock and records the resends it asks for."""

    def __init__(self, *, delay: int = 0, linger: int = 10 * MS, max_resend: int = 16) -> None:
        self.h = ffi.new("exon_retransmit_handler_t *")
        assert lib.exon_retransmit_handler_init(self.h, delay, linger, max_resend) == 0
        self.out = ffi.new("exon_retransmit_t *")
        self.batch = ffi.new("exon_retransmit_t[]", 256)
        self.sent: list[tuple[int, int, int, int]] = []

    def nak(self, now: int, term_id: int, offset: int, length: int) -> None:
        if lib.exon_retransmit_handler_on_nak(self.h, term_id, offset, length, TERM, now, self.out):
            self.sent.append((now, self.out.term_id, self.out.term_offset, self.out.length))

    def tick(self, now: int, capacity: int = 256) -> None:
        n = lib.exon_retransmit_handler_process_timeouts(self.h, now, self.batch, capacity)
        for r in self.batch[0:n]:
            self.sent.append((now, r.term_id, r.term_offset, r.length))


def test_immediate_resend_then_linger_suppresses_duplicates() -> None:
    h = Handler()
    h.nak(0, 7, 1024, 320)
    for now in range(0, 10 * MS, MS // 2):  # duplicates inside the linger window
        h.nak(now, 7, 1024, 320)
        h.tick(now)
    assert h.sent == [(0, 7, 1024, 320)]
    h.tick(10 * MS)  # linger over: forgotten
    assert h.h.active_count == 0
    h.nak(10 * MS + 1, 7, 1024, 320)
    assert h.sent[-1] == (10 * MS + 1, 7, 1024, 320)


def test_other_ranges_are_independent() -> None:
    h = Handler()
    h.nak(0, 7, 0, 64)
    h.nak(1, 7, 64, 64)
    h.nak(2, 8, 0, 64)
    h.nak(3, 7, 0, 64)
    assert [s[1:3] for s in h.sent] == [(7, 0), (7, 64), (8, 0)]


def test_at_most_max_resend_concurrent_actions() -> None:
    h = Handler(max_resend=16)
    for i in range(20):
        h.nak(i, 1, i * 64, 64)
    assert len(h.sent) == 16
    h.tick(10 * MS + 15)  # all 16 linger periods over
    h.nak(10 * MS + 20, 1, 19 * 64, 64)
    assert len(h.sent) == 17


def test_invalid_ranges_ignored() -> None:
    h = Handler()
    for offset, length in [(-32, 64), (TERM, 32), (TERM - 32, 64), (0, 0), (0, -5)]:
        h.nak(0, 1, offset, length)
    assert h.sent == []
    assert h.h.active_count == 0


def test_delayed_resend_fires_once_then_lingers() -> None:
    h = Handler(delay=2 * MS)
    h.nak(0, 3, 0, 128)
    h.nak(MS, 3, 0, 128)
    assert h.sent == []
    for now in range(0, 20 * MS, MS):
        h.tick(now)
    assert h.sent == [(2 * MS, 3, 0, 128)]
    assert h.h.active_count == 0


def test_bad_init_rejected() -> None:
    h = ffi.new("exon_retransmit_handler_t *")
    assert lib.exon_retransmit_handler_init(h, 0, MS, 0) == lib.EXON_E_ARGUMENT
    assert lib.exon_retransmit_handler_init(h, 0, MS, 257) == lib.EXON_E_ARGUMENT
