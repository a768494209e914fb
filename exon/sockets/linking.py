"""Linking a socket with its peers: ``link``, ``unlink``, ``peers``, ``wait_for_links``.

:class:`LinkingMixin` is a base of :class:`~exon.sockets.socket.Socket`; its methods use
the socket's state (declared below) and run the handshake through the node's core: the
core sends LINK and retries temporary refusals; the socket waits, under the node's lock,
until the link is established, permanently refused, or the deadline passes.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from exon import errors
from exon.core import Decision, LinkEstablished, LinkRefused, LinkState, PeerId, SocketCore
from exon.core.events import ErrorReceived
from exon.middleware.socket_host import SocketHost
from exon.middleware.wakeup import Wakeup
from exon.sockets.messages import Peer
from exon.sockets.timeouts import deadline as _deadline

__all__ = ["LinkingMixin"]

_monotonic = time.monotonic


class LinkingMixin:
    """Linking and unlinking (a base of :class:`~exon.sockets.socket.Socket`)."""

    # the socket's state (exon.sockets.socket.Socket.__init__)
    tag: int
    _lock: Any
    _core: SocketCore
    _host: SocketHost
    wakeup: Wakeup
    _closed: bool
    _refusals: dict[PeerId, LinkRefused | ErrorReceived]

    def _check_open(self) -> None:
        raise NotImplementedError  # Socket's

    @staticmethod
    def _peer_id(peer: str | Peer) -> PeerId:
        p = Peer.parse(peer)
        return PeerId(p.address, p.tag)

    def link(self, peer: str | Peer, timeout: float | None = 5.0) -> None:
        """Link with ``peer`` ("HOST:PORT/TAG"); returns once established.

        Raises :class:`exon.LinkRefused` on a permanent refusal (``.reason`` names it),
        :class:`exon.SocketNotFound` when the peer node has no such socket by the deadline,
        :class:`exon.Timeout` otherwise. Temporary refusals are retried by the core with a
        randomised, growing delay until the deadline.
        """
        pid = self._peer_id(peer)
        deadline = _deadline(timeout)
        if self._link_begin(pid):
            return
        with self._lock:
            ok = self._host.wait_until(self.wakeup, lambda: self._link_settled(pid), deadline)
            self._link_conclude(pid, ok, timeout)

    def _link_begin(self, pid: PeerId) -> bool:
        """Start linking with ``pid`` (the core retries temporary refusals); True when the
        link is established already."""
        with self._lock:
            self._check_open()
            core = self._core
            state = core.link_state(self.tag, pid)
            if state is LinkState.ESTABLISHED:
                return True
            self._refusals.pop(pid, None)
            if state in (LinkState.IDLE, LinkState.RETRY_WAIT):
                core.link(self.tag, pid, now=_monotonic())
                self._host.pump()
            return False

    def _link_settled(self, pid: PeerId) -> bool:
        """Lock held: the link with ``pid`` is established, or permanently refused, or the
        socket closed."""
        if self._closed:
            return True
        if self._core.link_state(self.tag, pid) is LinkState.ESTABLISHED:
            return True
        refusal = self._refusals.get(pid)
        return isinstance(refusal, LinkRefused) and refusal.retry_at is None

    #: how many peers' socket types _learn_peer_type remembers before it forgets closed links
    _PEER_TYPES_MAX: ClassVar[int] = 4096

    def _learn_peer_type(self, types: dict[PeerId, str], ev: LinkEstablished) -> list[PeerId]:
        """Lock held: note ``ev.peer``'s socket type in ``types`` (kept after its link
        closes: its messages may still be queued); past ``_PEER_TYPES_MAX`` entries the
        peers whose links are gone are forgotten first. Returns the forgotten peers."""
        forgotten: list[PeerId] = []
        if len(types) >= self._PEER_TYPES_MAX:
            live = self._core.links(self.tag)
            forgotten = [p for p in types if p not in live]
            for peer in forgotten:
                del types[peer]
        types[ev.peer] = ev.peer_metadata.socket_type
        return forgotten

    def _link_applied_locked(self, pid: PeerId) -> bool:
        """Lock held: whatever this socket type needs once a link is established is done
        (a SUB: the PUB applied its prefixes). True for most types."""
        return True

    def _link_conclude(self, pid: PeerId, settled: bool, timeout: float | None) -> None:
        """Lock held: return when the link is established, else raise why not (``settled``
        False: the wait timed out, and linking stops)."""
        core = self._core
        self._check_open()
        if core.link_state(self.tag, pid) is LinkState.ESTABLISHED:
            return
        refusal = self._refusals.pop(pid, None)
        if settled and isinstance(refusal, LinkRefused):
            raise errors.LinkRefused(
                f"{pid} refused the link: {refusal.decision.name} ({refusal.reason})",
                reason=refusal.decision.name, permanent=refusal.permanent)
        # timed out: stop retrying
        if core.link_state(self.tag, pid) is not LinkState.IDLE:
            core.unlink(self.tag, pid, now=_monotonic())
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
        pid = self._peer_id(peer)
        deadline = _deadline(timeout)
        with self._lock:
            self._check_open()
            core = self._core
            if core.link_state(self.tag, pid) is LinkState.IDLE:
                return
            core.unlink(self.tag, pid, now=_monotonic())
            self._host.pump()
            if not self._host.wait_until(
                    self.wakeup, lambda: core.link_state(self.tag, pid) is LinkState.IDLE,
                    deadline):
                raise errors.Timeout(f"unlinking from {pid} did not complete in {timeout}s")

    @property
    def peers(self) -> list[Peer]:
        """Peers with an established link."""
        with self._lock:
            if self._closed:
                return []
            return [self._host.peer(p) for p in self._core.established(self.tag)]

    def windows(self) -> dict[Peer, int]:
        """The receive window (credits) each established link has now: the socket's
        ``credits``, or less while the node's memory budget is shared among more links (a
        window is budget / (links x max_message_size), docs/guide/tuning.md). A receiver
        that holds what it takes (``receive_held``) sizes its batches below these."""
        with self._lock:
            if self._closed:
                return {}
            return {self._host.peer(p): w for p, w in self._core.windows(self.tag).items()}

    def wait_for_links(self, count: int = 1, timeout: float | None = 5.0) -> None:
        """Block until at least ``count`` links are established (e.g. a REP or PULL waiting
        for its peers)."""
        deadline = _deadline(timeout)
        with self._lock:
            self._check_open()
            if not self._host.wait_until(self.wakeup,
                                    lambda: len(self._core.established(self.tag)) >= count,
                                    deadline):
                raise errors.Timeout(f"{count} link(s) not established in {timeout}s")
