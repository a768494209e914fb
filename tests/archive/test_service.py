"""The archive service over exon sockets: ingest with durable cookies, remote replay,
control errors, exactly-once keyed ingest, concurrent replays."""

from __future__ import annotations

import os
import random
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import msgpack
import pytest

import exon
from exon.archive import (
    ArchiveClient,
    ArchiveError,
    ArchiveLocked,
    ArchiveService,
    ControlError,
    RecordingNotFound,
    ReplayRangeError,
    protocol,
)
from exon.archive.service import (
    BATCH,
    BATCH_BYTES,
    DEFAULT_INGEST_MESSAGE,
    INFO_EVENTS_BYTES,
    INGEST_CREDITS,
    INGEST_START_CREDITS,
    MAX_EVENT_TEXT,
    MAX_EVENTS,
    POLL,
    take_size,
)
from tests.archive.conftest import SEGMENT, fill

pytestmark = pytest.mark.net


@pytest.fixture
def service(tmp_path) -> Iterator[ArchiveService]:
    with ArchiveService(str(tmp_path / "arch"), ingest={"orders": 10, "clicks": 11},
                        segment_length=SEGMENT) as svc:
        yield svc


@pytest.fixture
def producer() -> Iterator[exon.Node]:
    with exon.Node() as node:
        yield node


def push_all(node: exon.Node, peer: str, payloads: list[bytes], *, push: Any = None) -> None:
    """Send ``payloads`` to ``peer`` with cookies and wait for every cookie: on a new PUSH,
    closed afterwards, or on ``push`` (linked to ``peer``), left open."""
    own = push is None
    if own:
        push = node.socket("push")
        push.link(peer, timeout=5)
    for i, p in enumerate(payloads):
        push.send(p, cookie=i, timeout=10)
    got = [push.receive(timeout=10) for _ in payloads]
    assert [type(c) for c in got] == [exon.Cookie] * len(payloads)
    assert sorted(c.value for c in got) == list(range(len(payloads)))
    if own:
        push.close()


def test_record_and_replay_random_sizes(service: ArchiveService, producer: exon.Node) -> None:
    rng = random.Random(11)
    payloads = [rng.randbytes(rng.choice([0, 1, 64, 1400, 1500, 9000, 40000]))
                for _ in range(300)]
    push_all(producer, f"{service.address}/10", payloads)
    with ArchiveClient(service.address) as ac:
        assert ac.stop_position("orders") > 0
        got = list(ac.replay("orders"))
        assert [r.payload for r in got] == payloads
        producer_id = got[0].producer
        assert producer_id.startswith(producer.address + "/")
        assert all(r.timestamp > 0 for r in got)
        # by position, from the middle, to a bound
        mid, end = got[100].position, got[200].position
        assert [r.payload for r in ac.replay("orders", mid, end)] == payloads[100:200]
        assert ac.recording("clicks").stop_position == 0
        assert list(ac.replay("clicks")) == []
        [orders, clicks] = ac.recordings()
        assert (orders.name, orders.ingest_tag, clicks.name) == ("orders", 10, "clicks")
        assert ac.ingest_peer("clicks") == f"{service.address}/11"


