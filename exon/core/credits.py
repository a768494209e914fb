"""Per-link credit accounting, AMQP style ("you may send up to sequence X").

Each direction of a link has a sender half and a receiver half. Counts are unsigned 64-bit,
start at 0 for every link incarnation and never wrap in practice.

Sender half (:class:`CreditLedger` ``sent``/``limit``/``confirmed``):
    * may send DATA only while ``sent < limit``; each DATA does ``sent += 1``;
    * the initial ``limit`` is the ``credits`` value of the peer's link metadata;
    * on FLOW(delivered, limit): ``limit = max(limit, flow.limit)`` and
      ``confirmed = max(confirmed, flow.delivered)``. Both are maxima, so a FLOW that is
      duplicated or arrives late changes nothing: FLOW is idempotent.
    * ``credit = limit - sent`` is never negative.

Receiver half (``received``/``delivered``/``capacity``/``advertised``):
    * ``advertised`` is the last limit told to the sender (initially ``capacity``);
    * DATA with ``received >= advertised`` is a credit violation (dropped and counted);
    * ``deliver()`` counts a message handed to the application; a FLOW is due when
      ``delivered - flowed_delivered >= batch`` (or when the core's flow timer fires), with
      ``limit = max(advertised, delivered + capacity)`` (``capacity``, the window, may shrink
      when more links share the node's memory budget; a limit never moves back).

Shared counters: :meth:`CreditLedger.attach` moves ``limit``, ``sent``, ``confirmed``,
``hold_flow`` (non-zero while cookies wait: FLOWs must then reach the core), ``flow_timer``
(the core's FLOW timer is armed), ``advertised``,
``received``, ``delivered`` and ``flowed_delivered`` into an external record (any object
with those attributes: the Node's native link table entry, ``exon_lt_link_t``, or a plain
object in tests) and makes the ledger read and write them there, so a native DATA fast
path and the core count in one place; :meth:`CreditLedger.detach` copies them back. The
rules above hold whoever moves the counters.

So the messages a link can hold in the receiver's queue are at most its window, and the
memory of a node is bounded by the sum of windows x max message size, which the core keeps
within ``LinkSettings.memory_budget`` (see ``SocketCore``, "the memory budget").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

_SHARED = ("limit", "sent", "confirmed", "hold_flow", "advertised", "received", "delivered",
           "flowed_delivered", "flow_timer")


class _SharedInt(Protocol):
    """What a ``_shared`` property is to a type checker: an ``int`` attribute."""

    def __get__(self, obj: CreditLedger, owner: type[CreditLedger] | None = None) -> int: ...

    def __set__(self, obj: CreditLedger, value: int) -> None: ...


def _shared(name: str) -> _SharedInt:
    local = "_" + name

    def get(self: CreditLedger) -> int:
        ext = self._ext
        return getattr(self, local) if ext is None else int(getattr(ext, name))

    def set(self: CreditLedger, value: int) -> None:
        ext = self._ext
        if ext is None:
            setattr(self, local, value)
        else:
            setattr(ext, name, value)

    # A plain property at run time (C-speed attribute access on the hot path).
    doc = f"``{name}`` (shared with the attached record, if any)"
    return cast(_SharedInt, property(get, set, doc=doc))


class CreditLedger:
    """Both halves of one link's credit state (ours as a sender and as a receiver)."""

    __slots__ = (
        "_advertised",
        "_confirmed",
        "_delivered",
        "_ext",
        "_flow_timer",
        "_flowed_delivered",
        "_hold_flow",
        "_limit",
        "_received",
        "_sent",
        "batch",
        "capacity",
        "violations",
    )

    # sender half
    limit = _shared("limit")  #: the peer lets us send sequence numbers < limit
    sent = _shared("sent")
    confirmed = _shared("confirmed")  #: the peer's application has received this many of ours
    #: != 0 while cookies wait for confirmation: an attached record must hand FLOWs to the
    #: core (which returns the cookies) instead of applying them itself
    hold_flow = _shared("hold_flow")
    # receiver half
    advertised = _shared("advertised")  #: last limit we told the peer
    received = _shared("received")
    delivered = _shared("delivered")
    flowed_delivered = _shared("flowed_delivered")  #: delivered count in our last FLOW
    #: 1 while the core's FLOW timer is armed for this link (an attached record then does
    #: not ask the core again on the first delivery after a FLOW)
    flow_timer = _shared("flow_timer")

    def __init__(self, limit: int, sent: int = 0, confirmed: int = 0, capacity: int = 128,
                 batch: int = 16, received: int = 0, delivered: int = 0, advertised: int = 0,
                 flowed_delivered: int = 0, violations: int = 0) -> None:
        self._ext: Any = None
        self._limit = limit
        self._sent = sent
        self._confirmed = confirmed
        self._hold_flow = 0
        self._flow_timer = 0
        self.capacity = capacity  #: credits we grant (our initial credits)
        self.batch = batch
        self._received = received
        self._delivered = delivered
        self._advertised = advertised or capacity
        self._flowed_delivered = flowed_delivered
        self.violations = violations  #: DATA frames beyond credit, dropped

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)}" for n in (*_SHARED, "capacity"))
        return f"CreditLedger({fields}{', attached' if self._ext is not None else ''})"

    # ---- shared counters ----------------------------------------------------------------

    @property
    def attached(self) -> Any:
        """The external record holding the shared counters, or None."""
        return self._ext

    def attach(self, record: Any) -> None:
        """Move the shared counters into ``record`` (its attributes of the same names)."""
        if self._ext is not None:
            raise ValueError("the ledger is already attached")
        for name in _SHARED:
            setattr(record, name, getattr(self, "_" + name))
        self._ext = record

    def detach(self) -> None:
        """Copy the shared counters back from the record and stop using it."""
        ext = self._ext
        if ext is None:
            return
        for name in _SHARED:
            setattr(self, "_" + name, int(getattr(ext, name)))
        self._ext = None

    # ---- sender half ------------------------------------------------------------------

    @property
    def credit(self) -> int:
        return self.limit - self.sent

    def spend(self) -> int:
        """Take one credit for a DATA frame; returns its sequence number (0-based)."""
        if self.sent >= self.limit:
            raise ValueError("no credit")  # callers check .credit first
        seq = self.sent
        self.sent += 1
        return seq

    def apply_flow(self, delivered: int, limit: int) -> tuple[int, int]:
        """Apply a FLOW. Returns (newly confirmed count, credit before the FLOW)."""
        before = self.credit
        if limit > self.limit:
            self.limit = limit
        newly = 0
        top = min(delivered, self.sent)  # the peer cannot confirm what we never sent
        if top > self.confirmed:
            newly = top - self.confirmed
            self.confirmed = top
        return newly, before

    # ---- receiver half ----------------------------------------------------------------

    def accept_data(self) -> bool:
        """Count an arriving DATA; False (and a counted violation) when beyond credit."""
        if self.received >= self.advertised:
            self.violations += 1
            return False
        self.received += 1
        return True

    def deliver(self, count: int = 1) -> None:
        """Count ``count`` messages handed to the application."""
        if count < 0 or self.delivered + count > self.received:
            raise ValueError("cannot deliver more messages than were received")
        self.delivered += count

    @property
    def flow_due(self) -> bool:
        return self.delivered - self.flowed_delivered >= self.batch

    @property
    def flow_pending(self) -> bool:
        return self.delivered > self.flowed_delivered

    def make_flow(self) -> tuple[int, int]:
        """The (delivered, limit) pair of the next FLOW, and mark it sent. The limit never
        falls below the last one advertised (``capacity`` may have shrunk since)."""
        delivered = self.delivered
        self.flowed_delivered = delivered
        limit = delivered + self.capacity
        if limit > self.advertised:
            self.advertised = limit
        return delivered, self.advertised


