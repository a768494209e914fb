"""The media driver: directory handling, threading modes, idle strategies, CLI entry."""

from __future__ import annotations

import os
import resource
import signal
import time

import pytest

from exon import errors
from exon.native import ffi, lib
from exon.transport.aeron import Aeron, MediaDriver

from .driver_fixtures import SMALL, collect, kill, offer_all, python_process, read_line, wait_until


def round_trip(dir: str, stream: int = 40) -> None:
    with Aeron.connect(dir, timeout=5) as aeron:
        sub = aeron.add_subscription("aeron:ipc", stream)
        pub = aeron.add_publication("aeron:ipc", stream)
        assert wait_until(lambda: pub.is_connected, 3.0)
        msgs = [b"x" * n for n in (0, 1, 100, 3000, 5000)]
        offer_all(pub, msgs)
        assert collect(sub, len(msgs)) == msgs


def test_launch_creates_cnc_and_close_removes_logs(driver_dir: str) -> None:
    with MediaDriver.launch(dir=driver_dir, **SMALL) as driver:
        assert driver.dir == driver_dir
        assert os.path.exists(os.path.join(driver_dir, "cnc.dat"))
        assert os.path.isdir(os.path.join(driver_dir, "publications"))
        with Aeron.connect(driver_dir) as aeron:
            pub = aeron.add_publication("aeron:ipc", 1)
            assert os.path.exists(pub.log.path)
            path = pub.log.path
    assert driver.is_closed
    assert not os.path.exists(path)


def test_delete_on_shutdown(driver_dir: str) -> None:
    with MediaDriver.launch(dir=driver_dir, dir_delete_on_shutdown=True, **SMALL):
        assert os.path.isdir(driver_dir)
    assert not os.path.exists(driver_dir)


def test_second_driver_on_a_live_dir_is_refused(driver_dir: str) -> None:
    with (
        MediaDriver.launch(dir=driver_dir, **SMALL),
        pytest.raises(errors.StateError, match=f"driver already active in {driver_dir}"),
    ):
        MediaDriver.launch(dir=driver_dir, **SMALL)


def test_stale_dir_is_cleaned_and_reused(driver_dir: str) -> None:
    with MediaDriver.launch(dir=driver_dir, **SMALL):
        pass
    os.makedirs(os.path.join(driver_dir, "publications"), exist_ok=True)
    junk = os.path.join(driver_dir, "publications", "999.logbuffer")
    with open(junk, "wb") as f:
        f.write(b"old")
    with MediaDriver.launch(dir=driver_dir, **SMALL):
        assert not os.path.exists(junk)
        round_trip(driver_dir)


@pytest.mark.parametrize(
    ("mode", "threads"), [("DEDICATED", 3), ("SHARED_NETWORK", 2), ("SHARED", 1)]
)
def test_threading_modes_round_trip(driver_dir: str, mode: str, threads: int) -> None:
    with MediaDriver.launch(dir=driver_dir, threading_mode=mode, **SMALL) as driver:
        assert driver.thread_count == threads
        round_trip(driver_dir)


@pytest.mark.parametrize("idle", ["backoff", "sleep", "yield", "spin"])
def test_idle_strategies_round_trip(driver_dir: str, idle: str) -> None:
    with MediaDriver.launch(dir=driver_dir, threading_mode="SHARED", idle_strategy=idle,
                            **SMALL):
        round_trip(driver_dir)