def test_a_remote_replay_travels_unfragmented(tmp_path, producer: exon.Node,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay chunks (REPLAY_CHUNK of records, headers included) fit one transport message
    of the default term: the client's node joins no FRAGMENTs (a 256 KiB chunk went as two,
    at a copy and a fraction of the speed). Default segments, so chunks are not cut short."""
    payloads = [bytes([i % 251]) * 1000 for i in range(1000)]  # about 16 chunks
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10}) as svc:
        push_all(producer, f"{svc.address}/10", payloads)
        fed: list[int] = []
        feed = producer._assembler.feed

        def counting_feed(key: int, data: Any) -> Any:
            fed.append(len(data))
            return feed(key, data)
        monkeypatch.setattr(producer._assembler, "feed", counting_feed)
        with ArchiveClient(svc.address, node=producer) as ac:
            got = [r.payload for r in ac.replay("orders")]
    assert got == payloads
    assert fed == []


def test_cookie_returns_only_once_durable(service: ArchiveService, producer: exon.Node,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    writer = service.archive.writer("orders")
    gate = threading.Event()
    real_sync = writer._sync

    def slow_sync() -> None:
        assert gate.wait(10)
        real_sync()

    monkeypatch.setattr(writer, "_sync", slow_sync)
    push = producer.socket("push")
    push.link(f"{service.address}/10", timeout=5)
    push.send(b"hold me", cookie="c1", timeout=5)
    with pytest.raises(exon.Timeout):
        push.receive(timeout=0.5)  # written maybe, not yet synced: no cookie
    assert writer.stop_position == 0
    gate.set()
    assert push.receive(timeout=5) == exon.Cookie("c1")
    assert writer.stop_position > 0


def test_held_messages_hold_the_producers_credit(tmp_path, producer: exon.Node,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10},
                        segment_length=SEGMENT) as svc:
        writer = svc.archive.writer("orders")
        gate = threading.Event()
        real_append = writer.append_buffer
        monkeypatch.setattr(writer, "append_buffer",
                            lambda *a, **k: (gate.wait(10), real_append(*a, **k))[1])
        push = producer.socket("push")
        push.link(f"{svc.address}/10", timeout=5)
        sent = 0

        def flood() -> None:
            nonlocal sent
            for _ in range(5000):
                push.send_nowait(b"x" * 32)
                sent += 1
                if sent % 256 == 0:
                    time.sleep(0.01)

        with pytest.raises(exon.BackPressured):
            flood()
        assert sent <= INGEST_CREDITS + 256  # one link's credits, not unbounded buffering
        gate.set()
        push.send(b"last", cookie="end", timeout=10)
        assert push.receive(timeout=10) == exon.Cookie("end")


def linked_windows(pull: Any, count: int) -> dict[Any, int]:
    """``pull.windows()`` once exactly ``count`` links are established on its side (a
    producer's link() returns when its own side is; the service's node takes the last
    LINKACK a moment later, and sees an unlink a moment after the producer closed)."""
    deadline = time.monotonic() + 5
    while len(pull.windows()) != count and time.monotonic() < deadline:
        time.sleep(0.01)
    windows = pull.windows()
    assert len(windows) == count, windows
    return cast("dict[Any, int]", windows)


def credit_left(push: Any) -> int:
    """Messages ``push`` sends before it is back-pressured (its credit)."""
    for sent in range(INGEST_CREDITS + 1):
        try:
            push.send_nowait(b"x" * 32)
        except exon.BackPressured:
            return sent
    raise AssertionError(f"{INGEST_CREDITS + 1} messages sent without back pressure")


@pytest.mark.parametrize("max_message_size", [None, 1 << 20])
def test_a_producer_keeps_credit_while_the_recorder_holds_a_batch(
        tmp_path, producer: exon.Node, max_message_size: int | None) -> None:
    """The recorder holds what it takes (credit included) until it is on disk: its batch
    must leave the producer room to go on, or the two take turns. A link's window is the
    node's memory budget over the socket's largest message: by default an ingest socket
    takes messages up to DEFAULT_INGEST_MESSAGE so that a producer gets the whole
    INGEST_CREDITS, and with larger ones the recorder takes smaller batches."""
    # the default segment length: the ingest's largest message is not cut by the segment
    svc = ArchiveService(str(tmp_path / "a"), ingest={"orders": 10},
                         max_message_size=max_message_size)
    try:  # not started: nothing takes the messages, so the producer sees its first window
        largest = DEFAULT_INGEST_MESSAGE if max_message_size is None else max_message_size
        push = producer.socket("push")
        push.link(f"{svc.address}/10", timeout=5)
        with pytest.raises(exon.MessageTooLarge):
            push.send_nowait(b"x" * (largest + 1))
        window = credit_left(push)
        windows = linked_windows(svc.ingest["orders"], 1)
        limit = svc.batch_limit("orders")
        assert window >= 2 * limit, (window, limit)
        assert limit == min(BATCH, min(windows.values()) // 4)
        if max_message_size is None:  # a lone producer's full share: the whole batch, not cut
            share = svc.node.link_settings.window_share(INGEST_CREDITS, largest)
            assert share == INGEST_CREDITS
            assert share // 4 >= BATCH
    finally:
        svc.close()


@pytest.mark.parametrize(("payload", "expect"), [
    (64, BATCH),                        # small messages: the batch limit
    (1024, BATCH_BYTES // 1024),        # about BATCH_BYTES of them
    (1 << 20, BATCH // 16),             # large ones: never fewer than a sixteenth
])
def test_a_recorder_takes_about_batch_bytes_per_write(payload: int, expect: int) -> None:
    """take_size: after a batch of 100 messages of ``payload`` bytes each, the next take."""
    assert take_size(BATCH, 100, 100 * payload) == expect
    assert take_size(BATCH, 100, 0) == BATCH  # empty messages: the limit
    assert take_size(1, 100, 100 * payload) == 1


def test_idle_producers_leave_a_busy_one_its_share(tmp_path, producer: exon.Node) -> None:
    """Credit once granted is never taken back, so an idle producer keeps its first window
    reserved. Four idle producers must not leave a fifth, busy one a window of 1 (under the
    node's first-window rule they were granted 2,048, 1,024, 682 and 342 of the 4,096 the
    budget holds at 256 KiB, and the fifth recorded 6,600 messages/s): the ingest grants
    INGEST_START_CREDITS first, and the busy link grows to its share, the recorder's batches
    to a quarter of it."""
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10}) as svc:
        idle = [producer.socket("push") for _ in range(4)]
        for push in idle:
            push.link(f"{svc.address}/10", timeout=5)
        busy = producer.socket("push")
        busy.link(f"{svc.address}/10", timeout=5)
        windows = linked_windows(svc.ingest["orders"], 5)
        assert sorted(windows.values())[:4] == [INGEST_START_CREDITS] * 4, windows
        push_all(producer, f"{svc.address}/10", [b"x" * 64] * 2000, push=busy)
        share = svc.node.link_settings.window_share(INGEST_CREDITS, DEFAULT_INGEST_MESSAGE, 5)
        windows = svc.ingest["orders"].windows()
        assert [w for p, w in windows.items() if p.tag == busy.tag] == [share], windows
        assert svc.batch_limit("orders") == min(BATCH, share // 4)
        for push in [*idle, busy]:
            push.close()
        linked_windows(svc.ingest["orders"], 0)
        assert svc.batch_limit("orders") == BATCH  # nothing linked: the one-producer limit


def test_a_keyed_writer_keeps_credit_while_the_service_holds_a_batch(
        tmp_path, producer: exon.Node) -> None:
    """The keyed ingest holds its batches too (3.6): the same rule as the recorders'."""
    svc = ArchiveService(str(tmp_path / "a"), ingest={"orders": 10})
    try:  # not started: the writer sees its first window
        push = producer.socket("push")
        push.link(f"{svc.address}/{svc.keyed_tag}", timeout=5)
        linked_windows(svc.keyed, 1)
        limit = svc.keyed_batch_limit()
        window = credit_left(push)
        assert window >= 2 * limit, (window, limit)
    finally:
        svc.close()


