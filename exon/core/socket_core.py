"""SocketCore: the sans-IO engine of one node, hosting many sockets (tags).

No sockets, threads, clocks or native code here: time is the ``now`` argument (seconds,
any monotonic origin), randomness comes from the injected ``random.Random``, and I/O is the
caller's job::

    core = SocketCore(node_id="n1", reply_address="127.0.0.1:40123",
                      settings=LinkSettings(), rng=random.Random(seed))
    core.open_socket(1, "req")
    core.link(1, PeerId("127.0.0.1:40124", 7), now=t)
    # the Node's loop:
    core.receive_frame(source, data, now=t)      # every frame from the transport
    for address, frame in core.frames_to_send():  # hand them to the transport
        ...
    core.handle_timer(now=t)                      # when t >= core.next_timer()
    while (event := core.next_event()) is not None: ...

Addresses are opaque strings. Frames go to a peer's *reply address*, learned from the
peer's link metadata. ``receive_frame``'s ``source`` is whatever identifies the sending
stream for the transport; the core maps it to the reply address announced in the
handshake frames received from that source, and uses ``source`` itself when it knows no
mapping (so a transport that passes the reply address needs no mapping at all).

The core is not thread-safe: the Node serialises calls (one lock). ``send`` is cheap so a
client thread can call it under that lock itself, with no send queue.

Credits: ``send`` raises :class:`~exon.errors.BackPressured` when the chosen link has no
credit; :meth:`pick_destination` returns the next established link with credit,
round-robin (PUSH/REQ). The application layer calls :meth:`deliver` with each
:class:`MessageReceived` it hands to the application; credit flows back in batched FLOWs.
"""

from __future__ import annotations

import hmac
import random
import struct
from collections.abc import Callable
from typing import Any

from exon.core.budget import MemoryBudget
from exon.core.credits import cursor_after_removal, pick_round_robin
from exon.core.events import (
    CookieReturned,
    ErrorReceived,
    Event,
    MessageReceived,
    PeerId,
)
from exon.core.frames import (
    HEADER,
    TAG_MAX,
    Decision,
    ErrorCode,
    Frame,
    FrameType,
    decode_frame,
    encode_data,
    encode_error,
    encode_linkack,
)
from exon.core.link_actions import LinkActions
from exon.core.link_state import LinkInput, LinkState, LinkStateMachine, Verdict
from exon.core.outbox import Outbox
from exon.core.policy import LinkPolicy
from exon.core.records import CoreStatistics, LinkAccelerator
from exon.core.records import LinkRecord as _Link
from exon.core.records import SocketRecord as _Socket
from exon.core.sealing import is_sealed, open_frame
from exon.core.settings import LinkSettings
from exon.core.timers import LinkTimers
from exon.errors import (
    BackPressured,
    ClosedError,
    ConfigurationError,
    ExonError,
    MessageTooLarge,
    SocketNotLinked,
    StateError,
)

# CoreStatistics and LinkAccelerator live in exon.core.records; imported from here too
__all__ = ["CoreStatistics", "LinkAccelerator", "SocketCore"]

_ALWAYS_SEALED = frozenset({FrameType.DATA, FrameType.FLOW, FrameType.UNLINK})
_LIVE = frozenset({LinkState.ESTABLISHED, LinkState.UNLINKING})


def _must_be_sealed(frame: Frame, state: LinkState) -> bool:
    """Whether a plaintext ``frame`` is refused by an encrypted link (one with keys) in
    ``state``: DATA, FLOW and UNLINK always; on a live link also ERROR and LINKACK; before,
    an accepting LINKACK without metadata (the initiator's, which confirms the keys). A LINK,
    the responder's LINKACK with metadata (message 2, maybe repeated) and refusals during
    the handshake stay plaintext (docs/protocol.md 2.20)."""
    t = frame.type
    if t in _ALWAYS_SEALED:
        return True
    if t is FrameType.LINK:
        return False
    if state in _LIVE:
        return True
    return t is FrameType.LINKACK and frame.metadata is None and frame.decision.accepted


_FRAME_INPUT = {
    FrameType.LINK: LinkInput.LINK,
    FrameType.DATA: LinkInput.DATA,
    FrameType.FLOW: LinkInput.FLOW,
    FrameType.UNLINK: LinkInput.UNLINK,
    FrameType.ERROR: LinkInput.ERROR,
}


