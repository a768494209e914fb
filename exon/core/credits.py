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
      ``limit = delivered + capacity``.

So the messages a link can hold in the receiver's queue are at most ``capacity``, and the
memory of a socket is bounded by links x capacity x max message size.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class CreditLedger:
    """Both halves of one link's credit state (ours as a sender and as a receiver)."""

    # sender half
    limit: int  #: the peer lets us send sequence numbers < limit
    sent: int = 0
    confirmed: int = 0  #: the peer's application has received this many of ours
    # receiver half
    capacity: int = 128  #: credits we grant (our initial credits)
    batch: int = 16
    received: int = 0
    delivered: int = 0
    advertised: int = 0  #: last limit we told the peer
    flowed_delivered: int = 0  #: delivered count in our last FLOW
    violations: int = 0  #: DATA frames beyond credit, dropped

    def __post_init__(self) -> None:
        if self.advertised == 0:
            self.advertised = self.capacity

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

    @property
    def unconfirmed(self) -> int:
        return self.sent - self.confirmed

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
        """The (delivered, limit) pair of the next FLOW, and mark it sent."""
        self.flowed_delivered = self.delivered
        self.advertised = self.delivered + self.capacity
        return self.delivered, self.advertised