def test_an_ingest_message_size_beyond_a_segment_is_refused(tmp_path) -> None:
    with pytest.raises(exon.ConfigurationError, match="max_message_size 65536: recording "
                                                      "'orders' takes 1 to"):
        ArchiveService(str(tmp_path / "a"), ingest={"orders": 10}, segment_length=SEGMENT,
                       max_message_size=SEGMENT)


def test_a_message_above_the_ingest_size_is_refused_at_the_producer(
        tmp_path, producer: exon.Node) -> None:
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10}, segment_length=SEGMENT,
                        max_message_size=4096) as svc:
        push = producer.socket("push")
        push.link(f"{svc.address}/10", timeout=5)
        with pytest.raises(exon.MessageTooLarge):
            push.send(b"x" * 4097, timeout=5)
        push.send(b"x" * 4096, cookie="ok", timeout=5)  # the link and the service go on
        assert push.receive(timeout=10) == exon.Cookie("ok")


def test_control_errors_are_named(service: ArchiveService) -> None:
    with ArchiveClient(service.address) as ac:
        with pytest.raises(RecordingNotFound) as info:
            ac.stop_position("nope")
        assert info.value.recording == "nope"
        with pytest.raises(RecordingNotFound):
            list(ac.replay("nope"))
        with pytest.raises(RecordingNotFound):
            ac.recording(99)  # by id
        with pytest.raises(ReplayRangeError, match="outside"):
            list(ac.replay("orders", 0, 4096))
        with pytest.raises(ReplayRangeError, match="outside"):
            list(ac.replay("orders", 8))
        assert ac.stop_position("orders") == 0  # the service is still up


