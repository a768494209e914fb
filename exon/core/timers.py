"""The core's link timers: one heap for every link, each link's deadlines on its record.

A link has at most one live timer of each kind, its deadline kept on the link record
(``flow`` -> ``flow_deadline``, ``resend`` -> ``resend_deadline``, anything else -- retry,
unlink -- -> ``deadline``). Arming pushes ``(when, seq, kind, link)``; re-arming or
clearing only changes the record, and the heap entries that no longer match it are
skipped when they come up (lazy deletion: no search through the heap). Sans-IO: time is
the caller's ``now``.
"""

from __future__ import annotations

import heapq

from exon.core.link_state import LinkState
from exon.core.records import LinkRecord

__all__ = ["LinkTimers"]

FLOW = "flow"  #: send the batched FLOW (the credit given back)
RESEND = "resend"  #: repeat an unanswered LINK


class LinkTimers:
    """Every link timer of one core, earliest first."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, LinkRecord]] = []
        self._seq = 0  # ties: first armed, first fired (and links are never compared)

    def arm(self, link: LinkRecord, kind: str, when: float) -> None:
        """Set ``link``'s ``kind`` timer to ``when`` (replacing the one it had)."""
        if kind == FLOW:
            link.flow_deadline = when
            if link.ledger is not None:
                link.ledger.flow_timer = 1  # a native record stops asking for the timer
        elif kind == RESEND:
            link.resend_deadline = when
        else:
            link.deadline = when
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, kind, link))

    @staticmethod
    def clear_flow(link: LinkRecord) -> None:
        """``link`` has no FLOW timer any more (its FLOW went out)."""
        link.flow_deadline = None
        if link.ledger is not None:
            link.ledger.flow_timer = 0

    @staticmethod
    def valid(when: float, kind: str, link: LinkRecord) -> bool:
        """Whether a heap entry is still its link's live timer."""
        if not link.stored:
            return False
        if kind == FLOW:
            return link.flow_deadline == when
        if kind == RESEND:  # only while the LINK is unanswered
            return link.resend_deadline == when and link.state is LinkState.LINK_SENT
        return link.deadline == when

    def next(self) -> float | None:
        """The earliest live deadline, or None (dropping the stale entries in front)."""
        heap = self._heap
        while heap:
            when, _seq, kind, link = heap[0]
            if self.valid(when, kind, link):
                return when
            heapq.heappop(heap)
        return None

    def pop_due(self, now: float) -> tuple[str, LinkRecord] | None:
        """The next live timer due at ``now`` (removed): (kind, link), or None."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, _seq, kind, link = heapq.heappop(heap)
            if self.valid(when, kind, link):
                return kind, link
        return None

    def __len__(self) -> int:
        """Heap entries, stale ones included (a bound on the live timers)."""
        return len(self._heap)
