"""RecordingWriter.append_raw and cut, and Archive.adopt/cut/start_over: what a replica
does to its recordings (docs/protocol.md 3.7), without sockets."""

from __future__ import annotations

import time
from dataclasses import asdict

import pytest

from exon.archive import Archive, ArchiveError, ReplayRangeError
from exon.archive.format import encode_key
from exon.archive.segments import RecordingFiles
from tests.archive.conftest import PRODUCER, SEGMENT, fill


def copy(src: Archive, dst: Archive, name: str, start: int = 0) -> None:
    files = RecordingFiles(src.directory, src.entry(name))
    stop = src.stop_position(name)
    position = start
    try:
        while position < stop:
            data, first, position = files.raw(position, stop, 8192)
            dst.writer(name).append_raw(first, data, keyed=src.entry(name).keyed)
    finally:
        files.close()


@pytest.fixture
def pair(tmp_path):
    a = Archive(str(tmp_path / "a"), owner=True)
    a.create_recording("orders", segment_length=SEGMENT)
    b = Archive(str(tmp_path / "b"), owner=True)
    yield a, b
    a.close()
    b.close()


def test_raw_copies_are_byte_for_byte_with_pads(pair) -> None:
    a, b = pair
    fill(a, "orders", [bytes([i % 251]) * 700 for i in range(300)])  # > 2 segments
    b.adopt(asdict(a.entry("orders")))
    copy(a, b, "orders")
    assert b.stop_position("orders") == a.stop_position("orders")
    assert list(b.replay("orders")) == list(a.replay("orders"))


def test_raw_refuses_a_gap_or_a_bad_record(pair) -> None:
    a, b = pair
    fill(a, "orders", [b"x" * 100] * 10)
    b.adopt(asdict(a.entry("orders")))
    files = RecordingFiles(a.directory, a.entry("orders"))
    data, _, _ = files.raw(0, a.stop_position("orders"), 1 << 20)
    files.close()
    w = b.writer("orders")
    with pytest.raises(ValueError, match="ends at 0"):
        w.append_raw(160, data)
    bad = bytearray(data)
    bad[200] ^= 1
    with pytest.raises(ValueError, match="fail their checks"):
        w.append_raw(0, bytes(bad))
    assert w.stop_position == 0  # nothing written
    w.append_raw(0, data)
    assert w.stop_position == a.stop_position("orders")


def test_keyed_records_raise_the_copys_dedup_marks(pair) -> None:
    a, b = pair
    a.mark_keyed("orders")
    keys = [encode_key("q", 0, 5, seq) for seq in range(4)]
    a.writer("orders").append([b"r"] * 4, [PRODUCER] * 4, time.time_ns(), keys)
    b.adopt(asdict(a.entry("orders")))
    copy(a, b, "orders")
    assert b.writer("orders").dedup == {("q", 0): (5, 3)}


def test_cut_and_reopen_rebuilds_the_marks(pair) -> None:
    a, _ = pair
    a.mark_keyed("orders")
    w = a.writer("orders")
    w.append([b"r"] * 2, [PRODUCER] * 2, time.time_ns(), [encode_key("q", 0, 1, s)
                                                           for s in range(2)])
    middle = w.stop_position
    w.append([b"r"] * 2, [PRODUCER] * 2, time.time_ns(), [encode_key("q", 0, 2, s)
                                                           for s in range(2)])
    with pytest.raises(ReplayRangeError, match="boundary"):
        a.cut("orders", middle + 32)
    a.cut("orders", middle)
    assert a.stop_position("orders") == middle
    assert a.writer("orders").dedup == {("q", 0): (1, 1)}
    assert len(list(a.replay("orders"))) == 2


def test_adopt_refuses_another_recording_under_the_same_id(pair) -> None:
    a, b = pair
    b.create_recording("orders", segment_length=SEGMENT)  # created apart: not the same
    with pytest.raises(ArchiveError, match="wrong primary"):
        b.adopt(asdict(a.entry("orders")))


def test_adopt_follows_truncation_and_starts_over_past_the_end(pair) -> None:
    a, b = pair
    fill(a, "orders", [b"y" * 1000] * 200)  # about 3 segments
    b.adopt(asdict(a.entry("orders")))
    copy(a, b, "orders")
    a.truncate("orders", SEGMENT)
    b.adopt(asdict(a.entry("orders")))
    assert b.entry("orders").start_position == SEGMENT
    assert list(b.replay("orders", SEGMENT)) == list(a.replay("orders", SEGMENT))
    b.start_over("orders", 2 * SEGMENT)
    assert b.stop_position("orders") == 2 * SEGMENT
    assert list(b.replay("orders", 2 * SEGMENT)) == []