@pytest.mark.parametrize("garbage", [b"", b"\xc1\xc1", b"\x93\x01\x02\x03",
                                     protocol.encode_request("explode"),
                                     protocol.encode_request("replay", recording="orders"),
                                     protocol.encode_request("truncate", recording="orders",
                                                            before=-5),
                                     b"\x81\xa2op\xcc\x01"])
def test_undecodable_control_requests_get_an_error(service: ArchiveService,
                                                   producer: exon.Node,
                                                   garbage: bytes) -> None:
    req = producer.socket("req")
    req.link(f"{service.address}/1", timeout=5)
    req.send(garbage, timeout=5)
    with pytest.raises(ControlError):
        protocol.decode_response(req.receive(timeout=5).payload)
    req.send(protocol.encode_request("info"), timeout=5)
    assert protocol.decode_response(req.receive(timeout=5).payload)["keyed_tag"] == 2


def test_concurrent_recording_and_replays(service: ArchiveService) -> None:
    n = 3000
    payloads = [struct.pack("<I", i) * (1 + i % 50) for i in range(n)]
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            with exon.Node() as node:
                push_all(node, f"{service.address}/10", payloads)
        except BaseException as exc:
            errors.append(exc)

    results: list[list[bytes]] = [[] for _ in range(3)]

    def follow(i: int) -> None:
        try:
            with ArchiveClient(service.address) as ac:
                for rec in ac.replay("orders", follow=True):
                    results[i].append(rec.payload)
                    if len(results[i]) == n:
                        return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=follow, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=produce))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert all(r == payloads for r in results)


def test_a_slow_replay_reader_bounds_what_the_service_sends(service: ArchiveService,
                                                            producer: exon.Node) -> None:
    push_all(producer, f"{service.address}/10", [os.urandom(1000) for _ in range(2000)])
    with ArchiveClient(service.address) as ac:
        it = ac.replay_batches("orders")
        first = next(it)
        assert first
        time.sleep(0.3)  # the service is blocked on credit meanwhile
        assert sum(map(len, it)) + len(first) == 2000


def test_keyed_ingest_drops_what_it_recorded(tmp_path) -> None:
    d = str(tmp_path / "arch")
    with ArchiveService(d, ingest={"sink": 12}, segment_length=SEGMENT) as svc, \
            ArchiveClient(svc.address) as ac:
        with ac.keyed_writer("sink", "query-1") as w:
            for seq in range(10):
                w.send(0, 0, seq, b"b0-%d" % seq)
            w.flush()
            for seq in range(10):  # batch 0 again (a Spark retry): all dropped
                w.send(0, 0, seq, b"dup")
            for seq in range(5):
                w.send(1, 0, seq, b"b1-%d" % seq)
            w.flush()
        assert [r.payload for r in ac.replay("sink")] == \
            [b"b0-%d" % s for s in range(10)] + [b"b1-%d" % s for s in range(5)]
    # after a restart the dedup state comes back from the records
    with ArchiveService(d, ingest={"sink": 12}, segment_length=SEGMENT) as svc, \
            ArchiveClient(svc.address) as ac:
        with ac.keyed_writer("sink", "query-1") as w:
            for seq in range(7):
                w.send(1, 0, seq, b"again")  # 0..4 were recorded; 5, 6 are new
            w.flush()
        tail = [r.payload for r in ac.replay("sink")][15:]
        assert tail == [b"again", b"again"]


def test_keyed_send_many_records_a_chunk_once_and_confirms_it(tmp_path) -> None:
    """KeyedWriter.send_many: rows first_seq.. in one batch with one cookie; flush returns
    once they are durable; the same chunk again (a Spark retry) is dropped by its keys, and
    a chunk with new keys past the recorded ones is recorded beside single sends."""
    with ArchiveService(str(tmp_path / "arch"), ingest={"sink": 12},
                        segment_length=SEGMENT) as svc, ArchiveClient(svc.address) as ac:
        with ac.keyed_writer("sink", "query-1") as w:
            w.send_many(0, 0, 0, [b"b0-%d" % seq for seq in range(300)])
            w.send_many(0, 0, 300, [])  # nothing: no cookie to wait for
            w.flush(timeout=10)
            w.send_many(0, 0, 0, [b"dup"] * 300)  # batch 0 again: all dropped
            w.send(1, 0, 0, b"b1-0")
            w.send_many(1, 0, 1, [b"b1-%d" % seq for seq in range(1, 50)])
            w.flush(timeout=10)
        assert [r.payload for r in ac.replay("sink")] == \
            [b"b0-%d" % s for s in range(300)] + [b"b1-%d" % s for s in range(50)]


