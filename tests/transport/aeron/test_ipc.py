"""IPC publications and subscriptions through the media driver (embedded and external)."""

from __future__ import annotations

import os
import time

from exon.native import lib
from exon.transport.aeron import (
    BACK_PRESSURED,
    NOT_CONNECTED,
    Aeron,
    ExclusivePublication,
    Publication,
)

from .driver_fixtures import (
    collect,
    external_driver,
    kill,
    offer_all,
    python_process,
    read_line,
    wait_until,
)


def test_embedded_round_trip(aeron: Aeron) -> None:
    sub = aeron.add_subscription("aeron:ipc", 10)
    pub = aeron.add_publication("aeron:ipc", 10)
    assert isinstance(pub, Publication)
    assert wait_until(lambda: pub.is_connected, 2.0)
    assert wait_until(lambda: sub.image_count == 1, 2.0)  # the image event is asynchronous
    messages = [b"m%d" % i for i in range(500)]
    got: list[bytes] = []
    offer_all(pub, messages, drain=lambda: sub.poll(lambda d, h: got.append(bytes(d)), 64))
    got += collect(sub, len(messages) - len(got))
    assert got == messages


def test_not_connected_without_subscriber(aeron: Aeron) -> None:
    pub = aeron.add_publication("aeron:ipc", 11)
    time.sleep(0.02)
    assert not pub.is_connected
    assert pub.offer(b"x") == NOT_CONNECTED


def test_concurrent_publications_share_a_session_exclusive_do_not(aeron: Aeron) -> None:
    a = aeron.add_publication("aeron:ipc", 12)
    b = aeron.add_publication("aeron:ipc", 12)
    x = aeron.add_exclusive_publication("aeron:ipc", 12)
    y = aeron.add_exclusive_publication("aeron:ipc", 12)
    assert isinstance(x, ExclusivePublication)
    assert a.session_id == b.session_id
    assert a.log.path == b.log.path
    assert len({a.session_id, x.session_id, y.session_id}) == 3
    for session in (a.session_id, x.session_id, y.session_id):
        assert not -1 <= session <= 1000
    assert a.registration_id != b.registration_id
    sub = aeron.add_subscription("aeron:ipc", 12)
    assert wait_until(lambda: sub.image_count == 3, 2.0)


def test_image_appears_then_goes_at_end_of_stream(aeron: Aeron) -> None:
    pub = aeron.add_exclusive_publication("aeron:ipc", 13)
    sub = aeron.add_subscription("aeron:ipc", 13)
    assert wait_until(lambda: sub.image_count == 1, 2.0)
    image = sub.images[0]
    assert image.session_id == pub.session_id
    assert wait_until(lambda: pub.is_connected, 2.0)
    offer_all(pub, [b"a" * 100, b"b" * 100])
    final = pub.position
    pub.close()
    got = collect(sub, 2)
    assert got == [b"a" * 100, b"b" * 100]
    assert image.end_of_stream_position == final
    assert wait_until(lambda: sub.image_count == 0, 3.0)
    # the log file goes after the (zero) linger
    assert wait_until(lambda: not os.path.exists(pub.log.path), 3.0)


def test_two_subscribers_each_get_everything(aeron: Aeron) -> None:
    s1 = aeron.add_subscription("aeron:ipc", 14)
    s2 = aeron.add_subscription("aeron:ipc", 14)
    pub = aeron.add_publication("aeron:ipc", 14)
    assert wait_until(lambda: pub.is_connected and s1.image_count == s2.image_count == 1, 2.0)
    msgs = [bytes([i]) * (i + 1) for i in range(100)]
    offer_all(pub, msgs)
    assert collect(s1, 100) == msgs
    assert collect(s2, 100) == msgs


def test_slow_subscriber_back_pressures(aeron: Aeron) -> None:
    sub = aeron.add_subscription("aeron:ipc", 15)
    pub = aeron.add_publication("aeron:ipc", 15)
    assert wait_until(lambda: pub.is_connected, 2.0)
    payload = b"z" * 1000
    results = [pub.offer(payload) for _ in range(200)]  # window = 32 KiB: fills fast
    assert BACK_PRESSURED in results
    bpe = lib.EXON_SYSTEM_COUNTER_BACK_PRESSURE_EVENTS
    assert wait_until(lambda: aeron.counter_value(bpe) >= 1)
    accepted = sum(1 for r in results if r > 0)
    assert collect(sub, accepted) == [payload] * accepted


def test_late_subscriber_joins_at_current_position(aeron: Aeron) -> None:
    early = aeron.add_subscription("aeron:ipc", 16)
    pub = aeron.add_publication("aeron:ipc", 16)
    assert wait_until(lambda: pub.is_connected, 2.0)
    offer_all(pub, [b"old"])
    assert collect(early, 1) == [b"old"]
    late = aeron.add_subscription("aeron:ipc", 16)
    assert wait_until(lambda: late.image_count == 1, 2.0)
    offer_all(pub, [b"new"])
    assert collect(late, 1) == [b"new"]


def test_wait_wakes_on_offer_from_another_thread(aeron: Aeron) -> None:
    import threading

    sub = aeron.add_subscription("aeron:ipc", 17)
    pub = aeron.add_publication("aeron:ipc", 17)
    assert wait_until(lambda: pub.is_connected and sub.image_count == 1, 2.0)
    assert sub.wait(0.05) is False
    timer = threading.Timer(0.1, lambda: pub.offer(b"wake"))
    timer.start()
    try:
        assert sub.wait(3.0) is True
    finally:
        timer.join()
    assert collect(sub, 1) == [b"wake"]


PUBLISHER = """
import sys
from exon.transport.aeron import Aeron
dir, stream, tag, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
with Aeron.connect(dir, timeout=10) as aeron:
    pub = aeron.add_publication("aeron:ipc", stream)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(count):
        msg = f"{tag}:{i}".encode()
        while pub.offer(msg) < 0:
            pass
    print("done", flush=True)
"""


def test_external_driver_two_publisher_processes(driver_dir: str) -> None:
    driver_proc = external_driver(driver_dir)
    pubs = []
    try:
        with Aeron.connect(driver_dir, timeout=10) as aeron:
            sub = aeron.add_subscription("aeron:ipc", 20)
            count = 3000
            for tag in ("A", "B"):
                proc = python_process(PUBLISHER, driver_dir, "20", tag, str(count))
                pubs.append(proc)
            for proc in pubs:
                assert read_line(proc, 20) == "ready"
            # both publishers share one concurrent IPC publication: one image
            assert wait_until(lambda: sub.image_count == 1, 5.0)
            _start(pubs)
            got = collect(sub, 2 * count, timeout=30)
            for proc in pubs:
                assert read_line(proc, 20) == "done"
                proc.wait(timeout=10)
    finally:
        for proc in pubs:
            kill(proc)
        kill(driver_proc, 15)
    assert len(got) == 2 * count
    seen = {"A": [], "B": []}
    for m in got:
        tag, i = m.decode().split(":")
        seen[tag].append(int(i))
    assert seen["A"] == list(range(count))
    assert seen["B"] == list(range(count))


def _start(procs: list) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