class SocketCore:
    """The per-node sans-IO engine. See the module docstring for the calling pattern.

    It owns its collaborators and hands them explicit references: the :attr:`outbox`
    (frames, events, counters, address validation; :mod:`exon.core.outbox`), the
    :class:`~exon.core.budget.MemoryBudget` (the links' shares of ``memory_budget``), the
    :class:`~exon.core.timers.LinkTimers` and the
    :class:`~exon.core.link_actions.LinkActions` (one method per handshake action). The
    core keeps the records (sockets, links, tombstones), the wire input, the incarnation
    rules and the public API."""

    def __init__(
        self,
        *,
        node_id: str,
        reply_address: str,
        settings: LinkSettings | None = None,
        rng: random.Random | None = None,
        accelerator: LinkAccelerator | None = None,
        token_secret: bytes | None = None,
    ) -> None:
        """``token_secret``: the key of the address-validation tokens (docs/protocol.md
        2.6.1); None: 32 fresh random bytes from the system (not from ``rng``: the tokens
        must be unpredictable to whoever saw earlier ones)."""
        self._node_id = node_id
        self._accelerator = accelerator
        self.reply_address = reply_address
        self.settings = settings or LinkSettings()
        self._rng = rng or random.Random()
        self._sockets: dict[int, _Socket] = {}
        #: what the core has for the layer above: frames to send and events (the same
        #: containers for the core's life: a caller may test them without a call)
        self.outbox = outbox = Outbox()
        self._timers = LinkTimers()
        self._budget = MemoryBudget(settings=self.settings, sockets=self._sockets,
                                    accelerator=accelerator, arm_flow=self._arm_flow)
        self._actions = actions = LinkActions(
            node_id=node_id, reply_address=reply_address, settings=self.settings,
            accelerator=accelerator, rng=self._rng, outbox=outbox, budget=self._budget,
            timers=self._timers, input=self._input, forget=self._forget,
            token_secret=token_secret)
        # bound once: the wire input and the delivery path call them per frame
        self._stats = outbox.stats
        self._events = outbox.events
        self._validated = outbox.validated
        self._emit_frame = outbox.emit
        self._emit_link_frame = outbox.emit_link
        self._handlers = actions.handlers
        self._send_flow = actions.send_flow
        self._check_drained = actions.check_drained
        self._flow_after_delivery = actions.flow_after_delivery
        self._force_close = actions.force_close
        self._sources: dict[str, str] = {}
        # (tag, peer) -> (peer node id, peer incarnation, expiry): closed incarnations
        self._tombstones: dict[tuple[int, PeerId], tuple[str | None, int, float]] = {}
        self._last_now = 0.0

    @property
    def node_id(self) -> str:
        """This node's id, sent in the link metadata; settable (handed on to the link
        actions)."""
        return self._node_id

    @node_id.setter
    def node_id(self, node_id: str) -> None:
        self._node_id = self._actions.node_id = node_id

    @property
    def accelerator(self) -> LinkAccelerator | None:
        """The native link table the core attaches established links to (None: the core
        does everything itself); settable, and handed on to the link actions and the
        budget."""
        return self._accelerator

    @accelerator.setter
    def accelerator(self, accelerator: LinkAccelerator | None) -> None:
        self._accelerator = self._actions.accelerator = self._budget.accelerator = accelerator

    # ==== sockets ===========================================================================

    def open_socket(
        self,
        tag: int,
        socket_type: str,
        *,
        policy: LinkPolicy | None = None,
        initial_credits: int | None = None,
        max_message_size: int | None = None,
        max_links: int | None = None,
        budgeted: bool = True,
        start_credits: int | None = None,
    ) -> None:
        """Register a socket. ``tag`` is a u32 unique on this node. ``budgeted``: its links'
        receive windows share ``settings.memory_budget`` (False for a socket that queues
        nothing it receives, e.g. PUSH or PUB: its links keep ``initial_credits``).
        ``start_credits``: a new link's first window while the budget is crowded (see
        :mod:`exon.core.budget`); None: half its share, at least 256."""
        if type(tag) is not int or not 0 <= tag <= TAG_MAX:
            raise ConfigurationError(f"tag {tag} is not an unsigned 32-bit integer")
        if tag in self._sockets:
            raise ConfigurationError(f"a socket with tag {tag} is already open on this node")
        credits = self.settings.initial_credits if initial_credits is None else initial_credits
        if credits < 1:
            raise ConfigurationError("initial_credits must be >= 1")
        size = self.settings.max_message_size if max_message_size is None else max_message_size
        if size < 1:
            raise ConfigurationError("max_message_size must be >= 1")
        if start_credits is not None and (type(start_credits) is not int or start_credits < 1):
            raise ConfigurationError(f"start_credits must be an int >= 1, not {start_credits!r}")
        budget = self.settings.memory_budget
        if budgeted and budget is not None and size > budget:
            raise ConfigurationError(
                f"max_message_size {size} exceeds the node's memory_budget {budget}: such a "
                "message could never be received")
        self._sockets[tag] = _Socket(
            tag=tag,
            socket_type=socket_type,
            policy=policy,
            initial_credits=credits,
            max_message_size=size,
            max_links=max_links if max_links is not None else self.settings.max_links_per_socket,
            budgeted=budgeted,
            start_credits=start_credits,
        )

    def close_socket(self, tag: int, *, now: float, force: bool = False) -> None:
        """Close a socket. Gracefully: unlink every link (new LINKs are refused) and forget
        the socket once its last link is gone. ``force``: drop everything at once (cookies
        lost, links closed with an error); peers learn it from SOCKET_NOT_FOUND."""
        sock = self._socket(tag)
        sock.closing = True
        for link in list(sock.links.values()):
            if force:
                self._force_close(sock, link, "CLOSED", error=True)
            else:
                self._input(sock, link, LinkInput.CLOSE, None, now)
        self._maybe_forget_socket(sock)

    def has_socket(self, tag: int) -> bool:
        return tag in self._sockets

    # ==== links =============================================================================

    def link(self, tag: int, peer: PeerId | tuple[str, int], *, now: float) -> None:
        """Start linking socket ``tag`` with ``peer``; watch for LinkEstablished/LinkRefused."""
        sock = self._socket(tag)
        if sock.closing:
            raise ClosedError(f"socket {tag} is closing")
        peer = PeerId(*peer)
        link = sock.links.get(peer)
        if link is None:
            link = self._new_link(sock, peer)
        link.initiator = True
        # our application named this address: frames to it are no reflection (2.6.1)
        self.outbox.validate(peer.address)
        self._input(sock, link, LinkInput.OPEN, None, now)

    def unlink(self, tag: int, peer: PeerId | tuple[str, int], *, now: float,
               incarnation: int | None = None) -> None:
        """Unlink (or cancel linking). Nothing sent before is lost: the link closes when
        both directions are delivered and confirmed (or the unlink timeout expires). Only
        the link incarnation ``incarnation`` (ours), when given."""
        sock = self._socket(tag)
        link = self._link_of(sock, peer, incarnation)
        if link is not None:
            self._input(sock, link, LinkInput.CLOSE, None, now)

    def abort(self, tag: int, peer: PeerId | tuple[str, int], *, now: float,
              incarnation: int | None = None) -> None:
        """Drop the link with ``peer`` at once, as a forced :meth:`close_socket` drops every
        link: unconfirmed cookies are lost, ``LinkClosed("CLOSED", error=True)``. Only the
        link incarnation ``incarnation`` (ours), when given. No frame is sent: the peer
        learns it from the ERROR its next frame gets (an UNLINK sent before, by
        :meth:`unlink` or a graceful :meth:`close_socket`, makes it send one)."""
        sock = self._socket(tag)
        link = self._link_of(sock, peer, incarnation)
        if link is None:
            return
        self._last_now = now
        self._force_close(sock, link, "CLOSED", error=True)

    @staticmethod
    def _link_of(sock: _Socket, peer: PeerId | tuple[str, int],
                 incarnation: int | None) -> _Link | None:
        """``sock``'s link with ``peer``, if it is of ``incarnation`` (any, when None)."""
        link = sock.links.get(PeerId(*peer))
        if link is None or (incarnation is not None and link.incarnation != incarnation):
            return None
        return link

    def peer_gone(self, address: str, *, now: float) -> None:
        """The transport lost the peer node at ``address``: break every link with it."""
        self._break_links(address, None, now)
        self._sources = {s: a for s, a in self._sources.items() if a != address}

    def channel_gone(self, address: str, channel: int, *, now: float) -> bool:
        """The transport lost one stream (``channel``, see :meth:`receive_frame`) from the
        peer node at ``address``, while another stream from that address remains (the
        peer node restarted): break the links whose handshake came on that stream.

        True when links were broken and no established or unlinking link with
        ``address`` remains: the node that held them is gone, and whatever we send to that
        address should start on a new stream, which its successor reads from the start
        (the transport replaces ours). False: nothing to replace (a stream with no link,
        e.g. a refused impostor's, went; or live links remain)."""
        broke = self._break_links(address, channel, now)
        return broke and not self._live_with(address)

    def _live_with(self, address: str) -> bool:
        live = (LinkState.ESTABLISHED, LinkState.UNLINKING)
        return any(lk.peer.address == address and lk.state in live
                   for sock in self._sockets.values() for lk in sock.links.values())

    def _break_links(self, address: str, channel: int | None, now: float) -> bool:
        """True if a link was broken."""
        broke = False
        for sock in list(self._sockets.values()):
            for link in [lk for lk in sock.links.values() if lk.peer.address == address
                         and (channel is None or lk.channel == channel)]:
                if link.state in (LinkState.ESTABLISHED, LinkState.UNLINKING):
                    broke = True
                    self._force_close(sock, link, "PEER_GONE", error=True)
                elif link.state in (LinkState.LINK_SENT, LinkState.GOT_DECISION,
                                    LinkState.DECIDED):
                    broke = True
                    link.peer_decision = Decision.TEMPORARY
                    link.peer_reason = "peer node gone"
                    verdict = self._actions.conclude(sock, link, now)
                    link.machine.state = (LinkState.RETRY_WAIT if verdict is Verdict.RETRY
                                          else LinkState.IDLE)
                    self._after(sock, link)
        return broke

    def link_state(self, tag: int, peer: PeerId | tuple[str, int]) -> LinkState:
        link = self._socket(tag).links.get(PeerId(*peer))
        return LinkState.IDLE if link is None else link.state

    def has_links(self, tag: int) -> bool:
        """Whether socket ``tag`` has any link, in whatever state (a closed socket: False)."""
        sock = self._sockets.get(tag)
        return sock is not None and bool(sock.links)

    def links(self, tag: int) -> dict[PeerId, LinkState]:
        return {p: lk.state for p, lk in self._socket(tag).links.items()}

    def established(self, tag: int) -> list[PeerId]:
        sock = self._socket(tag)
        return [p for p in sock.rr if sock.links[p].state is LinkState.ESTABLISHED]

    def windows(self, tag: int) -> dict[PeerId, int]:
        """The receive window (credits) of each established link of socket ``tag``: its
        credits, or less when the memory budget is shared among more links."""
        sock = self._socket(tag)
        return {p: lk.ledger.capacity for p, lk in sock.links.items()
                if lk.state is LinkState.ESTABLISHED and lk.ledger is not None}

    def credits(self, tag: int, peer: PeerId | tuple[str, int]) -> int:
        """Credits left on an established link (0 otherwise)."""
        link = self._socket(tag).links.get(PeerId(*peer))
        if link is None or link.state is not LinkState.ESTABLISHED or link.ledger is None:
            return 0
        return link.ledger.credit

    def pending_cookies(self, tag: int, peer: PeerId | tuple[str, int]) -> int:
        link = self._socket(tag).links.get(PeerId(*peer))
        return 0 if link is None else len(link.cookies)

    def any_pending_cookie(self, tag: int, surfaces: Callable[[Any], bool]) -> bool:
        """Whether a link of socket ``tag`` holds a cookie waiting for which ``surfaces``
        holds (the socket's test of what will still come out of ``receive()``)."""
        for link in self._socket(tag).links.values():
            if any(surfaces(cookie) for cookie in link.cookies.values()):
                return True
        return False

    def sent_counts(self, tag: int) -> dict[PeerId, int]:
        """DATA sent so far on each established link of socket ``tag`` (whoever sent it:
        the core or the native path)."""
        sock = self._socket(tag)
        return {p: lk.ledger.sent for p, lk in sock.links.items()
                if lk.state is LinkState.ESTABLISHED and lk.ledger is not None}

    def cookie_on_last_sent(self, tag: int, peer: PeerId | tuple[str, int], cookie: Any) -> None:
        """Attach ``cookie`` to the last DATA sent on the established link with ``peer``
        (the native path sends without cookies): it comes back as a send's cookie does,
        CookieReturned once the peer's application took that message (and so every one
        before it on the link), else CookieLost. Raises StateError when the link is not
        established or has sent nothing."""
        link = self._socket(tag).links.get(PeerId(*peer))
        if link is None or link.state is not LinkState.ESTABLISHED or link.ledger is None:
            raise StateError(f"socket {tag} is not linked with {peer}")
        ledger = link.ledger
        if ledger.sent == 0:
            raise StateError(f"socket {tag} has sent nothing to {peer}")
        seq = ledger.sent - 1
        if seq < ledger.confirmed:  # confirmed already
            self._stats["cookies_returned"] += 1
            self._events.append(CookieReturned(tag=tag, peer=link.peer, cookie=cookie))
            return
        link.cookies.add(seq, cookie)
        ledger.hold_flow = len(link.cookies)

    # ==== data ==============================================================================

    def pick_destination(self, tag: int) -> PeerId | None:
        """Next established link with credit, round-robin; None when none has credit."""
        sock = self._socket(tag)
        rr, links = sock.rr, sock.links

        def has_credit(index: int) -> bool:
            link = links[rr[index]]
            return (link.state is LinkState.ESTABLISHED and link.ledger is not None
                    and link.ledger.credit > 0)

        picked = pick_round_robin(len(rr), sock.rr_next, has_credit)
        if picked is None:
            return None
        index, sock.rr_next = picked
        return rr[index]

    def send(
        self,
        tag: int,
        payload: bytes,
        *,
        cookie: Any = None,
        destination: PeerId | tuple[str, int] | None = None,
        now: float,
    ) -> PeerId:
        """Queue one DATA frame; returns the destination. ``cookie`` (not None) comes back
        as CookieReturned once the peer's application got the message, else CookieLost.

        Raises BackPressured (no credit), SocketNotLinked (destination not established),
        MessageTooLarge (beyond the peer's max size), ClosedError (socket closing).
        """
        sock = self._socket(tag)
        if sock.closing:
            raise ClosedError(f"socket {tag} is closing")
        if destination is None:
            dest = self.pick_destination(tag)
            if dest is None:
                raise BackPressured(f"socket {tag}: no established link has credit")
        else:
            dest = PeerId(*destination)
        link = sock.links.get(dest)
        if link is None or link.state is not LinkState.ESTABLISHED:
            raise SocketNotLinked(f"socket {tag} is not linked with {dest}")
        ledger, meta = link.ledger, link.peer_meta
        assert ledger is not None
        assert meta is not None
        if len(payload) > meta.max_message_size:
            raise MessageTooLarge(
                f"{len(payload)} bytes exceed the {meta.max_message_size} that {dest} accepts"
            )
        if ledger.credit <= 0:
            raise BackPressured(f"socket {tag}: no credit towards {dest}")
        seq = ledger.spend()
        if cookie is not None:
            link.cookies.add(seq, cookie)
            ledger.hold_flow = len(link.cookies)
        self._emit_link_frame(link, encode_data(tag, dest.tag, link.incarnation, payload))
        return dest

    def deliver(self, message: MessageReceived, *, now: float) -> None:
        """The application took ``message``: credit (and cookie confirmation) flows back,
        batched. Messages of a link incarnation that has closed are ignored."""
        self.deliver_many(message.tag, message.peer, message.incarnation, 1, now=now)

    def deliver_many(self, tag: int, peer: PeerId, incarnation: int, count: int, *,
                     now: float) -> None:
        """The application took ``count`` messages of link incarnation ``incarnation``
        (ours) with ``peer``: as ``count`` calls of :meth:`deliver`, with one FLOW at most.
        Ignored when that incarnation has closed."""
        sock = self._sockets.get(tag)
        if sock is None:
            return
        link = sock.links.get(peer)
        if link is None or link.incarnation != incarnation or link.ledger is None:
            return
        try:
            link.ledger.deliver(count)
        except ValueError:
            raise StateError("deliver() called more often than messages were received") from None
        self._flow_after_delivery(sock, link, now)

    def delivered_natively(self, tag: int, peer: PeerId, *, now: float) -> None:
        """The accelerator counted deliveries on an attached link (a FLOW may be due, or a
        FLOW timer must be armed)."""
        sock = self._sockets.get(tag)
        if sock is None:
            return
        link = sock.links.get(peer)
        if link is None or link.ledger is None:
            return
        self._flow_after_delivery(sock, link, now)

    # ==== the wire ==========================================================================

    def receive_frame(self, source: str, data: bytes | memoryview, *, now: float,
                      channel: int | None = None) -> bool:
        """Feed one frame from the transport. Malformed frames are dropped and counted.
        False when the frame was garbage to this node: malformed, for a socket that does
        not exist, stale, or a LINKACK without our token (the Node counts these per
        stream, for the fairness of its poll, docs/protocol.md 2.17); else True.

        ``channel`` (optional) identifies the transport stream the frame came on (the
        Node: the Aeron image, one per sending node process). A LINK that would replace
        an established or unlinking link is accepted only on the stream that link's
        handshake came on; from another stream it is refused for now (TEMPORARY, counted
        ``relinks_refused``) and nothing is torn down, until that stream is gone
        (:meth:`channel_gone`): whoever claims the peer's address must show that the old
        link is dead before it replaces it (docs/protocol.md 2.7)."""
        self._stats["frames_received"] += 1
        self._actions.channel = channel
        if is_sealed(data):
            opened = self._open_sealed(source, data)
            if opened is None:
                self._stats["unopened_dropped"] += 1
                return False
            data = opened
            sealed = True
        else:
            sealed = False
        try:
            frame = decode_frame(data)
        except ExonError:
            self._stats["malformed_dropped"] += 1
            return False
        meta = frame.metadata
        if meta is not None:
            self._sources[source] = meta.reply_address
            address = meta.reply_address
        else:
            address = self._sources.get(source, source)
        if address not in self._validated:
            self.outbox.count_received(address, len(data))
        sock = self._sockets.get(frame.destination_tag)
        if sock is None:
            if frame.type is FrameType.ERROR:
                self._stats["ignored"] += 1
                return False
            self._stats["not_found_sent"] += 1
            self._emit_frame(address, encode_error(
                frame.destination_tag, frame.source_tag, frame.incarnation,
                ErrorCode.SOCKET_NOT_FOUND,
                f"no socket with tag {frame.destination_tag} on node {self.node_id}",
            ))
            return False
        peer = PeerId(address, frame.source_tag)
        link = sock.links.get(peer)
        if not sealed and link is not None and link.seal is not None and _must_be_sealed(
                frame, link.state):
            self._stats["unopened_dropped"] += 1  # plaintext where the link is sealed
            return False
        if frame.type is FrameType.ERROR:
            if link is None or link.incarnation != frame.incarnation:
                self._stats["stale_dropped"] += 1
                return False
            self._events.append(ErrorReceived(tag=sock.tag, peer=peer, code=int(frame.error),
                                              text=frame.reason))
            self._input(sock, link, LinkInput.ERROR, frame, now)
            return True
        link = self._check_incarnation(sock, peer, link, frame, now)
        if link is None:
            return False
        if frame.type is FrameType.LINKACK:
            if link.token:
                # we wait for the peer to echo our token (2.6.1): nothing else concludes
                if not hmac.compare_digest(frame.echo, link.token):
                    self._stats["tokens_rejected"] += 1
                    return False
                self._actions.validate(link)
            event = LinkInput.LINKACK_META if meta is not None else LinkInput.LINKACK
        else:
            event = _FRAME_INPUT[frame.type]
        self._input(sock, link, event, frame, now)
        return True

    def _open_sealed(self, source: str, data: bytes | memoryview) -> bytes | None:
        """The plaintext of a sealed frame for one of our encrypted links; None: it does not
        open (no such link, no keys yet, altered, replayed, another link's)."""
        try:
            _v, _p, _t, _r, src, dst, _inc = HEADER.unpack_from(data, 0)
        except struct.error:
            return None
        sock = self._sockets.get(dst)
        if sock is None:
            return None
        link = sock.links.get(PeerId(self._sources.get(source, source), src))
        if link is None or link.seal is None:
            return None
        return open_frame(link.seal, data)

    def frames_to_send(self, *, now: float | None = None) -> list[tuple[str, bytes]]:
        """Take every frame the core wants sent: (reply address, frame bytes), in order."""
        return self.outbox.take_frames()

    def next_timer(self) -> float | None:
        """Earliest time ``handle_timer`` has work, or None."""
        return self._timers.next()

    def handle_timer(self, *, now: float) -> None:
        """Fire every due timer: retries, batched FLOWs, unlink timeouts."""
        self._last_now = now
        pop_due = self._timers.pop_due
        while (due := pop_due(now)) is not None:
            kind, link = due
            sock = self._sockets.get(link.tag)
            if sock is None:
                continue
            if kind == "flow":
                LinkTimers.clear_flow(link)
                self._send_flow(link)
                self._check_drained(sock, link, now)
            elif kind == "resend":
                link.resend_deadline = None
                if link.state is LinkState.LINK_SENT:
                    self._input(sock, link, LinkInput.RESEND, None, now)
            else:
                link.deadline = None
                self._input(sock, link, LinkInput.TIMER, None, now)
        if self._tombstones:
            self._tombstones = {k: v for k, v in self._tombstones.items() if v[2] > now}

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def events(self) -> list[Event]:
        """Take every pending event."""
        out = list(self._events)
        self._events.clear()
        return out

    def statistics(self) -> CoreStatistics:
        return CoreStatistics(**self._stats)

    # ==== address validation (the outbox's) ================================================

    def reserve_unvalidated(self, address: str, round_bytes: int, rounds: int) -> int:
        """Of ``rounds`` transport rounds of ``round_bytes`` each (the SETUP and heartbeat a
        stream sends to ``address`` while its driver waits for an answer, 2.6.1), how many
        fit the anti-amplification limit of ``address``: all of them when it is validated,
        else as many as 3x the bytes received from it still allow, which are counted as
        sent. None fitting: counted held (``amplification_held``) and 0."""
        return self.outbox.reserve(address, round_bytes, rounds)

    def validated(self, address: str) -> bool:
        """Whether ``address`` is validated (2.6.1): we linked to it, or a peer there
        echoed our token. Until then at most 3x the bytes received from it go to it."""
        return address in self._validated

    # ==== internals: records ================================================================

    def _socket(self, tag: int) -> _Socket:
        try:
            return self._sockets[tag]
        except KeyError:
            raise StateError(f"no socket with tag {tag} is open on this core") from None

    def _new_link(self, sock: _Socket, peer: PeerId) -> _Link:
        return _Link(tag=sock.tag, peer=peer, machine=LinkStateMachine())

    def _check_incarnation(
        self, sock: _Socket, peer: PeerId, link: _Link | None, frame: Frame, now: float
    ) -> _Link | None:
        """Drop frames of older incarnations; apply the re-link rules. None: dropped."""
        inc = frame.incarnation
        node = frame.metadata.node_id if frame.metadata is not None else None
        if link is None:
            tomb = self._tombstones.get((sock.tag, peer))
            if tomb is not None and tomb[2] > now and inc <= tomb[1] and (
                node is None or node == tomb[0]
            ) and frame.type in (FrameType.LINK, FrameType.LINKACK, FrameType.FLOW):
                self._stats["stale_dropped"] += 1
                return None
            return self._new_link(sock, peer)
        if frame.type is FrameType.LINKACK and frame.answers != link.incarnation:
            self._stats["stale_dropped"] += 1  # answers a LINK of another attempt
            return None
        if link.peer_incarnation is None:
            return link
        same_node = node is None or link.peer_node is None or node == link.peer_node
        if inc == link.peer_incarnation and same_node:
            return link
        if frame.type is not FrameType.LINK or (same_node and inc < link.peer_incarnation):
            self._stats["stale_dropped"] += 1
            if frame.type in (FrameType.DATA, FrameType.UNLINK):
                # its sender holds a link we do not: it must learn it (never send into a void)
                self._actions.not_linked(sock, link, frame)
            return None
        # a newer incarnation of the peer's end (re-link, or the peer node restarted)
        live = link.state in (LinkState.ESTABLISHED, LinkState.UNLINKING)
        if live and (link.seal is not None or (
                self._actions.channel is not None and link.channel is not None
                and self._actions.channel != link.channel)):
            # from another stream while the link's own stream lives: not proven to be the
            # same peer. Refuse for now; the link goes on. (A peer node that restarted
            # retries until its old stream is gone, which breaks the old link.)
            self._stats["relinks_refused"] += 1
            self._stats["refusals_sent"] += 1
            self._emit_frame(link.peer.address, encode_linkack(
                sock.tag, peer.tag, link.incarnation, Decision.TEMPORARY, None,
                "an established link with this peer is alive", answers=inc))
            return None
        if live or not link.initiator:
            self._force_close(sock, link, "PEER_RELINKED", error=True)
            return self._new_link(sock, peer)
        link.peer_incarnation = None
        link.peer_node = None
        link.peer_meta = None
        link.peer_decision = None
        link.our_decision = None
        link.ledger = None
        link.seal = None
        link.machine.state = LinkState.LINK_SENT
        return link

    def _input(
        self, sock: _Socket, link: _Link, event: LinkInput, frame: Frame | None, now: float
    ) -> None:
        self._last_now = now
        transition = link.machine.lookup(event)
        verdict: Verdict | None = self._handlers[transition.action](sock, link, frame, now)
        link.machine.commit(transition, verdict)
        if link.fast is not None and link.machine.state is not LinkState.ESTABLISHED:
            self._detach_fast(link)
        self._after(sock, link)
        if link.state is LinkState.UNLINKING and event is not LinkInput.DRAINED:
            ledger = link.ledger
            if (ledger is not None and link.peer_unlink_count is not None
                    and ledger.delivered == link.peer_unlink_count and ledger.flow_pending):
                LinkTimers.clear_flow(link)
                self._send_flow(link)
            self._check_drained(sock, link, now)

    def _after(self, sock: _Socket, link: _Link) -> None:
        """Store new records, forget ended ones."""
        if link.state is LinkState.IDLE:
            if link.stored:
                self._forget(sock, link)
        elif not link.stored:
            sock.links[link.peer] = link
            link.stored = True

    def _detach_fast(self, link: _Link) -> None:
        token, link.fast = link.fast, None
        if link.ledger is not None:
            link.ledger.detach()
        if self.accelerator is not None:
            self.accelerator.detach(token)
        ledger = link.ledger
        if ledger is not None and ledger.flow_pending and link.flow_deadline is None:
            # the accelerator may have held this FLOW's timer: the core takes it over
            self._arm_flow(link)

    def _forget(self, sock: _Socket, link: _Link) -> None:
        self._actions.drop_held(link)
        if link.fast is not None:
            self._detach_fast(link)
        held = link.grant is not None and sock.budgeted  # (the link is IDLE by now)
        if sock.links.get(link.peer) is link:
            del sock.links[link.peer]
        link.grant = None
        self._budget.drop_peak(link)
        if held and self.settings.memory_budget is not None:
            self._budget.freed()
        link.stored = False
        if link.peer in sock.rr and link.peer not in sock.links:
            removed = sock.rr.index(link.peer)
            sock.rr_next = cursor_after_removal(sock.rr_next, removed, len(sock.rr))
            del sock.rr[removed]
        if link.peer_incarnation is not None and self.settings.tombstone_ttl > 0:
            self._tombstones[(sock.tag, link.peer)] = (
                link.peer_node, link.peer_incarnation, self._last_now + self.settings.tombstone_ttl
            )
        link.deadline = link.flow_deadline = link.resend_deadline = None
        self._maybe_forget_socket(sock)

    def _maybe_forget_socket(self, sock: _Socket) -> None:
        if sock.closing and not sock.links and self._sockets.get(sock.tag) is sock:
            del self._sockets[sock.tag]

    # ==== internals: timers =================================================================

    def _arm_flow(self, link: _Link) -> None:
        """Arm ``link``'s FLOW timer, ``flow_delay`` after the last ``now`` seen (the
        accelerator gave it up: the core takes the timer over)."""
        self._timers.arm(link, "flow", self._last_now + self.settings.flow_delay)
