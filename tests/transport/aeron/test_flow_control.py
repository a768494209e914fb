"""Flow and congestion control: sender limit, static window, receiver window, SM schedule."""

from __future__ import annotations

import itertools

import pytest

from exon.native import ffi, lib

MS = 1_000_000
KIB = 1024
BITS = 16  # 64 KiB terms


def test_unicast_max_flow_control() -> None:
    init = 100
    limit = lib.exon_flow_control_unicast_on_sm(0, init, 0, 128 * KIB, init, BITS)
    assert limit == 128 * KIB
    limit = lib.exon_flow_control_unicast_on_sm(limit, init + 2, 64, 32 * KIB, init, BITS)
    assert limit == 2 * 64 * KIB + 64 + 32 * KIB
    # an older SM never moves the limit back
    assert lib.exon_flow_control_unicast_on_sm(limit, init, 0, 1024, init, BITS) == limit
    # term ids wrap
    assert lib.exon_compute_position(-(2**31), 0, BITS, 2**31 - 1) == 1 << BITS


@pytest.mark.parametrize(
    ("term", "initial", "window"),
    [(64 * KIB, 128 * KIB, 32 * KIB), (16 * 1024 * KIB, 128 * KIB, 128 * KIB),
     (256 * KIB, 128 * KIB, 128 * KIB)],
)
def test_static_window(term: int, initial: int, window: int) -> None:
    assert lib.exon_static_window_length(term, initial) == window


@pytest.mark.parametrize(
    ("term", "initial", "granted", "window"),
    [
        (16 * 1024 * KIB, 512 * KIB, 4096 * KIB, 512 * KIB),  # the buffer is ample
        (16 * 1024 * KIB, 512 * KIB, 416 * KIB, 208 * KIB),  # rmem_max capped the buffer
        (64 * KIB, 512 * KIB, 4096 * KIB, 32 * KIB),  # half the term still bounds it
        (16 * 1024 * KIB, 512 * KIB, 0, 512 * KIB),  # the buffer size is unknown
        (16 * 1024 * KIB, 512 * KIB, 2 * KIB, 4 * KIB),  # never below a page
    ],
)
def test_receiver_window_fits_the_granted_buffer(term: int, initial: int, granted: int,
                                                 window: int) -> None:
    assert lib.exon_receiver_window_length(term, initial, granted) == window


def test_max_retransmit_length() -> None:
    assert lib.exon_flow_control_max_retransmit_length(0, 4096, 65536, 1024) == 4096
    assert lib.exon_flow_control_max_retransmit_length(0, 65536, 65536, 1024) == 16 * 1024
    assert lib.exon_flow_control_max_retransmit_length(65000, 4096, 65536, 1 << 20) == 536


def test_receiver_window_check() -> None:
    assert lib.exon_flow_control_receiver_check(1000, 500, 999, 1100) == lib.EXON_FLOW_UNDER_RUN
    assert lib.exon_flow_control_receiver_check(1000, 500, 1000, 1500) == lib.EXON_FLOW_OK
    assert lib.exon_flow_control_receiver_check(1000, 500, 1400, 1501) == lib.EXON_FLOW_OVER_RUN