def test_keyed_send_many_that_is_not_confirmed_raises_with_its_rows(tmp_path) -> None:
    with ArchiveService(str(tmp_path / "arch"), ingest={"big": 12},
                        segment_length=SEGMENT) as svc, \
            ArchiveClient(svc.address, timeout=5) as ac:
        _fail_writes(svc, "big")
        with ac.keyed_writer("big", "q") as w:
            w.send_many(0, 0, 0, [b"lost"] * 20)
            with pytest.raises(ArchiveError, match="20 row"):
                w.flush(timeout=5)


def test_truncate_and_commit_through_the_service(service: ArchiveService,
                                                 producer: exon.Node) -> None:
    push_all(producer, f"{service.address}/10", [os.urandom(3000) for _ in range(100)])
    with ArchiveClient(service.address) as ac:
        records = list(ac.replay("orders"))
        cut = records[60].position
        assert ac.commit("orders", "spark-q", cut) == 0
        assert ac.recording("orders").consumers == {"spark-q": cut}
        start = ac.commit("orders", "spark-q", cut, truncate=True)
        assert start == cut - cut % SEGMENT
        assert start > 0
        assert [r.payload for r in ac.replay("orders", start)][-1] == records[-1].payload
        with pytest.raises(ReplayRangeError):
            ac.truncate("orders", before=ac.stop_position("orders") + 4096)


def test_a_second_service_on_the_directory_is_refused(service: ArchiveService) -> None:
    with pytest.raises(ArchiveLocked, match="held by another archive service"):
        ArchiveService(service.archive.directory, ingest={"orders": 10})


def test_reserved_tags_are_refused(tmp_path) -> None:
    with pytest.raises(exon.ConfigurationError, match="control"):
        ArchiveService(str(tmp_path / "a"), ingest={"orders": 1})


