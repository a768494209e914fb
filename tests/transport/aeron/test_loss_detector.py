"""Loss detector: gaps found, NAKs after the delay, retried after the retry delay; C == Python."""

from __future__ import annotations

import random

import pytest

from exon.native import ffi, lib
from exon.transport.aeron.policies import LossDetector, term_rebuilder_insert
from tests.transport.aeron.helpers import TERM_ID, TERM_LENGTH, datagrams_for_term, position

DELAY, RETRY = 1_000, 100_000


class CDetector:
    def __init__(self) -> None:
        self.d = ffi.new("exon_loss_detector_t *")
        lib.exon_loss_detector_init(self.d, DELAY, RETRY)
        self.r = ffi.new("exon_loss_detector_result_t *")

    def scan(self, term: bytearray, rebuild: int, hwm: int, now: int):
        buf = ffi.from_buffer("uint8_t[]", term)
        work = lib.exon_loss_detector_scan(self.d, buf, rebuild, hwm, now, TERM_LENGTH, TERM_ID,
                                           self.r)
        nak = (self.r.nak_term_id, self.r.nak_term_offset, self.r.nak_length) if self.r.send_nak \
            else None
        return work, self.r.rebuild_position, bool(self.r.loss_found), nak


def _term_with_hole(rng: random.Random):
    datagrams, _ = datagrams_for_term(rng, fill=8 * 1024)
    term = bytearray(TERM_LENGTH)
    hole = datagrams[3]
    for offset, packet in datagrams:
        if (offset, packet) != hole:
            term_rebuilder_insert(term, offset, packet)
    end = datagrams[-1][0] + len(datagrams[-1][1])
    return term, hole, end, datagrams


@pytest.mark.parametrize("impl", ["c", "py"])
def test_nak_after_delay_then_retry_until_filled(impl: str) -> None:
    term, (hole_offset, hole_packet), end, _ = _term_with_hole(random.Random(1))
    det = CDetector() if impl == "c" else None
    py = LossDetector(delay_ns=DELAY, retry_delay_ns=RETRY)

    def scan(rebuild: int, now: int):
        if det is not None:
            _, pos, found, nak = det.scan(term, rebuild, end, now)
            return pos, found, nak
        r = py.scan(term, rebuild, end, now, TERM_ID)
        return r.rebuild_position, r.loss_found, r.nak

    naks = []
    rebuild = 0
    for now in range(0, 350_001, 500):  # an integer clock, 0.5 us steps
        rebuild, found, nak = scan(rebuild, now)
        assert rebuild == hole_offset
        if found:
            assert now == 0
        if nak:
            naks.append((now, nak))
    expected = (TERM_ID, hole_offset, len(hole_packet))
    assert naks == [(1000, expected), (101_000, expected), (201_000, expected),
                    (301_000, expected)]
    term_rebuilder_insert(term, hole_offset, hole_packet)
    rebuild, found, nak = scan(rebuild, 400_000)
    assert (rebuild, found, nak) == (end, False, None)


def test_gap_at_the_tail_is_seen_through_the_high_water_mark() -> None:
    # data lost at the end: a heartbeat moved the hwm past what arrived
    term = bytearray(TERM_LENGTH)
    det = CDetector()
    work, rebuild, found, nak = det.scan(term, 0, 4096, 0)
    assert (rebuild, found, nak, work) == (0, True, None, 1)
    work, rebuild, found, nak = det.scan(term, 0, 4096, DELAY)
    assert nak == (TERM_ID, 0, 4096)
    assert work == 1


def test_nothing_to_do_when_complete() -> None:
    det = CDetector()
    assert det.scan(bytearray(TERM_LENGTH), 64, 64, 0) == (0, 64, False, None)


def test_next_term_position_scans_to_the_term_end() -> None:
    rng = random.Random(3)
    _, full = datagrams_for_term(rng, term_id=TERM_ID + 1)
    term = bytearray(full)
    start = position(TERM_ID + 1, 0)
    det = CDetector()
    _, rebuild, found, _ = det.scan(term, start, position(TERM_ID + 2, 128), 0)
    assert rebuild == position(TERM_ID + 2, 0)
    assert not found


@pytest.mark.parametrize("seed", range(12))
def test_parity_random_arrivals(seed: int) -> None:
    rng = random.Random(seed)
    datagrams, _ = datagrams_for_term(rng)
    rng.shuffle(datagrams)
    term = bytearray(TERM_LENGTH)
    c = CDetector()
    py = LossDetector(delay_ns=DELAY, retry_delay_ns=RETRY)
    c_rebuild = py_rebuild = hwm = 0
    now = 0
    for offset, packet in datagrams:
        if rng.random() < 0.8:
            term_rebuilder_insert(term, offset, packet)
            hwm = max(hwm, offset + len(packet))
        for _ in range(rng.randint(1, 3)):
            now += rng.choice([0, 1, 500, 1000, 50_000, 100_000, 150_000])
            work, c_rebuild, found, nak = c.scan(term, c_rebuild, hwm, now)
            r = py.scan(term, py_rebuild, hwm, now, TERM_ID)
            py_rebuild = r.rebuild_position
            assert (c_rebuild, found, nak) == (r.rebuild_position, r.loss_found, r.nak)
            assert work == int(found) + int(nak is not None)
    assert c.d.expiry_ns == py.expiry_ns


# -- the NAK policy (issue 13): verified sources only, backoff, a cap per window ------------


