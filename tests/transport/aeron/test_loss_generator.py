"""Debug loss generator: deterministic per seed, honours the rate, spares control frames."""

from __future__ import annotations

import pytest

from exon.native import ffi, lib
from exon.transport.aeron import frames as F

DATA = F.encode_data(flags=0xC0, term_offset=0, session_id=1, stream_id=2, term_id=3,
                     payload=b"x" * 20)
SM = F.encode_sm(session_id=1, stream_id=2, consumption_term_id=3, consumption_term_offset=0,
                 receiver_window=1024, receiver_id=9)


def _drops(rate: float, seed: int, n: int, packet: bytes = DATA, data_only: bool = True):
    g = ffi.new("exon_loss_generator_t *")
    assert lib.exon_loss_generator_init(g, rate, seed, data_only) == 0
    return [bool(lib.exon_loss_generator_should_drop(g, packet, len(packet))) for _ in range(n)], g


def test_same_seed_same_drops() -> None:
    a, _ = _drops(0.05, 42, 5000)
    b, _ = _drops(0.05, 42, 5000)
    c, _ = _drops(0.05, 43, 5000)
    assert a == b
    assert a != c


@pytest.mark.parametrize("rate", [0.0, 0.05, 0.5, 1.0])
def test_rate(rate: float) -> None:
    drops, g = _drops(rate, 7, 20000)
    assert abs(sum(drops) / 20000 - rate) < 0.01
    assert g.dropped == sum(drops)
    assert g.seen == 20000


def test_control_frames_pass_when_data_only() -> None:
    drops, _ = _drops(1.0, 1, 100, SM)
    assert not any(drops)
    drops, _ = _drops(1.0, 1, 100, SM, data_only=False)
    assert all(drops)


def test_bad_rate_rejected() -> None:
    g = ffi.new("exon_loss_generator_t *")
    assert lib.exon_loss_generator_init(g, 1.5, 0, True) == lib.EXON_E_ARGUMENT
    assert lib.exon_loss_generator_init(g, float("nan"), 0, True) == lib.EXON_E_ARGUMENT


def test_splitmix_reference_values() -> None:
    # splitmix64 seeded with 0: the published first outputs
    g = ffi.new("exon_loss_generator_t *")
    lib.exon_loss_generator_init(g, 0.5, 0, True)
    assert lib.exon_loss_generator_next(g) == 0xE220A8397B1DCDAF
    assert lib.exon_loss_generator_next(g) == 0x6E789E6AA1B965F4