def test_default_driver_does_not_busy_spin_when_idle(driver_dir: str) -> None:
    with MediaDriver.launch(dir=driver_dir, **SMALL), Aeron.connect(driver_dir):
        time.sleep(0.2)
        before = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic()
        time.sleep(1.0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - wall
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # 3 agent threads + the client thread: a busy spin would burn ~1 core each
    assert cpu < 0.5 * wall, f"idle driver used {cpu:.2f}s of CPU in {wall:.2f}s"


def test_backoff_idle_strategy_phases() -> None:
    idle = ffi.new("exon_idle_strategy_t *")
    lib.exon_idle_strategy_init(idle, lib.EXON_IDLE_BACKOFF, 10, 20, 1000, 8000)
    for _ in range(30):
        lib.exon_idle_strategy_idle(idle, 0)
    assert (idle.spins, idle.yields, idle.parks) == (10, 20, 0)
    parks = []
    for _ in range(6):
        parks.append(idle.park_ns)
        lib.exon_idle_strategy_idle(idle, 0)
    assert parks == [1000, 2000, 4000, 8000, 8000, 8000]
    assert idle.parks == 6
    lib.exon_idle_strategy_idle(idle, 1)  # work resets
    assert (idle.spins, idle.yields, idle.park_ns) == (0, 0, 1000)
    assert lib.exon_idle_strategy_type(b"backoff") == lib.EXON_IDLE_BACKOFF
    assert lib.exon_idle_strategy_type(b"bogus") == lib.EXON_E_ARGUMENT


def _parked_runner_idle(flag: object) -> object:
    """A backoff strategy past its spins and yields (its next idle step parks, 1 us)."""
    idle = ffi.new("exon_idle_strategy_t *")
    lib.exon_idle_strategy_init(idle, lib.EXON_IDLE_BACKOFF, 0, 0, 1000, 1000)
    idle.sleeping_flag = flag
    assert lib.exon_idle_strategy_would_park(idle)
    return idle


def test_a_runner_looks_again_with_its_flag_up_before_it_parks() -> None:
    # a commit lands after the first look, and its writer saw the flag still down (no
    # ring): the second look, made with the flag up, finds it and the runner does not park
    flag = ffi.new("int32_t *")
    idle = _parked_runner_idle(flag)
    looks: list[int] = []

    @ffi.callback("int(void *, int64_t)")
    def duty(state: object, now_ns: int) -> int:
        looks.append(flag[0])  # the flag as each look saw it
        return 0 if len(looks) == 1 else 1

    assert lib.exon_idle_strategy_cycle(idle, duty, ffi.NULL, 0) == 1
    assert looks == [0, 1]  # the second look ran with the flag up
    assert flag[0] == 0  # and took it down again: nothing to ring
    assert idle.parks == 0


def test_a_runner_with_nothing_to_do_parks_after_its_second_look() -> None:
    flag = ffi.new("int32_t *")
    idle = _parked_runner_idle(flag)
    looks: list[int] = []

    @ffi.callback("int(void *, int64_t)")
    def duty(state: object, now_ns: int) -> int:
        looks.append(flag[0])
        return 0

    assert lib.exon_idle_strategy_cycle(idle, duty, ffi.NULL, 0) == 0
    assert looks == [0, 1]
    assert idle.parks == 1
    assert flag[0] == 0  # down again once the park ended


def test_a_runner_looks_once_while_it_would_not_park() -> None:
    flag = ffi.new("int32_t *")
    idle = ffi.new("exon_idle_strategy_t *")
    lib.exon_idle_strategy_init(idle, lib.EXON_IDLE_BACKOFF, 5, 0, 1000, 1000)
    idle.sleeping_flag = flag
    calls = []

    @ffi.callback("int(void *, int64_t)")
    def duty(state: object, now_ns: int) -> int:
        calls.append(now_ns)
        return 0

    assert not lib.exon_idle_strategy_would_park(idle)
    lib.exon_idle_strategy_cycle(idle, duty, ffi.NULL, 7)
    assert calls == [7]  # still spinning: one look, no flag
    assert idle.parks == 0


def test_bad_channels_are_uri_errors_naming_the_bad_part(aeron: Aeron) -> None:
    with pytest.raises(errors.ChannelUriError, match="99999"):
        aeron.add_publication("aeron:udp?endpoint=127.0.0.1:99999", 1)
    with pytest.raises(errors.ChannelUriError, match="mtu"):
        aeron.add_subscription("aeron:udp?endpoint=127.0.0.1:0|mtu=lots", 1)
    with pytest.raises(errors.ChannelUriError, match="endpoint"):
        aeron.add_subscription("aeron:udp?interface=127.0.0.1", 1)
    with pytest.raises(errors.ChannelUriError, match="port"):
        aeron.add_publication("aeron:udp?endpoint=127.0.0.1:0", 1)
    with pytest.raises(errors.ChannelUriError, match="invalid channel"):
        aeron.add_subscription("tcp://nope", 1)
    with pytest.raises(errors.ChannelUriError, match="malformed parameter"):
        aeron.add_publication("aeron:ipc?term-length", 1)
    with pytest.raises(errors.ChannelUriError):
        aeron.add_publication("", 1)
    # the driver is still healthy afterwards
    round_trip(aeron.dir, 41)


def test_terminate_driver_command(driver_dir: str) -> None:
    with MediaDriver.launch(dir=driver_dir, **SMALL) as driver, Aeron.connect(driver_dir) as a:
        assert not driver.terminate_requested
        a.terminate_driver()
        assert driver.terminate_requested


def test_driver_main_runs_until_sigterm(driver_dir: str) -> None:
    code = ("import sys; from exon.transport.aeron.driver_main import main; "
            "sys.exit(main(sys.argv[1:]))")
    proc = python_process(code, "--dir", driver_dir, "--set", "threading_mode=SHARED",
                          "--set", "ipc_term_buffer_length=64k")
    try:
        assert read_line(proc, 20) == driver_dir
        round_trip(driver_dir)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not os.listdir(os.path.join(driver_dir, "publications"))
    finally:
        kill(proc)


def test_an_agent_doorbell_is_rung_once_per_park() -> None:
    # the first ringer of a parked runner clears its sleeping flag: the commits made while
    # it wakes do not each send a datagram; an awake runner is never rung
    flag = ffi.new("int32_t[1]", [1])
    lib.exon_agent_doorbell_ring(0x5EED, 0, flag)  # no such driver: the datagram goes nowhere
    assert flag[0] == 0
    assert lib.exon_agent_doorbell_ring(0x5EED, 0, flag) == 0



def test_launch_refuses_an_over_long_dir_in_c_too() -> None:
    # the C launch checks what a caller other than MediaDriver (which validates the
    # setting first) may pass: a dir whose log file paths would not fit
    from exon.transport.aeron import layout

    ctx = ffi.new("exon_driver_context_t *")
    lib.exon_driver_context_defaults(ctx)
    ctx.dir = b"/dev/shm/" + b"d" * (layout.DRIVER_DIR_MAX_LENGTH - 9)
    out = ffi.new("exon_driver_t **")
    assert lib.exon_driver_launch(out, ctx) == lib.EXON_E_ARGUMENT
    assert out[0] == ffi.NULL
    text = ffi.string(lib.exon_last_error()).decode()
    assert f"is {layout.DRIVER_DIR_MAX_LENGTH} bytes long: it must be shorter than" in text