class PolicyDetectors:
    """The C detector and its Python twin with the same policy, scanned side by side."""

    def __init__(self, *, max_retry: int, window: int = 0, per_window: int = 0,
                 verified: bool = True) -> None:
        self.c = CDetector()
        lib.exon_loss_detector_set_policy(self.c.d, max_retry, window, per_window, verified)
        self.py = LossDetector(delay_ns=DELAY, retry_delay_ns=RETRY, max_retry_delay_ns=max_retry,
                               window_ns=window, max_per_window=per_window, verified=verified)

    def verify(self, now: int) -> None:
        lib.exon_loss_detector_verify(self.c.d, now)
        self.py.verify(now)

    def scan(self, term: bytearray, rebuild: int, hwm: int, now: int):
        _, c_pos, c_found, c_nak = self.c.scan(term, rebuild, hwm, now)
        r = self.py.scan(term, rebuild, hwm, now, TERM_ID)
        assert (c_pos, c_found, c_nak) == (r.rebuild_position, r.loss_found, r.nak)
        assert bool(self.c.r.nak_suppressed) == r.nak_suppressed
        return r


def _clock(dets: PolicyDetectors, term: bytearray, hwm: int, until: int, step: int = 500):
    naks, suppressed = [], 0
    for now in range(0, until + 1, step):
        r = dets.scan(term, 0, hwm, now)
        if r.nak:
            naks.append(now)
        suppressed += r.nak_suppressed
    return naks, suppressed


def test_an_unverified_detector_withholds_every_nak_until_verified() -> None:
    # a SETUP alone made the image: a gap (one DATA far ahead) draws no NAK
    term = bytearray(TERM_LENGTH)
    dets = PolicyDetectors(max_retry=RETRY, verified=False)
    naks, suppressed = _clock(dets, term, 4096, 1_000_000)
    assert naks == []
    assert suppressed == 10  # due at 1 us, then every 100 us: each counted once
    # the source proves real: the open gap is due at once, then the plain retry
    dets.verify(1_000_200)
    r = dets.scan(term, 0, 4096, 1_000_200)
    assert r.nak == (TERM_ID, 0, 4096)
    assert dets.scan(term, 0, 4096, 1_000_200 + RETRY - 1).nak is None
    assert dets.scan(term, 0, 4096, 1_000_200 + RETRY).nak == (TERM_ID, 0, 4096)


def test_the_same_gap_backs_off_to_the_cap_and_a_new_gap_starts_over() -> None:
    term, (hole_offset, hole_packet), end, datagrams = _term_with_hole(random.Random(5))
    dets = PolicyDetectors(max_retry=8 * RETRY)
    naks, _ = _clock(dets, term, end, 3_000_000)
    # 1 us, then +100, +200, +400, +800 (the cap), +800 ... us
    assert naks == [1_000, 101_000, 301_000, 701_000, 1_501_000, 2_301_000]
    # the hole fills; a later gap starts from the retry delay again
    term_rebuilder_insert(term, hole_offset, hole_packet)
    later_offset, later_packet = datagrams[6]
    term[later_offset:later_offset + len(later_packet)] = bytes(len(later_packet))
    rebuild = dets.scan(term, 0, end, 3_000_000).rebuild_position
    assert rebuild == later_offset
    times = [now for now in range(3_000_000, 3_400_001, 500)
             if dets.scan(term, rebuild, end, now).nak]
    assert times == [3_001_000, 3_101_000, 3_301_000]


def test_naks_over_the_window_cap_wait_for_the_next_window() -> None:
    term = bytearray(TERM_LENGTH)
    dets = PolicyDetectors(max_retry=RETRY, window=1_000_000, per_window=3)
    naks, suppressed = _clock(dets, term, 4096, 2_500_000)
    # windows of 1 ms from the clock's 0: three NAKs in each, the fourth waits for the next
    assert naks == [1_000, 101_000, 201_000, 1_000_000, 1_100_000, 1_200_000, 2_000_000,
                    2_100_000, 2_200_000]
    assert suppressed == 3  # once per window that hit the cap (at 301, 1300 and 2300 us)


@pytest.mark.parametrize("seed", range(12))
def test_policy_parity_random_arrivals_and_verification(seed: int) -> None:
    rng = random.Random(100 + seed)
    datagrams, _ = datagrams_for_term(rng)
    rng.shuffle(datagrams)
    term = bytearray(TERM_LENGTH)
    dets = PolicyDetectors(max_retry=rng.choice([RETRY, 4 * RETRY, 50 * RETRY]),
                           window=rng.choice([0, 300_000, 1_000_000]),
                           per_window=rng.choice([1, 2, 5]), verified=rng.random() < 0.5)
    rebuild = hwm = now = 0
    for offset, packet in datagrams:
        if rng.random() < 0.8:
            term_rebuilder_insert(term, offset, packet)
            hwm = max(hwm, offset + len(packet))
        for _ in range(rng.randint(1, 3)):
            now += rng.choice([0, 1, 500, 1000, 50_000, 100_000, 150_000, 700_000])
            if rng.random() < 0.05:
                dets.verify(now)
            rebuild = dets.scan(term, rebuild, hwm, now).rebuild_position
    assert dets.c.d.expiry_ns == dets.py.expiry_ns
    assert dets.c.d.backoff_ns == dets.py.backoff_ns
    assert dets.c.d.window_count == dets.py.window_count
