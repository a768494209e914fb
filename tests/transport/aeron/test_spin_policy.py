"""The waiting thread's spin back-off (exon_spin_policy.h), as a pure state machine."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from exon.native import ffi, lib

SPIN = 50_000


def _policy() -> object:
    return ffi.new("exon_spin_policy_t *")


def test_a_thread_whose_spins_pay_keeps_spinning() -> None:
    p = _policy()
    for _ in range(100):
        assert lib.exon_spin_policy_budget(p, SPIN) == SPIN
        lib.exon_spin_policy_outcome(p, True)


def test_spins_that_run_out_skip_doubling_waits_up_to_the_cap() -> None:
    p = _policy()
    runs: list[int] = []  # waits parked without a spin between two spins that ran out
    parked = 0
    while len(runs) < 9:
        if lib.exon_spin_policy_budget(p, SPIN) == SPIN:
            if parked or runs or p.backoff:
                runs.append(parked)
            parked = 0
            lib.exon_spin_policy_outcome(p, False)
        else:
            parked += 1
    cap = lib.EXON_SPIN_BACKOFF_MAX
    assert runs == [1, 2, 4, 8, 16, 32, 64, cap, cap]


def test_an_answered_spin_halves_the_back_off() -> None:
    p = _policy()
    p.backoff = 32
    lib.exon_spin_policy_outcome(p, True)
    assert p.backoff == 16
    assert lib.exon_spin_policy_budget(p, SPIN) == SPIN


def test_no_spin_asked_is_no_spin_and_no_skip_used() -> None:
    p = _policy()
    p.skip = 3
    assert lib.exon_spin_policy_budget(p, 0) == 0
    assert p.skip == 3


@given(st.lists(st.booleans(), max_size=300))
def test_skips_are_bounded_and_a_spin_always_comes_again(outcomes: list[bool]) -> None:
    p = _policy()
    since_spin = 0
    for answered in outcomes:
        if lib.exon_spin_policy_budget(p, SPIN) == SPIN:
            since_spin = 0
            lib.exon_spin_policy_outcome(p, answered)
        else:
            since_spin += 1
        assert 0 <= p.skip <= lib.EXON_SPIN_BACKOFF_MAX
        assert since_spin <= lib.EXON_SPIN_BACKOFF_MAX


def test_patience_lets_spins_run_out_in_a_row_before_waits_skip() -> None:
    p = _policy()
    p.patience = lib.EXON_SPIN_PATIENCE_WAITS
    assert p.patience == 3
    for _ in range(2):  # two run out: the waits keep spinning
        assert lib.exon_spin_policy_budget(p, SPIN) == SPIN
        lib.exon_spin_policy_outcome(p, False)
    assert lib.exon_spin_policy_budget(p, SPIN) == SPIN
    lib.exon_spin_policy_outcome(p, True)  # an answer ends the run
    for _ in range(2):
        assert lib.exon_spin_policy_budget(p, SPIN) == SPIN
        lib.exon_spin_policy_outcome(p, False)
    assert p.skip == 0
    assert lib.exon_spin_policy_budget(p, SPIN) == SPIN
    lib.exon_spin_policy_outcome(p, False)  # the third in a row: back off
    assert p.skip == 1
    assert lib.exon_spin_policy_budget(p, SPIN) == 0
    assert lib.exon_spin_policy_budget(p, SPIN) == SPIN
    lib.exon_spin_policy_outcome(p, False)  # still in the run: the back-off doubles
    assert p.skip == 2
