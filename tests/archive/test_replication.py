"""The in-sync set and the epoch rules, sans-IO (exon/archive/replication.py)."""

from __future__ import annotations

import pytest

from exon.archive.replication import (
    InSyncSet,
    MemberJoined,
    MemberLeft,
    cut_positions,
    epoch_starts,
)


def events(s: InSyncSet) -> list[object]:
    out = []
    while (ev := s.next_event()) is not None:
        out.append(ev)
    return out


def test_min_insync_one_confirms_the_primarys_own_position() -> None:
    s = InSyncSet(min_insync=1)
    s.local(1, 640)
    assert s.confirmed(1) == 640


def test_min_insync_two_waits_for_a_replica_and_takes_the_lower_position() -> None:
    s = InSyncSet(min_insync=2, max_lag=10_000, timeout=5.0)
    s.local(1, 640)
    assert s.confirmed(1) == -1  # the primary alone: nothing confirmed
    s.start("r:1", {1: 0}, now=0.0)
    assert events(s) == [MemberJoined(member="r:1")]
    assert s.confirmed(1) == 0
    s.ack("r:1", {1: 320}, now=0.1)
    assert s.confirmed(1) == 320
    s.ack("r:1", {1: 960}, now=0.2)  # ahead of what the primary knows: capped at its own
    assert s.confirmed(1) == 640


def test_a_silent_replica_leaves_and_nothing_more_is_confirmed() -> None:
    s = InSyncSet(min_insync=2, timeout=1.0)
    s.start("r:1", {1: 0}, now=0.0)
    s.local(1, 100)
    s.ack("r:1", {1: 100}, now=0.5)
    assert s.confirmed(1) == 100
    assert events(s) == [MemberJoined(member="r:1")]
    s.handle_timer(now=1.2)
    assert events(s) == []  # heard 0.7 s ago: still in
    s.handle_timer(now=1.6)
    assert isinstance(left := events(s)[-1], MemberLeft)
    assert left.reason == "timeout"
    assert s.left_count == 1
    assert s.in_sync() == []
    s.local(1, 200)
    assert s.confirmed(1) == 100  # never confirmed with fewer than min_insync
    s.ack("r:1", {1: 200}, now=2.0)  # it answers again, caught up: back in
    assert s.in_sync() == ["r:1"]
    assert s.confirmed(1) == 200


def test_a_lagging_replica_leaves_and_rejoins_when_it_caught_up() -> None:
    s = InSyncSet(min_insync=2, max_lag=1000, timeout=5.0)
    s.start("r:1", {1: 0}, now=0.0)
    s.local(1, 500)
    s.ack("r:1", {1: 500}, now=0.1)
    s.local(1, 5000)
    assert any(isinstance(e, MemberLeft) and e.reason == "lag" for e in events(s))
    assert s.confirmed(1) == 500
    s.ack("r:1", {1: 4500}, now=0.2)
    assert s.in_sync() == ["r:1"]
    assert s.confirmed(1) == 4500


def test_three_members_min_two_takes_the_second_highest() -> None:
    s = InSyncSet(min_insync=2)
    s.start("a", {}, now=0)
    s.start("b", {}, now=0)
    s.local(7, 900)
    s.ack("a", {7: 300}, now=0)
    s.ack("b", {7: 600}, now=0)
    assert s.confirmed(7) == 600


def test_confirmed_never_moves_back_and_drop_removes_a_member() -> None:
    s = InSyncSet(min_insync=2)
    s.start("a", {1: 0}, now=0)
    s.local(1, 100)
    s.ack("a", {1: 100}, now=0)
    s.drop("a")
    assert [type(e) for e in events(s)][-1] is MemberLeft
    s.start("a", {1: 0}, now=1)  # came back with less (a cut): confirmed stays
    assert s.confirmed(1) == 100
    s.ack("ghost", {1: 5}, now=1)  # unknown member: nothing
    assert s.statuses(now=1)[0].member == "a"


@pytest.mark.parametrize("kwargs", [{"min_insync": 0}, {"max_lag": -1}, {"timeout": 0}])
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="want"):
        InSyncSet(**kwargs)  # type: ignore[arg-type]


def test_epoch_starts_names_the_first_later_epoch() -> None:
    history = [[1, {}], [2, {"1": 640}], [3, {"1": 960}]]
    assert epoch_starts(history, 1) == {1: 640}
    assert epoch_starts(history, 2) == {1: 960}
    assert epoch_starts(history, 3) is None


def test_cut_positions_only_past_the_start() -> None:
    assert cut_positions({1: 1000, 2: 64, 3: 500}, {1: 640, 2: 128}) == {1: 640, 3: 0}


def test_a_replica_asking_again_without_acking_still_times_out() -> None:
    s = InSyncSet(min_insync=2, timeout=1.0)
    s.start("r", {1: 0}, now=0.0)
    s.local(1, 100)
    for t in (0.5, 1.0, 1.5):  # sessions that end before any ack (a full disk)
        s.start("r", {1: 0}, now=t)
        s.handle_timer(now=t)
    assert s.in_sync() == []
    assert s.confirmed(1) == 0


def test_a_member_whose_session_ended_stays_listed_out_of_sync() -> None:
    s = InSyncSet(min_insync=2, timeout=1.0)
    s.start("r", {1: 0}, now=0.0)
    s.drop("r")
    s.handle_timer(now=0.1)  # heard recently, but no session: not back in
    assert s.in_sync() == []
    assert [m.in_sync for m in s.statuses(now=0.1)] == [False]
    s.ack("r", {1: 0}, now=0.2)  # a late ack of the ended session: nothing
    assert s.in_sync() == []
