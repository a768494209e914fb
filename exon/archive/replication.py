"""Replication state of a primary archive, sans-IO: who is in sync, what is confirmed, and
where a stale member cuts its tail (docs/protocol.md 3.7).

:class:`InSyncSet` is fed the primary's own durable positions (:meth:`~InSyncSet.local`),
the acknowledgements of its replicas (:meth:`~InSyncSet.ack`) and the time
(:meth:`~InSyncSet.handle_timer`); it answers how far each recording is confirmed
(:meth:`~InSyncSet.confirmed`) and hands out :class:`MemberJoined` / :class:`MemberLeft`
events. Time is a parameter: no clock, no socket, no thread here.

Rules:

* the primary is always in sync (it counts itself);
* a replica is in sync while it was heard within ``timeout`` seconds and its lag (the
  largest, over the recordings, of the primary's durable end minus what the replica
  acknowledged durable) is at most ``max_lag`` bytes; it leaves the set otherwise (an
  event, a counter) and joins again once both hold again;
* a recording is confirmed up to the ``min_insync``-th highest durable position among the
  members in sync (the primary's own counted); while fewer than ``min_insync`` are in
  sync, the confirmed position does not move. It never moves back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: bytes a replica may lag behind (per recording) and stay in sync, by default
DEFAULT_MAX_LAG = 64 * 1024 * 1024
#: seconds without word from a replica before it leaves the in-sync set, by default
DEFAULT_REPLICA_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberJoined:
    """A replica entered the in-sync set."""

    #: the replica's ``HOST:PORT``
    member: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberLeft:
    """A replica left the in-sync set (``reason``: "lag", "timeout" or "gone")."""

    #: the replica's ``HOST:PORT``
    member: str
    #: why: "lag" (more than max_lag bytes behind), "timeout" (not heard), "gone" (its
    #: session ended)
    reason: str
    #: bytes behind when it left
    lag: int


Event = MemberJoined | MemberLeft


@dataclass
class Member:
    """One replica as the primary sees it."""

    member: str
    #: recording id -> the position the replica acknowledged durable
    acked: dict[int, int] = field(default_factory=dict)
    heard: float = 0.0
    in_sync: bool = False
    #: it has a replication session (a member whose session ended stays listed, out of
    #: sync, until it comes back)
    live: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberStatus:
    """A snapshot of one replica (``exon archive list`` shows it)."""

    member: str
    in_sync: bool
    #: bytes behind the primary (the largest over the recordings)
    lag: int
    #: seconds since it was last heard
    silent: float


class InSyncSet:
    """See the module docstring. ``InSyncSet(min_insync=2, max_lag=..., timeout=...)``."""

    def __init__(self, *, min_insync: int = 1, max_lag: int = DEFAULT_MAX_LAG,
                 timeout: float = DEFAULT_REPLICA_TIMEOUT) -> None:
        if min_insync < 1:
            raise ValueError(f"min_insync {min_insync}: want at least 1 (the primary itself)")
        if max_lag < 0:
            raise ValueError(f"max_lag {max_lag}: want at least 0 bytes")
        if timeout <= 0:
            raise ValueError(f"replica timeout {timeout}: want more than 0 s")
        self.min_insync = min_insync
        self.max_lag = max_lag
        self.timeout = timeout
        self._local: dict[int, int] = {}
        self._confirmed: dict[int, int] = {}
        self._members: dict[str, Member] = {}
        self._events: list[Event] = []
        #: times a replica left the in-sync set / joined it
        self.left_count = 0
        self.joined_count = 0

    # ---- input ------------------------------------------------------------------------------

    def local(self, recording: int, position: int) -> None:
        """The primary's own durable end of ``recording`` (it never moves back)."""
        if position > self._local.get(recording, -1):
            self._local[recording] = position
        self._update(None)

    def start(self, member: str, positions: Mapping[int, int], *, now: float) -> None:
        """A replica's replication session began, from ``positions`` (what it holds). A
        member known already is not heard by asking again: only its acknowledgements count
        (a replica whose disk refuses asks again and again, and must still leave)."""
        m = self._members.get(member)
        if m is None:
            m = self._members[member] = Member(member, heard=now)
        m.acked = dict(positions)
        m.live = True
        self._update(m)

    def ack(self, member: str, positions: Mapping[int, int], *, now: float) -> None:
        """A replica says its recordings are durable up to ``positions`` (it is heard)."""
        m = self._members.get(member)
        if m is None or not m.live:
            return  # its session was ended: a late ack counts nothing
        for rid, pos in positions.items():
            if pos > m.acked.get(rid, -1):
                m.acked[rid] = pos
        m.heard = now
        self._update(m)

    def drop(self, member: str) -> None:
        """A replica's session ended (it leaves the set, if it was in it; it stays listed)."""
        m = self._members.get(member)
        if m is None:
            return
        m.live = False
        if m.in_sync:
            self._leave(m, "gone")
            self._update(None)

    def handle_timer(self, *, now: float) -> None:
        """Replicas not heard for ``timeout`` seconds leave the in-sync set."""
        for m in self._members.values():
            if m.in_sync and now - m.heard > self.timeout:
                self._leave(m, "timeout")
            elif (not m.in_sync and m.live and now - m.heard <= self.timeout
                  and self.lag(m) <= self.max_lag):
                self._join(m)
        self._update(None)

    def next_timer(self) -> float | None:
        """When :meth:`handle_timer` could next change something (None: nothing pending)."""
        heard = [m.heard for m in self._members.values() if m.in_sync]
        return min(heard) + self.timeout if heard else None

    # ---- output -----------------------------------------------------------------------------

    def lag(self, m: Member) -> int:
        return max((stop - m.acked.get(rid, 0) for rid, stop in self._local.items()),
                   default=0)

    def in_sync(self) -> list[str]:
        """The replicas in sync (the primary, always in sync, not listed)."""
        return [m.member for m in self._members.values() if m.in_sync]

    def confirmed(self, recording: int) -> int:
        """How far ``recording`` is confirmed: durable on ``min_insync`` members in sync."""
        return self._confirmed.get(recording, -1)

    def next_event(self) -> Event | None:
        return self._events.pop(0) if self._events else None

    def statuses(self, *, now: float) -> list[MemberStatus]:
        return [MemberStatus(member=m.member, in_sync=m.in_sync, lag=self.lag(m),
                             silent=max(0.0, now - m.heard))
                for m in sorted(self._members.values(), key=lambda m: m.member)]

    # ---- rules --------------------------------------------------------------------------------

    def _leave(self, m: Member, reason: str) -> None:
        m.in_sync = False
        self.left_count += 1
        self._events.append(MemberLeft(member=m.member, reason=reason, lag=self.lag(m)))

    def _join(self, m: Member) -> None:
        m.in_sync = True
        self.joined_count += 1
        self._events.append(MemberJoined(member=m.member))

    def _update(self, changed: Member | None) -> None:
        """Move members in and out by lag, then the confirmed positions up."""
        if changed is not None:
            lag = self.lag(changed)
            if changed.in_sync and lag > self.max_lag:
                self._leave(changed, "lag")
            elif not changed.in_sync and changed.live and lag <= self.max_lag:
                self._join(changed)
        else:  # the primary moved on: who falls too far behind leaves
            for m in self._members.values():
                if m.in_sync and self.lag(m) > self.max_lag:
                    self._leave(m, "lag")
        insync = [m for m in self._members.values() if m.in_sync]
        if len(insync) + 1 < self.min_insync:
            return  # too few in sync: nothing more is confirmed
        for rid, stop in self._local.items():
            positions = sorted([stop, *(min(stop, m.acked.get(rid, -1)) for m in insync)],
                               reverse=True)
            nth = positions[self.min_insync - 1]
            if nth > self._confirmed.get(rid, -1):
                self._confirmed[rid] = nth


