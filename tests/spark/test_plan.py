"""Offsets, admission control and partition planning against a plain-Python archive."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from exon.archive import RecordingNotFound
from exon.spark.plan import admit, check_offset, ending_offset, plan_slices, starting_offset
from tests.spark.fakes import FakeArchive


def _archive(seed: int = 1) -> FakeArchive:
    rng = random.Random(seed)
    return FakeArchive(orders=[rng.randrange(0, 200) for _ in range(1000)],
                       clicks=[rng.randrange(0, 50) for _ in range(37)])


def test_starting_offsets() -> None:
    archive = _archive()
    archive.starts["orders"] = archive.positions["orders"][10]  # truncated below record 10
    names = ("orders", "clicks")
    assert starting_offset(archive, names, "earliest") == {
        "orders": archive.positions["orders"][10], "clicks": 0}
    assert starting_offset(archive, names, "latest") == archive.stops
    assert starting_offset(archive, names, {"orders": 64, "clicks": 0}) == {
        "orders": 64, "clicks": 0}
    assert ending_offset(archive, names, "latest") == archive.stops


def test_unknown_recording_names_it() -> None:
    with pytest.raises(RecordingNotFound, match="nope"):
        starting_offset(_archive(), ("orders", "nope"), "earliest")


@pytest.mark.parametrize("max_records", [1, 7, 100, 5000])
def test_slices_cover_the_range_once_with_at_most_max_records(max_records: int) -> None:
    archive = _archive()
    positions = archive.positions["orders"]
    start = {"orders": positions[3], "clicks": 0}
    end = {"orders": positions[900], "clicks": archive.stops["clicks"]}
    slices = plan_slices(archive, start, end, max_records)
    for name in ("orders", "clicks"):
        mine = [s for s in slices if s.recording == name]
        assert mine[0].start == start[name]
        assert mine[-1].end == end[name]
        assert all(a.end == b.start for a, b in pairwise(mine))
        counts = [archive.count(name, s.start, s.end) for s in mine]
        assert all(0 < c <= max_records for c in counts)
        assert sum(counts) == archive.count(name, start[name], end[name])


def test_empty_ranges_plan_nothing() -> None:
    archive = _archive()
    assert plan_slices(archive, {"orders": 64}, {"orders": 64}, 10) == []


def test_a_range_that_goes_backwards_is_refused() -> None:
    with pytest.raises(ValueError, match="before its start"):
        plan_slices(_archive(), {"orders": 128}, {"orders": 64}, 10)


def test_admission_caps_the_total_and_never_goes_backwards() -> None:
    archive = _archive()
    start = {"orders": archive.positions["orders"][5], "clicks": archive.positions["clicks"][30]}
    end = admit(archive, start, archive.stops, 20)
    taken = sum(archive.count(n, start[n], end[n]) for n in start)
    assert taken == 10 + 7  # 10 each; clicks has only 7 left
    assert all(end[n] >= start[n] for n in start)
    # no cap: everything durable
    assert admit(archive, start, archive.stops, None) == archive.stops
    # a stop below the start (an archive that lost its tail) keeps the start
    assert admit(archive, start, {"orders": 0, "clicks": 0}, 20) == start
    assert admit(archive, start, {"orders": 0, "clicks": 0}, None) == start


def test_admission_walks_to_the_end_in_steps() -> None:
    archive = _archive(3)
    offset = {"orders": 0, "clicks": 0}
    steps = 0
    while offset != archive.stops:
        nxt = admit(archive, offset, archive.stops, 64)
        assert sum(archive.count(n, offset[n], nxt[n]) for n in offset) <= 64
        assert nxt != offset
        offset = nxt
        steps += 1
        assert steps < 100
    assert steps == 1000 // 32 + (1 if 1000 % 32 else 0)


def test_check_offset_refuses_another_set_of_recordings() -> None:
    assert check_offset({"a": 0, "b": 32}, ("a", "b"), what="start") == {"a": 0, "b": 32}
    with pytest.raises(ValueError, match="new checkpointLocation"):
        check_offset({"a": 0}, ("a", "b"), what="start")
    with pytest.raises(ValueError, match="not a position"):
        check_offset({"a": "0"}, ("a",), what="start")


@pytest.mark.parametrize(("count", "max_records", "min_partitions", "slices"),
                         [(100, 1000, 4, 4), (3, 1000, 4, 3), (100, 30, 2, 4), (100, 1000, 1, 1),
                          (1000, 1000, 7, 7), (3, 1, 5, 3)])
def test_min_partitions_cuts_small_batches_into_balanced_slices(
        count: int, max_records: int, min_partitions: int, slices: int) -> None:
    archive = FakeArchive(orders=[10] * count)
    end = {"orders": archive.stops["orders"]}
    planned = plan_slices(archive, {"orders": 0}, end, max_records, min_partitions)
    assert len(planned) == slices
    counts = [archive.count("orders", s.start, s.end) for s in planned]
    assert sum(counts) == count
    assert planned[0].start == 0
    assert planned[-1].end == end["orders"]
    assert all(a.end == b.start for a, b in pairwise(planned))
    assert max(counts) <= max_records
    assert max(counts) <= 2 * -(-count // slices)  # about equal


def test_min_partitions_shares_slices_between_recordings_by_size() -> None:
    archive = FakeArchive(orders=[10] * 300, clicks=[10] * 100)
    planned = plan_slices(archive, {"orders": 0, "clicks": 0}, archive.stops, 10_000, 4)
    assert [s.recording for s in planned] == ["orders"] * 3 + ["clicks"]
    assert all(60 <= archive.count(s.recording, s.start, s.end) <= 150 for s in planned)
    assert sum(archive.count(s.recording, s.start, s.end) for s in planned) == 400
