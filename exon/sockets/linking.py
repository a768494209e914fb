"""Linking a socket with its peers: the handshakes behind ``link``, ``unlink``, ``peers``,
``windows`` and ``wait_for_links``.

:class:`Linking` is owned by a :class:`~exon.sockets.socket.Socket` (``sock._linking``),
whose public methods call it in one line each (``alink`` uses its ``begin`` / ``settled``
/ ``conclude``). It gets, in its constructor, what it uses: the node's socket host, the
socket's tag and :class:`~exon.middleware.wakeup.Wakeup`, and two of the socket's
callables (is it closed; raise if it is). It runs the handshake through the node's core:
the core sends LINK and retries temporary refusals; the socket waits, under the node's
lock, until the link is established, permanently refused, or the deadline passes. It
keeps the refusals the node reported (:attr:`Linking.refusals`, filled by the socket's
event handlers).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from exon import errors
from exon.core import Decision, LinkRefused, LinkState, PeerId
from exon.core.events import ErrorReceived
from exon.middleware.socket_host import SocketHost
from exon.middleware.wakeup import Wakeup
from exon.sockets.messages import Peer
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["Linking", "peer_id"]

_monotonic = time.monotonic


def peer_id(peer: str | Peer) -> PeerId:
    """The core's id of ``peer`` ("HOST:PORT/TAG" or a :class:`Peer`)."""
    p = Peer.parse(peer)
    return PeerId(p.address, p.tag)


class Linking:
    """The links of one socket: starting, awaiting and ending them."""

    __slots__ = ("_check_open", "_core", "_host", "_is_closed", "_lock", "_tag", "_wakeup",
                 "refusals")

    def __init__(self, *, host: SocketHost, tag: int, wakeup: Wakeup,
                 is_closed: Callable[[], bool], check_open: Callable[[], None]) -> None:
        self._host = host
        self._lock = host.lock
        self._core = host.core
        self._tag = tag
        self._wakeup = wakeup
        self._is_closed = is_closed
        self._check_open = check_open  # raises ClosedError
        #: the last refusal (or SOCKET_NOT_FOUND error) of each peer being linked (lock held)
        self.refusals: dict[PeerId, LinkRefused | ErrorReceived] = {}

    def link(self, peer: str | Peer, timeout: float | None = 5.0) -> None:
        """Link with ``peer`` ("HOST:PORT/TAG"); returns once established.

        Raises :class:`exon.LinkRefused` on a permanent refusal (``.reason`` names it),
        :class:`exon.SocketNotFound` when the peer node has no such socket by the deadline,
        :class:`exon.Timeout` otherwise. Temporary refusals are retried by the core with a
        randomised, growing delay until the deadline.
        """
        pid = peer_id(peer)
        deadline = _deadline(timeout)
        if self.begin(pid):
            return
        with self._lock:
            ok = self._host.wait_until(self._wakeup, lambda: self.settled(pid), deadline)
            self.conclude(pid, ok, timeout)

    def begin(self, pid: PeerId) -> bool:
        """Start linking with ``pid`` (the core retries temporary refusals); True when the
        link is established already."""
        with self._lock:
            self._check_open()
            core = self._core
            state = core.link_state(self._tag, pid)
            if state is LinkState.ESTABLISHED:
                return True
            self.refusals.pop(pid, None)
            if state in (LinkState.IDLE, LinkState.RETRY_WAIT):
                core.link(self._tag, pid, now=_monotonic())
                self._host.pump()
            return False

    def settled(self, pid: PeerId) -> bool:
        """Lock held: the link with ``pid`` is established, or permanently refused, or the
        socket closed."""
        if self._is_closed():
            return True
        if self._core.link_state(self._tag, pid) is LinkState.ESTABLISHED:
            return True
        refusal = self.refusals.get(pid)
        return isinstance(refusal, LinkRefused) and refusal.retry_at is None

    def conclude(self, pid: PeerId, settled: bool, timeout: float | None) -> None:
        """Lock held: return when the link is established, else raise why not (``settled``
        False: the wait timed out, and linking stops)."""
        core = self._core
        self._check_open()
        if core.link_state(self._tag, pid) is LinkState.ESTABLISHED:
            return
        refusal = self.refusals.pop(pid, None)
        if settled and isinstance(refusal, LinkRefused):
            raise errors.LinkRefused(
                f"{pid} refused the link: {refusal.decision.name} ({refusal.reason})",
                reason=refusal.decision.name, permanent=refusal.permanent)
        # timed out: stop retrying
        if core.link_state(self._tag, pid) is not LinkState.IDLE:
            core.unlink(self._tag, pid, now=_monotonic())
            self._host.pump()
        if isinstance(refusal, LinkRefused) and refusal.decision is Decision.SOCKET_NOT_FOUND:
            raise errors.SocketNotFound(f"no socket {pid.tag} on node {pid.address} "
                                        f"({refusal.reason})")
        detail = (f" (last refusal: {refusal.reason})"
                  if isinstance(refusal, LinkRefused) else "")
        raise errors.Timeout(f"linking with {pid} did not complete in {timeout}s{detail}")

    def unlink(self, peer: str | Peer, timeout: float | None = 5.0) -> None:
        """Unlink from ``peer``; returns once the link closed. Nothing sent before is lost:
        the link closes when both directions were delivered (or the core's unlink timeout
        expired, in which case unconfirmed cookies come back as CookieLost)."""
        pid = peer_id(peer)
        deadline = _deadline(timeout)
        with self._lock:
            self._check_open()
            core = self._core
            if core.link_state(self._tag, pid) is LinkState.IDLE:
                return
            core.unlink(self._tag, pid, now=_monotonic())
            self._host.pump()
            if not self._host.wait_until(
                    self._wakeup, lambda: core.link_state(self._tag, pid) is LinkState.IDLE,
                    deadline):
                raise errors.Timeout(f"unlinking from {pid} did not complete in {timeout}s")

    def peers(self) -> list[Peer]:
        """Peers with an established link."""
        with self._lock:
            if self._is_closed():
                return []
            return [self._host.peer(p) for p in self._core.established(self._tag)]

    def windows(self) -> dict[Peer, int]:
        """The receive window (credits) each established link has now: the socket's
        ``credits``, or less while the node's memory budget is shared among more links (a
        window is budget / (links x max_message_size), docs/guide/tuning.md). A receiver
        that holds what it takes (``receive_held``) sizes its batches below these."""
        with self._lock:
            if self._is_closed():
                return {}
            return {self._host.peer(p): w for p, w in self._core.windows(self._tag).items()}

    def wait_for_links(self, count: int = 1, timeout: float | None = 5.0) -> None:
        """Block until at least ``count`` links are established (e.g. a REP or PULL waiting
        for its peers)."""
        deadline = _deadline(timeout)
        with self._lock:
            self._check_open()
            if not self._host.wait_until(self._wakeup,
                                    lambda: len(self._core.established(self._tag)) >= count,
                                    deadline):
                raise errors.Timeout(f"{count} link(s) not established in {timeout}s")