# ---- epochs and tail cutting ------------------------------------------------------------------

#: an epoch history: ``[[epoch, {recording id: its position when the epoch began}], ...]``,
#: ascending by epoch (the catalog's ``epochs``)
EpochHistory = Sequence[Sequence[object]]


def epoch_starts(history: EpochHistory, epoch: int) -> dict[int, int] | None:
    """Where a member whose last epoch is ``epoch`` must cut its recordings before it
    follows a primary with this ``history``: the positions at which the first later epoch
    began (what that member wrote past them in its own epoch was never copied to the
    member promoted, so never confirmed with min-insync >= 2, and differs). None when no
    later epoch began: the member is not stale."""
    for entry in history:
        e, starts = entry[0], entry[1]
        if isinstance(e, int) and e > epoch and isinstance(starts, Mapping):
            return {int(k): int(v) for k, v in starts.items()}
    return None


def cut_positions(own_stops: Mapping[int, int], starts: Mapping[int, int]) -> dict[int, int]:
    """Of a stale member's recordings (``own_stops``: id -> its stop), those to cut, and
    where: the new epoch's start position when the member went past it. A recording the
    new primary did not have when its epoch began is cut whole (to 0)."""
    cuts: dict[int, int] = {}
    for rid, stop in own_stops.items():
        start = starts.get(rid, 0)
        if stop > start:
            cuts[rid] = start
    return cuts