def pick_round_robin(count: int, cursor: int,
                     has_credit: Callable[[int], bool]) -> tuple[int, int] | None:
    """The round-robin rule of the sending sockets (PUSH, REQ, DEALER): of ``count`` links
    in the order they were established, the first for which ``has_credit(index)`` holds at
    or after ``cursor`` (wrapping round): ``(index, next cursor)``, the cursor moving to the
    link after it; None when none has credit. ``SocketCore.pick_destination`` applies it;
    the native link table applies the same rule to the links it holds (``exon_lt_send``
    over each socket's ring), and tests/middleware/test_rule_parity.py runs both on the
    same random credit."""
    for step in range(count):
        index = (cursor + step) % count
        if has_credit(index):
            return index, (index + 1) % count
    return None


def cursor_after_removal(cursor: int, removed: int, count: int) -> int:
    """The round-robin cursor once the link at ``removed`` (of ``count``, before it left)
    leaves the order: still on the same link when the removed one came before or after it
    (one index down when before); on the link after the removed one when the cursor was on
    it; the first once it would point past the end. The native ring does the same when a
    link leaves it (its cursor is a link, not an index: ``lt_unindex``), and
    tests/middleware/test_rule_parity.py runs both with removals."""
    if removed < cursor:
        cursor -= 1
    return 0 if cursor >= count - 1 else cursor
