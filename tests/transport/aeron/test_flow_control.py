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
