"""The node's memory budget: the receive windows of all links share ``memory_budget``.

A link may hold at most its window of messages the application has not taken
(``advertised - delivered``), each up to the socket's max_message_size. The node's links
share ``settings.memory_budget`` so that the sum of window x max size stays within it: each
link's share is budget / (links x max size) credits, capped by the socket's credits, and
never below 1 (no link is starved; the budget may then be exceeded by one message per
link). Windows shrink at once when links come (a FLOW never takes credit back, but grants
less); a window grows only through the core, and only into what the other links' windows
leave free, so a link that arrives while the budget is taken starts small and grows as the
others drain. A new link gets its whole share while half the budget would stay free;
beyond that it starts with half its share (at least :data:`START_CREDITS`) and grows at
its first FLOW, so a link that never carries anything holds less of a crowded budget (a
growth costs the core a walk over the links: uncrowded, links never need one). Credit once
granted cannot be taken back: a link that never sends keeps its first window reserved while
it lives. With large messages (an archive's 256 KiB ingest: 4,096 messages of budget) four
idle links' first windows (2,048, 1,024, 682, 342) left a fifth, busy one 1 credit, 6,600
messages/s; a socket whose producers may idle sets ``start_credits`` (a few dozen), and
its busy links grow to their shares at their first FLOW.

:class:`MemoryBudget` is owned by the core (:class:`~exon.core.socket_core.SocketCore`) and
used by its link actions: it reads the core's socket records (a reference to the core's
dict) and asks the core to arm a FLOW timer through the ``arm_flow`` callback. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exon.core.link_state import LinkState
from exon.core.records import LinkAccelerator
from exon.core.records import LinkRecord as _Link
from exon.core.records import SocketRecord as _Socket
from exon.core.settings import LinkSettings

__all__ = ["START_CREDITS", "MemoryBudget"]

#: a new link's first window under the memory budget: half its share, at least this
#: (so a socket with up to 256 credits gets them all at once, and a burst of 256 before its
#: application reads never waits for a FLOW)
START_CREDITS = 256


class MemoryBudget:
    """The budget's rules over the core's links.

    ``sockets``: the core's socket records by tag (the core's own dict, read here);
    ``accelerator``: the native link table, told of window changes; ``arm_flow(link)``:
    the core arms ``link``'s FLOW timer (when the accelerator gives it up)."""

    def __init__(self, *, settings: LinkSettings, sockets: dict[int, Any],
                 accelerator: LinkAccelerator | None,
                 arm_flow: Callable[[_Link], None]) -> None:
        self.settings = settings
        self._sockets = sockets
        self.accelerator = accelerator
        self._arm_flow = arm_flow
        #: sum over links of their ``budget_peak``, and how many have one: an upper bound
        #: of what the links may hold (a window's messages never exceed the largest window
        #: granted), and of the number of holders
        self.peak_bytes = 0
        self.peak_links = 0

    def _raise_peak(self, sock: _Socket, link: _Link, credits: int) -> None:
        peak = credits * sock.max_message_size
        if link.budget_peak == 0:
            self.peak_links += 1
        if peak > link.budget_peak:
            self.peak_bytes += peak - link.budget_peak
            link.budget_peak = peak

    def drop_peak(self, link: _Link) -> None:
        if link.budget_peak:
            self.peak_bytes -= link.budget_peak
            self.peak_links -= 1
            link.budget_peak = 0

    def _holds_budget(self, sock: _Socket, link: _Link) -> bool:
        grant = link.grant
        return (sock.budgeted and self.settings.memory_budget is not None and grant is not None
                and grant[0] == link.incarnation
                and link.state not in (LinkState.IDLE, LinkState.RETRY_WAIT))

    def holders(self, but: _Link | None = None) -> list[tuple[_Socket, _Link]]:
        """The stored links holding part of the budget (except ``but``)."""
        return [(sock, link) for sock in self._sockets.values() if sock.budgeted
                for link in sock.links.values()
                if link is not but and self._holds_budget(sock, link)]

    @staticmethod
    def reserved(sock: _Socket, link: _Link) -> int:
        """Bytes the link may come to hold: its window now, or its next one if larger."""
        ledger = link.ledger
        if ledger is None:
            assert link.grant is not None
            credits = link.grant[1]
        else:
            credits = max(ledger.advertised - ledger.delivered, ledger.capacity)
        return credits * sock.max_message_size

    def share(self, sock: _Socket, holders: int) -> int:
        assert self.settings.memory_budget is not None
        return self.settings.window_share(sock.initial_credits, sock.max_message_size, holders)

    def _fit(self, sock: _Socket, share: int, others: list[tuple[_Socket, _Link]]) -> int:
        """The window a link of ``sock`` may have beside ``others``: its share, or what
        the budget has left if less, at least 1."""
        budget = self.settings.memory_budget
        assert budget is not None
        free = budget - sum(self.reserved(s, lk) for s, lk in others)
        return max(1, min(share, free // sock.max_message_size))

    def grant(self, sock: _Socket, link: _Link) -> int:
        """The credits our metadata grants in this incarnation (computed once per
        incarnation: a repeated LINK or LINKACK says the same)."""
        grant = link.grant
        if grant is not None and grant[0] == link.incarnation:
            return grant[1]
        if not sock.budgeted or self.settings.memory_budget is None:
            credits = sock.initial_credits
        else:
            self.drop_peak(link)  # (a grant of an older incarnation)
            others = self.holders(but=link)
            holders = len(others) + 1
            for s, other in others:  # one more holder: every share shrinks
                share = self.share(s, holders)
                if other.ledger is not None and other.ledger.capacity > share:
                    self.set_window(other, share, growing=False)
            share = self.share(sock, holders)
            budget = self.settings.memory_budget
            free = budget - sum(self.reserved(s, lk) for s, lk in others)
            if free - share * sock.max_message_size >= budget // 2:
                credits = share  # half the budget stays free: no need to start small
            else:
                start = min(share, max(START_CREDITS, share // 2)
                            if sock.start_credits is None else sock.start_credits)
                credits = max(1, min(start, free // sock.max_message_size))
            link.growing = credits < share
            self._raise_peak(sock, link, credits)
        link.grant = (link.incarnation, credits)
        return credits

    def grow(self, link: _Link) -> None:
        """Before a FLOW of a growing link: its window grows into the free budget."""
        sock = self._sockets.get(link.tag)
        if sock is None or not self._holds_budget(sock, link):
            link.growing = False
            return
        budget = self.settings.memory_budget
        assert budget is not None
        # first without walking the links: the peaks bound what they hold, and their count
        # the holders (so this share is no larger than the exact one)
        share = self.share(sock, max(1, self.peak_links))
        if self.peak_bytes - link.budget_peak + share * sock.max_message_size <= budget:
            self.set_window(link, share, growing=False)  # fits even if all hold their peak
            return
        others = self.holders(but=link)
        share = self.share(sock, len(others) + 1)
        credits = self._fit(sock, share, others)
        self.set_window(link, credits, growing=credits < share)

    def freed(self) -> None:
        """A holder left: the others' shares grow (each grows at its next FLOW)."""
        holders = self.holders()
        for sock, link in holders:
            ledger = link.ledger
            if ledger is not None and not link.growing and \
                    ledger.capacity < self.share(sock, len(holders)):
                self.set_window(link, ledger.capacity, growing=True)

    def set_window(self, link: _Link, credits: int, *, growing: bool) -> None:
        ledger = link.ledger
        assert ledger is not None
        ledger.capacity = credits
        ledger.batch = self.settings.grant_batch(credits)
        link.growing = growing
        sock = self._sockets.get(link.tag)
        if sock is not None and sock.budgeted and self.settings.memory_budget is not None:
            self._raise_peak(sock, link, credits)
        if link.fast is not None and self.accelerator is not None:
            self.accelerator.set_window(link.fast, 0 if growing else credits, ledger.batch)
            if growing and ledger.flow_pending and link.flow_deadline is None:
                # the accelerator may hold this FLOW's timer, and at capacity 0 it sends
                # no FLOW: the core takes the timer over (else the deliveries' FLOW, and
                # the cookies it confirms, could wait for ever)
                self._arm_flow(link)
