"""PULL: receives fair-queued from its linked PUSHes; cannot send.

Besides ``receive()``, a PULL takes messages in batches:

* :meth:`PullSocket.receive_many` -- up to N messages, each delivered as ``receive()``
  delivers it (credit back, the senders' cookies confirmed);
* :meth:`PullSocket.receive_held` + :meth:`PullSocket.confirm` -- up to N messages whose
  delivery is counted only at ``confirm(batch)``: a recorder writes them to disk first, so
  that a sender's cookie means "durable" (docs/protocol.md 2.10-2.11: FLOW's ``delivered``
  confirms cookies, and it only moves at ``confirm``).

Held messages keep their credit: a link holds at most its ``credits`` messages, held or
queued, so a PULL that never confirms makes its producers block (memory stays bounded).
``delivered`` is a count per link, so batches are confirmed in the order they were taken,
and nothing else may count a delivery while a batch is held (``receive()``,
``receive_nowait()`` and ``receive_many()`` raise :class:`exon.StateError` then).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from typing import Any, cast

from exon import errors
from exon.core import PeerId
from exon.sockets.messages import HeldBatch, Message
from exon.sockets.socket import Socket
from exon.sockets.timeouts import check_timeout as _check_timeout

__all__ = ["PullSocket"]

_monotonic = time.monotonic
_MIXING = ("{op}() while {n} batch(es) taken by receive_held() are unconfirmed: it would "
           "count deliveries ahead of them (confirm them first)")

#: most extra looks at the transport a held batch takes before it is cut (_top_up_locked)
_TOP_UP_POLLS = 8

# one line of a held batch's bookkeeping, as the inbox reports it (RecvQueue.hold_buffer):
# (PeerId, link index or -1, our link incarnation, count)
_Count = tuple[PeerId, int, int, int]


class PullSocket(Socket):
    """PULL: receives fair-queued from its linked PUSHes, one at a time or in batches;
    cannot send."""

    type = "pull"
    can_send = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: batches of receive_held(), oldest first, not confirmed yet
        self._held: deque[HeldBatch] = deque()
        self._closing = False
        super().__init__(*args, **kwargs)

    def send(self, data: bytes, *, cookie: Any = None, timeout: float | None = None) -> None:
        """A PULL cannot send: raises :class:`exon.StateError`."""
        raise errors.StateError("a pull socket cannot send; link a push socket to send")

    def send_nowait(self, data: bytes, *, cookie: Any = None) -> None:
        """A PULL cannot send: raises :class:`exon.StateError`."""
        raise errors.StateError("a pull socket cannot send; link a push socket to send")

    # ==== batches ===========================================================================

    def receive_many(self, max_messages: int = 1024,
                     timeout: float | None = None) -> list[Message]:
        """Wait up to ``timeout`` seconds (None: no limit) for at least one message; return
        up to ``max_messages`` of those waiting, fair-queued over the links as
        ``receive()`` hands them out (each sender's order kept). Each is delivered as
        ``receive()`` delivers it: credit flows back (batched FLOWs) and the senders'
        cookies are confirmed.

        Raises :class:`exon.Timeout` when nothing arrived, :class:`exon.ClosedError` when
        the socket is closed, :class:`exon.BrokenLink` when every link broke while waiting,
        :class:`exon.StateError` while a :meth:`receive_held` batch is unconfirmed."""
        with self._lock:
            try:
                return cast("list[Message]", self._batch_locked(
                    "receive_many", max_messages, timeout, False))
            finally:
                self._sync_direct()

    def receive_held(self, max_messages: int = 1024, timeout: float | None = None) -> HeldBatch:
        """Like :meth:`receive_many`, but the delivery of the messages is NOT counted: no
        credit goes back for them and their senders' cookies stay pending until
        :meth:`confirm` takes the batch (write them somewhere safe in between).

        Held messages keep their link's credit: with ``credits=C`` a link's sender stops
        after C messages held or queued, so a PULL that never confirms makes its producers
        block (bounded memory). Keep ``max_messages`` well below the credits (a quarter,
        say) so that the producers go on sending while a batch is being written.

        Several batches may be held at once; confirm them in the order they were taken.
        While any is held, ``receive()``, ``receive_nowait()`` and :meth:`receive_many`
        raise :class:`exon.StateError` (they would count deliveries ahead of the held ones).
        Once :meth:`close` began this raises :class:`exon.ClosedError`; see :meth:`close`
        for what happens to batches still held. Other errors as :meth:`receive_many`."""
        with self._lock:
            try:
                return cast(HeldBatch, self._batch_locked(
                    "receive_held", max_messages, timeout, True))
            finally:
                self._sync_direct()

    def confirm(self, batch: HeldBatch) -> None:
        """Count the delivery of every message of ``batch``: credit flows back (batched
        FLOWs as usual) and the senders' cookies come back. Thread-safe.

        Idempotent: a batch confirmed already, or dropped by :meth:`close`, is left alone.
        Messages of a link that closed since they were taken are ignored (their senders got
        CookieLost). Batches are confirmed in the order :meth:`receive_held` returned them:
        confirming a later one first raises :class:`exon.StateError` and confirms nothing
        (confirming both would report messages not yet safe as delivered)."""
        with self._lock:
            if batch._settled:
                return
            if batch._owner is not self:
                raise errors.StateError(f"{batch!r} was not taken by this socket")
            held = self._held
            if held[0] is not batch:
                waiting = next(i for i, b in enumerate(held) if b is batch)
                raise errors.StateError(
                    f"batches are confirmed in the order receive_held() returned them: "
                    f"{waiting} earlier batch(es) of this socket are not confirmed yet")
            held.popleft()
            batch._settled = True
            self._count_locked(batch._counts)
            if not held:
                self._sync_direct()

    def reject(self, batch: HeldBatch) -> None:
        """Give ``batch`` back undelivered, for a batch that could not be put somewhere
        safe: the links its messages came from are dropped at once, as :meth:`close`
        drops them (their UNLINK goes out; their senders get CookieLost for every message
        not confirmed, this batch's included, and may link and send again), and the batch
        no longer holds back the confirming of later ones. Messages of those links that
        were already received still come out in later batches (their senders were told
        CookieLost: they may come twice, at least once); confirming them counts nothing.
        The socket stays open and its other links go on. Thread-safe; a batch settled
        already is left alone."""
        with self._lock:
            if batch._settled:
                return
            if batch._owner is not self:
                raise errors.StateError(f"{batch!r} was not taken by this socket")
            self._held.remove(batch)
            self._drop_links_locked([batch], tell=True)
            if not self._held:
                self._sync_direct()

    def _drop_links_locked(self, batches: Iterable[HeldBatch], tell: bool = False) -> None:
        """Settle ``batches`` uncounted and abort every link with messages in them;
        ``tell``: send each an UNLINK first (closing sends one to every link itself)."""
        doomed: set[tuple[PeerId, int | None]] = set()
        for batch in batches:
            batch._settled = True
            for peer, _link, incarnation, _count in batch._counts:
                doomed.add((peer, incarnation))
        self._abort_links_locked(doomed, tell)

    def _count_locked(self, counts: list[_Count]) -> None:
        """Count the deliveries of ``counts`` (lock held), as the inbox counts those it
        pops: on a link still attached, through the core otherwise (ignored there when the
        link closed)."""
        nq = self._inbox.nq
        if nq is not None:
            nq.count(counts)
        self._host.flush()

    def _batch_locked(self, op: str, max_messages: int, timeout: float | None,
                      hold: bool) -> list[Message] | HeldBatch:
        if type(max_messages) is not int:
            raise errors.ArgumentTypeError(
                f"max_messages is an int, not {type(max_messages).__name__}")
        if max_messages < 1:
            raise errors.ConfigurationError("max_messages must be >= 1")
        if timeout is not None:
            _check_timeout(timeout)
        self._check_batch_locked(op, hold)
        self._host.activity += 1
        if hold:
            self._top_up_locked(max_messages)
        got = self._grab_locked(max_messages, hold)
        if got is not None:
            return got

        def can_take() -> bool:
            return bool(self._queued() or (self._held and not hold)
                        or (self._closing and hold))

        def take() -> list[Message] | HeldBatch | None:
            if hold:
                self._top_up_locked(max_messages)
            return self._grab_locked(max_messages, hold)

        batch: list[Message] | HeldBatch = self._wait_and_take(
            take, can_take, lambda: self._check_batch_locked(op, hold), timeout)
        return batch

    def _top_up_locked(self, max_messages: int) -> None:
        """Before a held batch is cut: while fewer than ``max_messages`` wait natively and
        the last look found some, look at the transport again (when no other thread holds
        the poll role), up to :data:`_TOP_UP_POLLS` times. One look hands out at most a
        poll's worth (256 frames); a recorder that comes back from writing a batch finds
        more than that in the log, and cutting it into one batch per look would pay the
        per-batch costs (a write, a confirm) several times over. Stops at the first look
        that adds nothing: at worst one empty poll per batch."""
        nq = self._inbox.nq
        if nq is None or not len(nq):
            return  # nothing yet: the wait polls
        poll = self.node.poll_once_if_idle
        for _ in range(_TOP_UP_POLLS):
            before = len(nq)
            if before >= max_messages or not poll() or len(nq) == before:
                return

    def _check_batch_locked(self, op: str, hold: bool) -> None:
        self._check_open()
        if hold:
            if self._closing:
                raise errors.ClosedError(f"socket {self.tag} is closing")
        elif self._held:
            raise errors.StateError(_MIXING.format(op=op, n=len(self._held)))
        if not self._plain:
            raise errors.StateError(f"{op}() needs a socket that takes every message as it "
                                    "comes (this class overrides _accept_locked)")

    def _grab_locked(self, max_messages: int, hold: bool) -> list[Message] | HeldBatch | None:
        """Up to ``max_messages`` waiting messages, popped from the inbox as ``receive()``
        pops them: a HeldBatch (``hold``) or a list of delivered Messages; None when
        nothing waits. Lock held."""
        nq = self._inbox.nq
        if nq is None or not len(nq):
            return None
        if not hold:  # one native call pops and counts the batch
            taken: list[Message] = nq.take(max_messages)
            return taken
        # no Python object per message: the payloads come as one buffer, copied from the
        # queue's raw storage (a held batch's socket queues the fast path's payloads raw
        # from now on: the poll makes no bytes object per message either); the batch builds
        # Messages or a payload list only if asked (HeldBatch)
        nq.raw = 1
        buffer, ends, runs, counts = nq.hold_buffer(max_messages)
        batch = HeldBatch(None, counts, self, buffer=buffer,
                          offsets=memoryview(ends).cast("Q"), runs=runs)
        self._held.append(batch)
        return batch

    # ==== receive() and friends: refused while a batch is held ==============================

    def _receive_locked(self, timeout: float | None) -> Any:
        if self._held:
            raise errors.StateError(_MIXING.format(op="receive", n=len(self._held)))
        return super()._receive_locked(timeout)

    def _take_locked(self) -> Any:
        if self._held:  # a receive() that waited while another thread took a held batch
            raise errors.StateError(_MIXING.format(op="receive", n=len(self._held)))
        return super()._take_locked()

    def _door_held_back(self) -> bool:
        # the receive door pops (and counts): keep it off while a batch is held
        return super()._door_held_back() or bool(self._held)

    # ==== closing ===========================================================================

    def close(self, timeout: float | None = 5.0) -> None:
        """Unlink everything and close (see :meth:`Socket.close`), but without waiting for
        held batches: the links with messages held and not confirmed are dropped at once
        (after their UNLINK went out), so their senders get CookieLost for every message
        not confirmed, held ones included -- they may have been recorded already, a
        sender that resends makes a duplicate (at least once). Confirming a batch after
        close() began does nothing. The other links drain as for any socket, within
        ``timeout``. To close without losing anything: stop taking, confirm every batch,
        then close."""
        super().close(timeout)

    def _on_closing_locked(self) -> None:
        self._closing = True
        held, self._held = self._held, deque()
        self._drop_links_locked(held)
        self.wakeup.notify_all()  # a receive_held() waiting raises ClosedError
