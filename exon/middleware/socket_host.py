"""What a socket may use of its node: the one surface ``exon.sockets`` builds on.

The boundary has two sides, one per direction:

* :class:`~exon.middleware.hosted.HostedSocket`: what the node calls on a socket (events
  from the core, DATA from the fast path, wake-ups);
* :class:`SocketHost` (this module): what a socket calls on its node, reached as
  ``node.socket_host``. A socket type touches nothing else of the node but its public API
  (``address``, ``closed``, ``poll_once_if_idle``, ...); ``tests/middleware/
  test_socket_boundary.py`` fails on any private attribute of a node used under
  ``exon/sockets``.

Every call and every object here is used with the host's :attr:`~SocketHost.lock` held,
unless said otherwise. The objects are the node's own, not copies: a socket may keep a
reference taken at creation (the hot paths do: the native doors, ``fast.send``,
``fast.deliver``), and the callables are the node's bound methods, so calling through the
host costs what a direct call costs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from exon.core import PeerId, SocketCore
    from exon.middleware.fastpath import FastLinks
    from exon.middleware.hosted import HostedSocket
    from exon.middleware.node_transport import PendingFragments
    from exon.middleware.wakeup import Wakeup

__all__ = ["SocketHost"]


class _WaitUntil(Protocol):
    def __call__(self, wakeup: Wakeup, ready: Callable[[], bool],
                 deadline: float | None, spin: float = ...,
                 lead: Callable[[], bool] | None = ...) -> bool: ...


class SocketHost:
    """The node as its sockets see it (``node.socket_host``); built by the node.

    Objects (the node's own):

    * :attr:`lock`: the node's lock (a native ``NodeLock``, re-entrant): it guards the core
      and every socket's state; the native doors take it in C.
    * :attr:`core`: the node's :class:`~exon.core.SocketCore`, through its public methods.
    * :attr:`fast`: the native link table, receive queues and doors
      (:class:`~exon.middleware.fastpath.FastLinks`).
    * :attr:`backlog`: the frames waiting for a connection to a peer node, by address.
      While it is not empty a send takes the core's path, so frames keep their order.
    * :attr:`activity`: a counter a socket bumps on each client call of its Python paths
      (``host.activity += 1``): the node's dispatcher stays off while it moves.

    Calls (the node's bound methods):

    * ``wait_until(wakeup, ready, deadline, spin=0.0) -> bool``: wait until ``ready()`` (True),
      or until the monotonic ``deadline`` (False; None: no limit). The waiting thread polls
      the transport itself when nobody else does (leader/follower), else sleeps in
      ``wakeup`` (the socket's :class:`~exon.middleware.wakeup.Wakeup`) until the poller
      notifies it; as the leader it spins ``spin`` seconds before each sleep. ``lead()``
      (None: always) says whether the thread may take the poll role now; while it says no
      the thread only sleeps in ``wakeup``, served by whoever polls (another thread or
      the dispatcher). Raises :class:`~exon.errors.ClosedError` when the node closes and
      :class:`~exon.errors.BrokenLink` when its media driver died.
    * ``pump()``: hand the core's events to the sockets and its frames to the transport,
      until both are empty, then wake the sockets that got something. After any core call
      that may produce frames or events (link, unlink, close_socket).
    * ``flush()``: the cheap form of ``pump()`` for after a send or a delivery: send the
      core's frames; pump fully only when the core produced events.
    * ``open_socket(sock, type, tag, core_options) -> (tag, slot)``: register ``sock``
      (tag None: a free one) with the core and the link table; ``slot`` is its link-table
      slot (-1: none). Takes the lock itself.
    * ``close_socket(tag)``: forget a closed socket (the core closed it already): events
      for it are ignored and its link-table slot may go to a new socket.
    * ``peer(peer_id) -> Peer | None``: the public :class:`~exon.core.address.Peer` of a
      core ``PeerId`` (cached).
    * ``async_waiting(sock, delta, waiting)``: ``delta`` asyncio tasks start (+) or stop
      (-) waiting on ``sock``; ``waiting``: whether any still waits on it. The dispatcher
      polls for the event loops while any task waits.
    * ``loop_polling(delta, handoff=0.0) -> bool``: an asyncio task starts (+1) or stops
      (-1) polling the transport from its event loop (``node.poll_once_if_idle()`` between
      yields, for a bounded spin); the dispatcher stands aside meanwhile. Starting returns
      False (do not spin) while another task of the node spins already; when the
      dispatcher holds the poll role, it waits up to ``handoff`` seconds (the loop
      blocked) for the dispatcher to hand it over.
    """

    __slots__ = ("activity", "async_waiting", "backlog", "close_socket", "core", "fast",
                 "flush", "lock", "loop_polling", "open_socket", "peer", "pump", "wait_until")

    lock: Any
    core: SocketCore
    fast: FastLinks
    backlog: dict[str, deque[bytes | PendingFragments]]
    activity: int
    wait_until: _WaitUntil
    pump: Callable[[], None]
    flush: Callable[[], None]
    open_socket: Callable[[HostedSocket, str, int | None, dict[str, Any]], tuple[int, int]]
    close_socket: Callable[[int], None]
    peer: Callable[[PeerId], Any]  # a Peer (None for an address that is no HOST:PORT)
    async_waiting: Callable[[HostedSocket, int, bool], None]
    loop_polling: Callable[..., bool]

    def __init__(
        self,
        *,
        lock: Any,
        core: SocketCore,
        fast: FastLinks,
        backlog: dict[str, deque[bytes | PendingFragments]],
        wait_until: _WaitUntil,
        pump: Callable[[], None],
        flush: Callable[[], None],
        open_socket: Callable[..., tuple[int, int]],
        close_socket: Callable[[int], None],
        peer: Callable[[PeerId], Any],
        async_waiting: Callable[[HostedSocket, int, bool], None],
        loop_polling: Callable[..., bool],
    ) -> None:
        self.lock = lock
        self.core = core
        self.fast = fast
        self.backlog = backlog
        self.activity = 0
        self.wait_until = wait_until
        self.pump = pump
        self.flush = flush
        self.open_socket = open_socket
        self.close_socket = close_socket
        self.peer = peer
        self.async_waiting = async_waiting
        self.loop_polling = loop_polling

    def __repr__(self) -> str:
        return f"<SocketHost of {self.core.node_id}>"