def test_sm_schedule_quarter_window_and_timeout() -> None:
    s = ffi.new("exon_sm_scheduler_t *")
    lib.exon_sm_scheduler_init(s, 200 * MS, 0)
    window = 128 * KIB
    sent = []
    consumed = 0
    for step in range(1, 2001):  # 1 ms ticks for 2 s
        now = step * MS
        if 100 <= step < 600:
            consumed += 1024  # the subscriber reads 1 KiB/ms for half a second
        if lib.exon_sm_scheduler_check(s, consumed, window, now):
            sent.append((step, consumed))
    assert sent[0] == (1, 0)  # first SM at once
    busy = [c for st, c in sent if 100 <= st < 600]
    # while consuming, an SM each time the position moved > window/4 = 32 KiB
    assert all(b - a == 33 * 1024 for a, b in itertools.pairwise(busy))
    idle_steps = [st for st, _ in sent if st >= 700]
    assert all(b - a == 200 for a, b in itertools.pairwise(idle_steps))
    assert len(idle_steps) >= 6
    assert lib.exon_sm_scheduler_check(s, consumed, window // 2, 2001 * MS)  # window changed


def _fc(strategy: int, timeout_ns: int = 0) -> object:
    fc = ffi.new("exon_flow_control_t *")
    lib.exon_flow_control_init(fc, strategy, timeout_ns)
    return fc


def test_multicast_min_follows_the_slowest_receiver() -> None:
    fc = _fc(lib.EXON_FC_MIN)
    window = 64 * KIB
    limit = lib.exon_flow_control_on_sm(fc, 0, 1, 0, window, 0)
    assert limit == window
    limit = lib.exon_flow_control_on_sm(fc, limit, 2, 10 * KIB, window, 1 * MS)
    assert limit == window  # receiver 1 (at 0) is the slowest
    limit = lib.exon_flow_control_on_sm(fc, limit, 1, 50 * KIB, window, 2 * MS)
    assert limit == 10 * KIB + window  # now receiver 2 is
    # a reordered older SM never moves a receiver back
    assert lib.exon_flow_control_on_sm(fc, limit, 1, 5 * KIB, window, 3 * MS) == limit
    assert fc.receiver_count == 2
    # a third, slower receiver joins: the limit may go down
    limit = lib.exon_flow_control_on_sm(fc, limit, 3, 0, 4 * KIB, 4 * MS)
    assert limit == 4 * KIB


def test_multicast_min_drops_a_silent_receiver_after_the_timeout() -> None:
    fc = _fc(lib.EXON_FC_MIN, 100 * MS)
    window = 32 * KIB
    limit = lib.exon_flow_control_on_sm(fc, 0, 7, 0, window, 0)
    now = 0
    pos = 0
    for _ in range(50):  # receiver 8 moves on every 10 ms, receiver 7 went silent at 0
        now += 10 * MS
        pos += 16 * KIB
        limit = lib.exon_flow_control_on_sm(fc, limit, 8, pos, window, now)
        limit = lib.exon_flow_control_on_idle(fc, limit, now)
        if now <= 100 * MS:
            assert limit == window, now
    assert fc.receiver_count == 1
    assert limit == pos + window
    # everybody silent: the limit stays where it is
    assert lib.exon_flow_control_on_idle(fc, limit, now + 10_000 * MS) == limit
    assert fc.receiver_count == 0


def test_multicast_min_default_timeout_and_table_bound() -> None:
    fc = _fc(lib.EXON_FC_MIN)
    assert fc.receiver_timeout_ns == lib.EXON_FC_RECEIVER_TIMEOUT_DEFAULT_NS == 2000 * MS
    cap = lib.EXON_FC_RECEIVERS_MAX
    limit = 0
    for rid in range(cap + 5):  # receiver rid at position rid KiB, heard at time rid
        limit = lib.exon_flow_control_on_sm(fc, limit, 1000 + rid, rid * KIB, 0, rid)
    assert fc.receiver_count == cap
    assert fc.replaced == 5
    assert limit == 5 * KIB  # the five heard from least recently were replaced


def test_multicast_max_follows_the_fastest_receiver() -> None:
    fc = _fc(lib.EXON_FC_MAX)
    window = 64 * KIB
    limit = lib.exon_flow_control_on_sm(fc, 0, 1, 0, window, 0)
    limit = lib.exon_flow_control_on_sm(fc, limit, 2, 100 * KIB, window, 1)
    assert limit == 100 * KIB + window
    assert lib.exon_flow_control_on_sm(fc, limit, 1, 0, window, 2) == limit
    assert lib.exon_flow_control_on_idle(fc, limit, 10**12) == limit
    assert fc.receiver_count == 0  # max keeps no table


def test_multicast_nak_delay_is_aeron_s_optimal_feedback_delay() -> None:
    import math

    g = ffi.new("exon_feedback_delay_t *")
    top = lib.EXON_NAK_MULTICAST_MAX_BACKOFF_NS
    assert top == 10 * MS
    lib.exon_feedback_delay_init(g, top, lib.EXON_NAK_MULTICAST_GROUP_SIZE, 42)
    delays = sorted(lib.exon_feedback_delay_next(g) for _ in range(20_000))
    assert delays[0] >= 0
    assert delays[-1] < top
    lam = math.log(10) + 1

    def quantile(u: float) -> float:  # (T / lambda) ln(1 + u (e^lambda - 1))
        return top / lam * math.log1p(u * (math.exp(lam) - 1))

    for u in (0.1, 0.25, 0.5, 0.75, 0.9):
        assert abs(delays[int(u * len(delays))] - quantile(u)) < 0.02 * top, u
    # most delays are near the top, few near 0: receivers rarely NAK at once
    assert delays[len(delays) // 2] > 0.7 * top
    # the same seed gives the same sequence; a generator without backoff gives 0
    again = ffi.new("exon_feedback_delay_t *")
    lib.exon_feedback_delay_init(again, top, 10, 42)
    lib.exon_feedback_delay_init(g, top, 10, 42)
    assert [lib.exon_feedback_delay_next(g) for _ in range(5)] == [
        lib.exon_feedback_delay_next(again) for _ in range(5)]
    lib.exon_feedback_delay_init(g, 0, 10, 42)
    assert lib.exon_feedback_delay_next(g) == 0
