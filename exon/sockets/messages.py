"""What ``receive()`` returns, and how a peer socket is named.

* :class:`Message` -- a payload and the :class:`Peer` that sent it;
* :class:`Cookie` -- the object given to ``send(..., cookie=obj)``, returned once the peer's
  application received that message (exactly once);
* :class:`CookieLost` -- the same object, returned instead when the link closed before the
  peer confirmed delivery (the message may or may not have reached the peer application);
* :class:`Dropped` -- in a SUB's stream: a publisher dropped that many messages for it;
* :class:`Peer` -- ``"HOST:PORT/TAG"``: a node address and a socket tag (u32);
* :class:`HeldBatch` -- messages a PULL took with ``receive_held()`` whose delivery it has
  not confirmed yet (``confirm(batch)``).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from exon.core.address import Peer, join_address, split_address

__all__ = ["Cookie", "CookieLost", "Dropped", "HeldBatch", "Message", "Peer", "join_address",
           "split_address"]

class Message(tuple):  # type: ignore[type-arg]
    """A message received from ``peer``: ``Message(payload, peer=None)``.

    Immutable, compared and hashed by ``(payload, peer)``. A tuple underneath, so that the
    receive path builds one in a single C call."""

    __slots__ = ()
    __match_args__ = ("payload", "peer")

    def __new__(cls, payload: bytes, peer: Peer | None = None) -> Message:
        return tuple.__new__(cls, (payload, peer))

    @property
    def payload(self) -> bytes:
        """The message's bytes."""
        return self[0]  # type: ignore[no-any-return]

    @property
    def peer(self) -> Peer | None:
        """The socket that sent it (None when unknown)."""
        return self[1]  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        return type(other) is Message and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __getnewargs__(self) -> tuple[bytes, Peer | None]:
        return (self[0], self[1])

    def __repr__(self) -> str:
        return f"Message(payload={self[0]!r}, peer={self[1]!r})"


@dataclass(frozen=True, slots=True)
class Cookie:
    """The peer's application received the message sent with ``cookie=value``."""

    value: Any


@dataclass(frozen=True, slots=True)
class Dropped:
    """A SUB's stream item: the publisher ``peer`` dropped ``count`` messages meant for this
    subscriber (its policy is "drop" and this SUB had no credit), just before the next item
    from that publisher. The gap is counted, never silent."""

    count: int
    peer: Peer | None = None


@dataclass(frozen=True, slots=True)
class CookieLost:
    """The link closed before the message sent with ``cookie=value`` was confirmed."""

    value: Any


_NO_PEER = object()  # HeldBatch.runs: no sender seen yet


class HeldBatch:
    """Messages taken by :meth:`PullSocket.receive_held <exon.sockets.pull.PullSocket.receive_held>`
    whose delivery is not counted yet: no credit went back for them and their senders'
    cookies stay pending until :meth:`PullSocket.confirm <exon.sockets.pull.PullSocket.confirm>`
    takes the batch.

    ``messages`` -- the :class:`Message` list, in the order ``receive()`` would have returned
    them (fair-queued over the links, each sender's order kept). ``len(batch)`` and
    ``iter(batch)`` go over it. The same batch without a Python object per message, for a
    consumer that handles payloads in bulk (the archive's recorder): ``buffer``, the payloads
    in that order one after the other in one ``bytes``, and ``offsets``, ``len(batch) + 1``
    unsigned 64-bit ints where payload ``i`` is ``buffer[offsets[i]:offsets[i + 1]]``; or
    ``payloads``, the payloads as a list of ``bytes``. ``runs``, ``[(Peer, count), ...]``,
    cuts them into consecutive messages of one sender (the counts add up to ``len(batch)``).
    The socket hands out one form and builds the others only when asked. The rest is the
    socket's bookkeeping: per link incarnation, how many of its messages the batch holds."""

    __slots__ = ("_buffer", "_counts", "_messages", "_offsets", "_owner", "_payloads", "_runs",
                 "_settled")

    def __init__(self, messages: list[Message] | None, counts: list[tuple[Any, int, Any, int]],
                 owner: object, *, payloads: list[bytes] | None = None,
                 runs: list[tuple[Peer, int]] | None = None, buffer: bytes | None = None,
                 offsets: memoryview | None = None) -> None:
        if buffer is not None:
            if offsets is None or offsets.format != "Q" or len(offsets) < 1:
                raise TypeError("HeldBatch: a buffer comes with offsets, a memoryview of "
                                "len(batch) + 1 unsigned 64-bit ints")
            if offsets[0] != 0 or offsets[-1] != len(buffer):
                raise ValueError("HeldBatch: offsets run from 0 to len(buffer)")
        if messages is None and ((payloads is None and buffer is None) or runs is None):
            raise TypeError("HeldBatch needs messages, or payloads (or a buffer) and runs")
        self._messages = messages
        self._payloads = payloads
        self._buffer = buffer
        self._offsets = offsets
        self._runs = runs
        #: what confirm counts: (PeerId, link index or -1, our link incarnation, count)
        self._counts = counts
        self._owner = owner
        #: confirmed, or dropped with its links (the socket closed): confirm() does nothing
        self._settled = False

    @property
    def messages(self) -> list[Message]:
        """The batch as :class:`Message` objects (built on first use from the payloads)."""
        if self._messages is None:
            assert self._runs is not None
            payloads = iter(self.payloads)
            new = tuple.__new__
            self._messages = [new(Message, (next(payloads), peer))
                              for peer, count in self._runs for _ in range(count)]
        return self._messages

    @property
    def payloads(self) -> list[bytes]:
        """The payloads alone, in the order of :attr:`messages` (built on first use from
        :attr:`buffer` when the batch came as one)."""
        if self._payloads is None:
            if self._messages is not None:
                self._payloads = [m[0] for m in self._messages]
            else:
                assert self._buffer is not None
                assert self._offsets is not None
                data, ends = self._buffer, self._offsets.tolist()
                self._payloads = [data[a:b] for a, b in itertools.pairwise(ends)]
        return self._payloads

    @property
    def buffer(self) -> bytes:
        """The payloads one after the other, in the order of :attr:`messages`, as one
        ``bytes`` (cut by :attr:`offsets`). Built on first use when the batch came as a list."""
        if self._buffer is None:
            self._buffer = b"".join(self.payloads)
        return self._buffer

    @property
    def offsets(self) -> memoryview:
        """``len(batch) + 1`` unsigned 64-bit ints (a read-only memoryview, format ``Q``):
        payload ``i`` is ``buffer[offsets[i]:offsets[i + 1]]``."""
        if self._offsets is None:
            ends = array("Q", [0])
            ends.extend(itertools.accumulate(len(p) for p in self.payloads))
            self._offsets = memoryview(ends).toreadonly()
        return self._offsets

    @property
    def runs(self) -> list[tuple[Peer, int]]:
        """``[(Peer, count), ...]``: the senders of :attr:`payloads`, run by run."""
        if self._runs is None:
            assert self._messages is not None
            runs: list[tuple[Peer, int]] = []
            last: Any = _NO_PEER
            count = 0
            for m in self._messages:
                if m[1] is not last and m[1] != last:
                    if count:
                        runs.append((last, count))
                    last, count = m[1], 0
                count += 1
            if count:
                runs.append((last, count))
            self._runs = runs
        return self._runs

    def __len__(self) -> int:
        if self._offsets is not None:
            return len(self._offsets) - 1
        return len(self._payloads if self._payloads is not None else self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __repr__(self) -> str:
        state = "settled" if self._settled else "held"
        return f"<HeldBatch {len(self)} message(s), {state}>"
