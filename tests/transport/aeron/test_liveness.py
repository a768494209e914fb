"""Liveness: a SIGKILLed client is timed out and reclaimed; a dead driver gives DriverTimeout."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from exon import errors
from exon.native import lib
from exon.transport.aeron import Aeron, MediaDriver

from .driver_fixtures import SMALL, collect, external_driver, kill, python_process, read_line

CLIENT = """
import sys, time
from exon.transport.aeron import Aeron
aeron = Aeron.connect(sys.argv[1], timeout=10)
pub = aeron.add_exclusive_publication("aeron:ipc", 30)
while not pub.is_connected:
    time.sleep(0.001)
pub.offer(b"before-death")
print(pub.registration_id, pub.original_registration_id, flush=True)
time.sleep(60)
"""


def repeat_until_raises(call: Callable[[], object], timeout: float = 10.0) -> None:
    """Call ``call`` until it raises (the exception propagates) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        call()
        time.sleep(0.02)


def test_sigkilled_client_is_timed_out_and_reclaimed(driver_dir: str) -> None:
    settings = dict(SMALL, client_liveness_timeout_ns=500_000_000)
    with MediaDriver.launch(dir=driver_dir, **settings), Aeron.connect(driver_dir) as aeron:
        sub = aeron.add_subscription("aeron:ipc", 30)
        proc = python_process(CLIENT, driver_dir)
        try:
            read_line(proc, 20)
            assert sub.image_count == 1
            assert collect(sub, 1) == [b"before-death"]
            before = aeron.counter_value(lib.EXON_SYSTEM_COUNTER_CLIENT_TIMEOUTS)
            labels = aeron.allocated_counters()
            pub_lmt = [i for i, label in labels.items() if label.startswith("pub-lmt")]
            assert len(pub_lmt) == 1
            kill(proc, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while sub.image_count and time.monotonic() < deadline:
                sub.wait(0.1)
            assert sub.image_count == 0
            assert aeron.counter_value(lib.EXON_SYSTEM_COUNTER_CLIENT_TIMEOUTS) == before + 1
            assert aeron.counter_state(pub_lmt[0]) != 1  # freed
            # our own client kept its keepalives going and is healthy
            aeron.check()
        finally:
            kill(proc)


def test_client_of_a_sigkilled_driver_gets_driver_timeout(driver_dir: str) -> None:
    proc = external_driver(driver_dir, driver_timeout_ms=1000)
    try:
        with Aeron.connect(driver_dir, timeout=5) as aeron:
            aeron.add_publication("aeron:ipc", 31)
            kill(proc, signal.SIGKILL)
            start = time.monotonic()
            with pytest.raises(errors.DriverTimeout, match="driver"):
                repeat_until_raises(lambda: aeron.add_subscription("aeron:ipc", 32, timeout=0.5))
            assert time.monotonic() - start < 10
            with pytest.raises(errors.DriverTimeout):
                aeron.check()
    finally:
        kill(proc)


def test_subscription_wait_raises_when_driver_dies(driver_dir: str) -> None:
    proc = external_driver(driver_dir, driver_timeout_ms=1000)
    try:
        with Aeron.connect(driver_dir, timeout=5, driver_timeout=0.5) as aeron:
            sub = aeron.add_subscription("aeron:ipc", 33)
            kill(proc, signal.SIGKILL)
            with pytest.raises(errors.DriverTimeout):
                repeat_until_raises(lambda: sub.wait(0.2))
    finally:
        kill(proc)


def test_closed_embedded_driver_is_detected_at_once(driver_dir: str) -> None:
    driver = MediaDriver.launch(dir=driver_dir, **SMALL)
    aeron = Aeron.connect(driver_dir)
    try:
        driver.close()
        with pytest.raises(errors.DriverTimeout, match="shut down"):
            repeat_until_raises(lambda: aeron.add_publication("aeron:ipc", 34, timeout=0.5))
    finally:
        aeron.close()
        driver.close()