def test_an_unreachable_archive_times_out_naming_it() -> None:
    with ArchiveClient("127.0.0.1:9", timeout=0.5) as ac, \
            pytest.raises(exon.Timeout, match=r"127\.0\.0\.1:9"):
        ac.recordings()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_returns_no_cookie_for_what_is_not_on_disk(tmp_path) -> None:
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)], check=True)
    try:
        with ArchiveService(str(mnt / "arch"), ingest={"orders": 10, "other": 11},
                            segment_length=SEGMENT) as svc, exon.Node() as node:
            push = node.socket("push")
            push.link(f"{svc.address}/10", timeout=5)
            confirmed, lost = [], []
            try:
                for i in range(2000):
                    push.send(bytes([i % 256]) * 1000, cookie=i, timeout=2)
            except exon.ExonError:
                pass
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    item = push.receive(timeout=2)
                except exon.ExonError:
                    break
                (confirmed if isinstance(item, exon.Cookie) else lost).append(item.value)
            assert lost, "the messages past the full disk came back as CookieLost"
            assert any("stopped" in e for e in svc.events)
            with ArchiveClient(svc.address) as ac:
                assert ac.recording("orders").state.startswith("failed")
                on_disk = [r.payload[0] for r in ac.replay("orders")]
                assert len(on_disk) >= len(confirmed)
                assert [v % 256 for v in sorted(confirmed)] == on_disk[:len(confirmed)]
                assert ac.stop_position("other") == 0  # the service goes on
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fail_writes(svc: ArchiveService, recording: str) -> None:
    """Make every later write of ``recording`` fail as a full disk does."""
    import errno

    def no_space(position: int, data: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    svc.archive.writer(recording)._write = no_space  # type: ignore[method-assign]


def test_keyed_ingest_goes_on_after_one_recording_fails(tmp_path) -> None:
    """A keyed append that fails (disk full) gets no cookie, and keyed ingest into the
    other recordings keeps working: the keyed thread lives on."""
    with ArchiveService(str(tmp_path / "arch"), ingest={"big": 12, "other": 13},
                        segment_length=SEGMENT) as svc, \
            ArchiveClient(svc.address, timeout=5) as ac:
        _fail_writes(svc, "big")
        w = ac.keyed_writer("big", "q")
        w.send(0, 0, 0, b"lost")
        with pytest.raises(ArchiveError, match="not confirmed durable"):
            w.flush(timeout=5)
        w.close()
        assert any("keyed ingest into recording" in e and "No space" in e for e in svc.events)
        with ac.keyed_writer("other", "q2") as w:
            w.send(0, 0, 0, b"kept")
            w.flush(timeout=5)
        assert [r.payload for r in ac.replay("other")] == [b"kept"]
        assert [t.name for t in svc._threads if not t.is_alive()
                and t.name == "exon-archive-keyed"] == []


def test_a_follow_replay_ends_when_its_recording_stops(service: ArchiveService,
                                                       producer: exon.Node) -> None:
    """A live follower of a recording that stops (disk full) gets the reason, ArchiveFull,
    instead of waiting on (the service's replay thread spun at full CPU meanwhile)."""
    from exon.archive import ArchiveFull

    push_all(producer, f"{service.address}/10", [b"a", b"b"])
    got: list[Any] = []

    def follow(ac: ArchiveClient) -> None:
        try:
            for rec in ac.replay("orders", follow=True):
                got.append(rec.payload)
                if len(got) == 2:
                    _fail_writes(service, "orders")
                    push = producer.socket("push")
                    push.link(f"{service.address}/10", timeout=5)
                    push.send(b"c", timeout=5)  # its write fails: the recording stops
        except exon.ExonError as exc:
            got.append(exc)

    with ArchiveClient(service.address, timeout=5) as ac:
        reader = threading.Thread(target=follow, args=(ac,), daemon=True)
        reader.start()
        reader.join(20)  # keepalives kept it waiting for good before
        assert not reader.is_alive(), "the follower still waits on a stopped recording"
    assert got[:2] == [b"a", b"b"]
    assert len(got) == 3
    assert isinstance(got[2], ArchiveFull)
    assert "No space left" in str(got[2])


def test_the_lock_file_names_the_bound_address(tmp_path) -> None:
    d = str(tmp_path / "arch")
    with ArchiveService(d, endpoint="127.0.0.1:0", ingest={"orders": 10}) as svc:
        assert svc.address.endswith(":0") is False
        with pytest.raises(ArchiveLocked, match=svc.address.replace(".", r"\.")):
            ArchiveService(d, ingest={"orders": 10})


def control_req(node: exon.Node, service: ArchiveService, **kwargs: Any) -> Any:
    req = node.socket("req", **kwargs)
    req.link(f"{service.address}/1", timeout=5)
    return req


def ask(req: Any, op: str, **fields: Any) -> dict[str, Any]:
    req.send(protocol.encode_request(op, **fields), timeout=5)
    return protocol.decode_response(req.receive(timeout=5).payload)


def test_an_answer_over_a_control_reply_is_an_error_and_the_service_goes_on(
        service: ArchiveService) -> None:
    """An answer over 64 KiB could not be sent: the REP kept owing it, and no client got an
    answer again (the control thread spun on StateError)."""
    fill(service.archive, "orders", [b"x"] * 14000, batch=1000)
    with ArchiveClient(service.address, timeout=5) as ac:
        with pytest.raises(ControlError, match=r"boundaries: the answer is \d+ bytes, over the "
                           f"{protocol.MAX_REPLY_LENGTH}"):
            ac.boundaries("orders", 0, None, 1)
        assert len(ac.boundaries("orders", 0, None, 1000)) == 15
        stop = ac.stop_position("orders")
    with ArchiveClient(service.address, timeout=5) as ac:
        assert ac.stop_position("orders") == stop


def test_a_requester_taking_less_than_the_answer_gets_an_error(
        service: ArchiveService, producer: exon.Node) -> None:
    req = control_req(producer, service, max_message_size=200)
    with pytest.raises(ControlError, match="exceed the 200"):
        ask(req, "recordings")  # two RecordingInfo maps: over 200 bytes
    assert ask(req, "stop_position", recording="orders") == {"position": 0}


def test_a_long_recording_name_is_not_echoed(service: ArchiveService,
                                             producer: exon.Node) -> None:
    """A 65 KB name came back whole in RecordingNotFound: over a control reply, a wedge."""
    req = control_req(producer, service)
    with pytest.raises(ControlError, match="recording must be a name") as info:
        ask(req, "stop_position", recording="A" * 65000)
    assert len(str(info.value)) < 300
    assert ask(req, "stop_position", recording="orders") == {"position": 0}


def test_events_are_bounded_and_info_carries_what_fits(service: ArchiveService,
                                                       producer: exon.Node) -> None:
    """Every malformed keyed message added an event for good: past 64 KiB of them, the info
    answer was too large and wedged the control socket."""
    push_all(producer, f"{service.address}/2", [b"bad"] * 800)  # confirmed: events written
    assert len(service.events) == MAX_EVENTS
    with ArchiveClient(service.address, timeout=5) as ac:
        events = ac.info()["events"]
    assert 0 < len(events) <= MAX_EVENTS
    assert sum(len(e.encode()) for e in events) <= INFO_EVENTS_BYTES
    assert events == list(service.events)[-len(events):]  # the newest, oldest first
    assert all("keyed ingest message of 3 bytes" in e for e in events)
    service._event("y" * 100_000)
    assert len(service.events[-1]) == MAX_EVENT_TEXT


def test_a_persistent_take_error_is_logged_once_and_waited_on(
        service: ArchiveService, caplog: pytest.LogCaptureFixture) -> None:
    """A take that kept raising (the wedged REP's StateError) ran ~500,000 times a second."""
    class Sock:
        closed = False

    sock = Sock()
    calls: list[float] = []

    def take() -> None:
        calls.append(time.monotonic())
        if len(calls) == 3:
            sock.closed = True
        raise exon.StateError("the same error, again and again")

    with caplog.at_level("ERROR", logger="exon.archive"):
        assert list(service._taking(sock, take)) == []
    assert len(calls) == 3
    assert calls[2] - calls[0] >= 2 * POLL * 0.99
    assert [r.getMessage().count("the same error") for r in caplog.records] == [1]


def replay_threads(service: ArchiveService) -> list[str]:
    with service._lock:
        return [t.name for t in service._threads if t.name.startswith("exon-archive-replay")]


def test_finished_replays_leave_the_service_thread_list(service: ArchiveService,
                                                         producer: exon.Node) -> None:
    """Each finished replay's thread stayed in ArchiveService._threads for good."""
    push_all(producer, f"{service.address}/10", [b"r"] * 5)
    with ArchiveClient(service.address, timeout=5) as ac:
        for _ in range(20):
            assert len(list(ac.replay("orders"))) == 5
    deadline = time.monotonic() + 10
    while replay_threads(service) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert replay_threads(service) == []
    # control, replication acks, confirmer, two recorders, keyed ingest, metrics
    assert len(service._threads) == 7
    assert all(t.is_alive() for t in service._threads)


def test_a_follow_replay_hears_that_the_service_closes(service: ArchiveService,
                                                       producer: exon.Node) -> None:
    """The replays stopped without a word: their readers waited for their timeout."""
    push_all(producer, f"{service.address}/10", [b"a", b"b"])
    got: list[Any] = []
    closer = threading.Thread(target=service.close, daemon=True)

    def follow(ac: ArchiveClient) -> None:
        try:
            for rec in ac.replay("orders", follow=True):
                got.append(rec.payload)
                if len(got) == 2:
                    closer.start()
        except exon.ExonError as exc:
            got.append(exc)

    with ArchiveClient(service.address, timeout=60) as ac:
        reader = threading.Thread(target=follow, args=(ac,), daemon=True)
        reader.start()
        reader.join(20)
        assert not reader.is_alive(), "the follower waits for its timeout"
    closer.join(20)
    assert not closer.is_alive()
    assert got[:2] == [b"a", b"b"]
    assert len(got) == 3
    assert type(got[2]) is ArchiveError
    assert f"the archive service at {service.address} is closing" in str(got[2])


def test_a_stopped_replay_tells_its_reader(service: ArchiveService,
                                           producer: exon.Node) -> None:
    pull = producer.socket("pull")
    req = control_req(producer, service)
    replay_id = ask(req, "replay", recording="orders", follow=True,
                    reply_to=f"{producer.address}/{pull.tag}")["replay_id"]
    assert ask(req, "stop_replay", replay_id=replay_id) == {"stopped": True}
    kinds = []
    for _ in range(100):  # keepalives (one a second) before it, at most
        data = pull.receive(timeout=5).payload
        kind, rid, _ = protocol.REPLAY_HEADER.unpack_from(data)
        assert rid == replay_id
        kinds.append(kind)
        if kind != protocol.REPLAY_KEEPALIVE:
            break
    assert kinds[-1] == protocol.REPLAY_ERROR
    body = msgpack.unpackb(data[protocol.REPLAY_HEADER.size:])
    assert body == {"error": "ArchiveError", "message": "the replay was stopped (stop_replay)"}


def test_a_service_on_a_damaged_recording_refuses_it_and_goes_on(tmp_path) -> None:
    """Recovery refuses a recording with damage that valid records follow: the service
    starts, says so, does not record into it, still replays it up to the damage (then
    ArchiveCorrupt naming file and offset), and records the others."""
    from exon.archive import Archive, ArchiveCorrupt
    from exon.archive.segments import segment_path
    from tests.archive.conftest import PRODUCER

    d = str(tmp_path / "arch")
    with Archive(d, owner=True) as ar:
        ar.create_recording("orders", segment_length=SEGMENT, ingest_tag=10)
        w = ar.writer("orders")
        for i in range(100):
            w.append([bytes([i]) * 1500], [PRODUCER], 1)  # over 2 segments
        rid = ar.recording("orders").id
        records = list(ar.replay("orders"))
    last = records[-1].position - records[-1].position % SEGMENT  # the last segment's base
    first_bad = next(i for i, r in enumerate(records) if r.position >= last) + 2
    bad = records[first_bad].position  # in the last segment, valid records after it
    assert first_bad + 2 < len(records)
    path = segment_path(d, rid, last)
    with open(path, "r+b") as f:
        f.seek(bad - last + 200)
        byte = f.read(1)
        f.seek(bad - last + 200)
        f.write(bytes([byte[0] ^ 0xFF]))
    with ArchiveService(d, ingest={"orders": 10, "clicks": 11},
                        segment_length=SEGMENT) as svc, exon.Node() as node, \
            ArchiveClient(svc.address, timeout=5) as ac:
        deadline = time.monotonic() + 5
        while not any("not recording" in e for e in svc.events) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert any("'orders' not recording" in e and "at offset" in e for e in svc.events)
        got: list[bytes] = []
        replay = ac.replay("orders")
        with pytest.raises(ArchiveCorrupt) as info:
            got.extend(rec.payload for rec in replay)
        assert got == [bytes([i]) * 1500 for i in range(first_bad)]
        assert (os.path.basename(info.value.path), info.value.offset) == (
            os.path.basename(path), bad - last)
        with pytest.raises(ArchiveCorrupt):
            next(iter(ac.replay("orders", follow=True)))
        push_all(node, f"{svc.address}/11", [b"c1", b"c2"])  # the others record
        assert [r.payload for r in ac.replay("clicks")] == [b"c1", b"c2"]


def test_a_keyed_batch_that_failed_once_is_recorded_whole_by_its_retry(tmp_path) -> None:
    """A keyed batch whose first rows could not be written (the catalog save failed once)
    is rejected; its writer's later rows, already received, must not be recorded past the
    gap, or the retry of the whole batch would be dropped as duplicates (rows lost)."""
    import errno

    n = 200
    with ArchiveService(str(tmp_path / "a"), ingest={"sink": 12},
                        segment_length=1 << 20) as svc, \
            ArchiveClient(svc.address, timeout=5) as ac:
        real_save = svc.archive.catalog.save
        calls = [0]

        def save_failing_once() -> None:
            calls[0] += 1
            if calls[0] == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            real_save()

        svc.archive.catalog.save = save_failing_once  # type: ignore[method-assign]
        record_keyed = svc._record_keyed

        def slow(batch: Any) -> bool:  # the other rows queue behind the first batch
            time.sleep(0.2)
            return record_keyed(batch)

        svc._record_keyed = slow  # type: ignore[method-assign]
        w = ac.keyed_writer("sink", "q")
        try:
            for s in range(n):
                w.send(7, 0, s, b"row-%d" % s)
                if s == 0:
                    time.sleep(0.1)  # row 0 is taken alone
            w.flush(timeout=5)
        except exon.ExonError:
            pass  # the task fails: Spark retries the batch
        w.close()
        retry = ac.keyed_writer("sink", "q")
        for s in range(n):
            retry.send(7, 0, s, b"row-%d" % s)
        retry.flush(timeout=5)
        retry.close()
        assert [r.payload for r in ac.replay("sink")] == [b"row-%d" % s for s in range(n)]
