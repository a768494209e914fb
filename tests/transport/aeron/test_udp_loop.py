"""The native loop over the UDP agents: a million messages through 5% loss, in order."""

from __future__ import annotations

import pytest

from exon.native import ffi, lib

pytestmark = pytest.mark.net


def _run(tmp_path, *, count: int, size: int, receive_loss: float = 0.0, send_loss: float = 0.0):
    params = ffi.new("exon_udp_loop_params_t *")
    directory = ffi.new("char[]", str(tmp_path).encode())
    params.directory = directory
    params.message_length = size
    params.message_count = count
    params.receive_loss_rate = receive_loss
    params.send_loss_rate = send_loss
    params.loss_seed = 42
    params.timeout_ns = 120 * 10**9
    params.verify = True
    result = ffi.new("exon_udp_loop_result_t *")
    rc = lib.exon_udp_loop_run(params, result)
    assert rc == 0, ffi.string(lib.exon_last_error()).decode()
    assert list(tmp_path.iterdir()) == []  # logs removed
    return result


@pytest.mark.parametrize("size", [32, 1024, 5000])
def test_clean_loopback_has_no_naks(tmp_path, size: int) -> None:
    r = _run(tmp_path, count=20_000, size=size)
    assert r.messages_received == 20_000
    assert r.errors == 0
    assert r.naks_sent == 0
    assert r.retransmits == 0


@pytest.mark.slow
def test_million_messages_under_5_percent_receive_loss(tmp_path) -> None:
    r = _run(tmp_path, count=1_000_000, size=32, receive_loss=0.05)
    assert r.messages_received == 1_000_000
    assert r.errors == 0  # complete and in order
    assert r.receive_loss_drops > 1000
    assert r.naks_sent > 0
    assert r.retransmits > 0


def test_send_side_loss_recovers(tmp_path) -> None:
    r = _run(tmp_path, count=50_000, size=200, send_loss=0.05)
    assert r.messages_received == 50_000
    assert r.errors == 0
    assert r.retransmits > 0


def test_bad_parameters(tmp_path) -> None:
    params = ffi.new("exon_udp_loop_params_t *")
    result = ffi.new("exon_udp_loop_result_t *")
    params.message_length = 4
    assert lib.exon_udp_loop_run(params, result) == lib.EXON_E_ARGUMENT
