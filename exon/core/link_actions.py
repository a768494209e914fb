"""What the link handshake does: one method per ``link_state.Action``, and their helpers.

``link_state.py`` says which action a (state, input) pair takes; :class:`LinkActions`
carries it out: the frames it sends (LINK, LINKACK, UNLINK, FLOW, ERROR), the policy
decisions and their conclusion, credit flowing back, and the events for the layer above.
It is owned by :class:`~exon.core.socket_core.SocketCore`, which hands it explicit
references: the :class:`~exon.core.outbox.Outbox` both emit through, the
:class:`~exon.core.budget.MemoryBudget`, the :class:`~exon.core.timers.LinkTimers`, and two
of its own methods (``input``: run a link's state machine; ``forget``: drop a link's
record). ``SocketCore._input`` calls :attr:`LinkActions.handlers` ``[action]`` for each
transition. Sans-IO, as the whole core: time is ``now``, randomness the core's
``random.Random``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random
import secrets
import struct
from collections.abc import Callable

from exon.core.budget import MemoryBudget
from exon.core.credits import CreditLedger
from exon.core.events import (
    CookieLost,
    CookieReturned,
    CreditAvailable,
    LinkClosed,
    LinkEstablished,
    LinkRefused,
    MessageReceived,
)
from exon.core.frames import (
    TOKEN_LENGTH,
    Decision,
    ErrorCode,
    Frame,
    FrameType,
    LinkMetadata,
    encode_error,
    encode_flow,
    encode_link,
    encode_linkack,
    encode_unlink,
)
from exon.core.link_state import Action, LinkInput, LinkState, Verdict
from exon.core.outbox import AMPLIFICATION_FACTOR, Outbox
from exon.core.policy import HANDSHAKE_FIELD, PolicyContext, compatible
from exon.core.records import LinkAccelerator
from exon.core.records import LinkRecord as _Link
from exon.core.records import SocketRecord as _Socket
from exon.core.sealing import seal_frame
from exon.core.settings import LinkSettings
from exon.core.timers import LinkTimers

__all__ = ["AMPLIFICATION_FACTOR", "LinkActions"]

# AMPLIFICATION_FACTOR lives in exon.core.outbox; imported from here too
_TOKEN_LABEL = b"exon-token-v1"
_TOKEN_TAIL = struct.Struct("<IIII")  # peer tag, our tag, peer incarnation, our incarnation


class LinkActions:
    """The handshake's actions, one per ``link_state.Action`` (:attr:`handlers`)."""

    def __init__(self, *, node_id: str, reply_address: str, settings: LinkSettings,
                 accelerator: LinkAccelerator | None, rng: random.Random, outbox: Outbox,
                 budget: MemoryBudget, timers: LinkTimers,
                 input: Callable[[_Socket, _Link, LinkInput, Frame | None, float], None],
                 forget: Callable[[_Socket, _Link], None],
                 token_secret: bytes | None = None) -> None:
        self.node_id = node_id
        self.reply_address = reply_address
        self.settings = settings
        self.accelerator = accelerator
        self._rng = rng
        self._outbox = outbox
        # the outbox's containers and calls, bound once (the receive path uses them)
        self._stats = outbox.stats
        self._events = outbox.events
        self._emit_frame = outbox.emit
        self._emit_link_frame = outbox.emit_link
        self._budget = budget
        self._timers = timers
        self._input = input
        self._forget = forget
        #: the key of the address-validation tokens (docs/protocol.md 2.6.1): 32 fresh
        #: random bytes from the system unless given (not from ``rng``: the tokens must be
        #: unpredictable to whoever saw earlier ones)
        self._token_secret = token_secret if token_secret else secrets.token_bytes(32)
        # our incarnation ids increase for the node's life; random start per process
        self._next_incarnation = rng.getrandbits(30) + 1
        #: the transport channel of the frame being received (set by the core), None
        #: outside a receive
        self.channel: int | None = None
        #: the method of each action, bound once: ``handlers[action](sock, link, frame,
        #: now)`` returns a Verdict or None
        self.handlers: dict[Action, Callable[..., Verdict | None]] = {
            action: getattr(self, "_do_" + action.value) for action in Action}

    def fresh_incarnation(self, link: _Link) -> None:
        """A new incarnation id (and nonce) for ``link``: a new handshake."""
        link.incarnation = self._next_incarnation
        self._next_incarnation = (self._next_incarnation % 0xFFFF_FFFF) + 1
        link.nonce = self._rng.randbytes(16)

    # ==== internals: frames out =============================================================

    def _token(self, sock: _Socket, link: _Link) -> bytes:
        """The address-validation token of our LINKACK for ``link`` (2.6.1)."""
        address = link.peer.address.encode("utf-8")
        msg = (_TOKEN_LABEL + len(address).to_bytes(4, "little") + address
               + _TOKEN_TAIL.pack(link.peer.tag, sock.tag, link.peer_incarnation or 0,
                                  link.incarnation))
        return hmac.new(self._token_secret, msg, hashlib.sha256).digest()[:TOKEN_LENGTH]

    def validate(self, link: _Link) -> None:
        """The peer echoed our token: its address is validated. Held DATA/FLOW are
        handled once the link is established (see :meth:`_release_held`)."""
        link.token = b""
        self._outbox.validate(link.peer.address)

    def _release_held(self, sock: _Socket, link: _Link, now: float) -> Verdict:
        """The link was just established: the DATA/FLOW held meanwhile, in order."""
        held, link.held = link.held, None
        for frame in held or ():
            if frame.type is FrameType.DATA:
                if self._do_receive_data(sock, link, frame, now) is Verdict.REFUSE:
                    return Verdict.REFUSE
            else:
                self._do_receive_flow(sock, link, frame, now)
        return Verdict.ACCEPT

    def drop_held(self, link: _Link) -> None:
        if link.held:
            self._stats["unvalidated_dropped"] += len(link.held)
        link.held = None

    def _metadata(self, sock: _Socket, link: _Link, peer_meta: LinkMetadata | None) -> LinkMetadata:
        meta = LinkMetadata(
            socket_type=sock.socket_type,
            credits=self._budget.grant(sock, link),
            max_message_size=sock.max_message_size,
            node_id=self.node_id,
            reply_address=self.reply_address,
            nonce=link.nonce,
        )
        if sock.policy is None:
            return meta
        custom = sock.policy.metadata(self._ctx(sock, link, own=meta), peer_meta)
        return dataclasses.replace(meta, custom=custom) if custom else meta

    def _ctx(self, sock: _Socket, link: _Link, own: LinkMetadata | None = None) -> PolicyContext:
        return PolicyContext(tag=sock.tag, socket_type=sock.socket_type, node_id=self.node_id,
                             reply_address=self.reply_address, peer=link.peer, nonce=link.nonce,
                             own=own)

    def _send_linkack(self, sock: _Socket, link: _Link, with_metadata: bool) -> None:
        """Our LINKACK: with a token when we accept a link we did not initiate (even
        from a validated address: whoever claims it must show it receives there), with
        the echo of the peer's token if it sent one (2.6.1)."""
        assert link.our_decision is not None
        assert link.peer_incarnation is not None
        meta = self._metadata(sock, link, link.peer_meta) if with_metadata else None
        accepted = link.our_decision.accepted
        if not accepted:
            self._stats["refusals_sent"] += 1
            link.token = b""
        elif not link.initiator and (link.token or not link.established_emitted):
            link.token = self._token(sock, link)
        policy = sock.policy
        if accepted and link.seal is None and policy is not None and policy.encrypted:
            # the keys are agreed once we wrote message 2 (responder) or accepted it
            link.seal = policy.link_seal(self._ctx(sock, link))
        frame = encode_linkack(sock.tag, link.peer.tag, link.incarnation, link.our_decision,
                               meta, link.our_reason, answers=link.peer_incarnation,
                               token=link.token, echo=link.peer_token)
        if accepted and meta is None and link.seal is not None:
            # the initiator's acceptance, the first frame under its key: it confirms the
            # keys to the responder, which takes no plaintext one (docs/protocol.md 2.20)
            frame = seal_frame(link.seal, frame)
        self._emit_frame(link.peer.address, frame)

    def _send_unlink(self, sock: _Socket, link: _Link) -> None:
        sent = link.ledger.sent if link.ledger is not None else 0
        self._emit_link_frame(link, encode_unlink(sock.tag, link.peer.tag, link.incarnation, sent))

    def send_flow(self, link: _Link) -> None:
        if link.ledger is None:
            return
        if link.growing:
            self._budget.grow(link)
        delivered, limit = link.ledger.make_flow()
        self._emit_link_frame(
            link, encode_flow(link.tag, link.peer.tag, link.incarnation, delivered, limit))

    def not_linked(self, sock: _Socket, link: _Link, frame: Frame | None) -> None:
        if frame is None:
            return
        self._stats["not_linked_sent"] += 1
        self._emit_frame(link.peer.address, encode_error(
            sock.tag, frame.source_tag, frame.incarnation, ErrorCode.SOCKET_NOT_LINKED,
            f"socket {sock.tag} is not linked with {link.peer}"))

    # ==== internals: decisions ==============================================================

    def _learn_peer(self, sock: _Socket, link: _Link, frame: Frame) -> None:
        meta = frame.metadata
        assert meta is not None
        link.peer_meta = meta
        link.peer_incarnation = frame.incarnation
        link.peer_node = meta.node_id
        link.channel = self.channel
        credits = self._budget.grant(sock, link)
        window = credits
        if not link.growing and sock.budgeted and self.settings.memory_budget is not None:
            # links came since the grant: its next FLOWs grant the current share
            window = min(credits, self._budget.share(sock, len(self._budget.holders(but=link)) + 1))
        link.ledger = CreditLedger(
            limit=meta.credits,
            capacity=window,
            batch=self.settings.grant_batch(window),
            advertised=credits,
        )

    def _decide(self, sock: _Socket, link: _Link) -> None:
        meta = link.peer_meta
        assert meta is not None
        decision, reason = Decision.ACCEPTED, ""
        if sock.closing:
            decision, reason = Decision.CANCELLED, "socket is closing"
        elif not compatible(sock.socket_type, meta.socket_type):
            decision = Decision.INCOMPATIBLE
            reason = f"a {sock.socket_type} socket cannot link with a {meta.socket_type} socket"
        elif sock.max_links is not None and sum(
            1 for other in sock.links.values()
            if other is not link and other.state in (
                LinkState.DECIDED, LinkState.ESTABLISHED, LinkState.UNLINKING)
        ) >= sock.max_links:
            decision, reason = Decision.LINK_LIMIT, f"socket {sock.tag} has {sock.max_links} links"
        elif sock.policy is not None:
            decision, reason = sock.policy.decide(self._ctx(sock, link), meta)
        elif HANDSHAKE_FIELD in meta.custom:
            decision = Decision.UNAUTHORIZED
            reason = (f"the peer socket asks for an encrypted link; socket {sock.tag} has no "
                      "EncryptedPolicy")
        link.our_decision, link.our_reason = decision, reason

    def conclude(self, sock: _Socket, link: _Link, now: float) -> Verdict:
        """Both decisions known (or one refusal): establish, or refuse (maybe retry)."""
        ours, theirs = link.our_decision, link.peer_decision
        if ours is not None and ours.accepted and theirs is not None and theirs.accepted:
            self._establish(sock, link)
            return Verdict.ACCEPT
        by_peer = theirs is not None and not theirs.accepted
        decision = theirs if by_peer else ours
        assert decision is not None
        reason = link.peer_reason if by_peer else link.our_reason
        if by_peer:
            self._stats["refusals_received"] += 1
        retry = (link.initiator and not decision.permanent and not sock.closing
                 and link.state is not LinkState.UNLINKING)
        retry_at = None
        if retry:
            link.attempts += 1
            s = self.settings
            base = min(s.retry_max, s.retry_initial * s.retry_multiplier ** (link.attempts - 1))
            retry_at = now + base * self._rng.uniform(1 - s.retry_jitter, 1 + s.retry_jitter)
            self._timers.arm(link, "retry", retry_at)
            self._stats["retries"] += 1
        if link.initiator:
            self._events.append(LinkRefused(
                tag=sock.tag, peer=link.peer, decision=decision, reason=reason or decision.name,
                permanent=decision.permanent, by_peer=by_peer, retry_at=retry_at))
        self._lose_cookies(sock, link)
        return Verdict.RETRY if retry else Verdict.REFUSE

    def _establish(self, sock: _Socket, link: _Link) -> None:
        assert link.ledger is not None
        assert link.peer_meta is not None
        link.attempts = 0
        link.established_emitted = True
        if link.peer not in sock.rr:
            sock.rr.append(link.peer)
        self._stats["links_established"] += 1
        native_seal = getattr(link.seal, "native", None)  # sealed natively, or core only
        if self.accelerator is not None and link.fast is None and (
                link.seal is None or native_seal is not None):
            options = {} if native_seal is None else {"seal": native_seal}
            link.fast = self.accelerator.attach(
                sock.tag, link.peer, link.incarnation, link.peer_incarnation or 0, link.ledger,
                link.peer_meta.max_message_size, sock.max_message_size, **options)
            if link.fast is not None and link.growing:
                self.accelerator.set_window(link.fast, 0, link.ledger.batch)
        self._events.append(LinkEstablished(
            tag=sock.tag, peer=link.peer, incarnation=link.incarnation,
            peer_metadata=link.peer_meta, credits=link.ledger.credit))

    def _lose_cookies(self, sock: _Socket, link: _Link) -> None:
        for cookie in link.cookies.lose_all():
            self._stats["cookies_lost"] += 1
            self._events.append(CookieLost(tag=sock.tag, peer=link.peer, cookie=cookie))
        if link.ledger is not None:
            link.ledger.hold_flow = 0

    def force_close(self, sock: _Socket, link: _Link, reason: str, *, error: bool) -> None:
        self._lose_cookies(sock, link)
        self._closed_event(sock, link, reason, error)
        link.machine.state = LinkState.IDLE
        self._forget(sock, link)

    def _closed_event(self, sock: _Socket, link: _Link, reason: str, error: bool) -> None:
        if link.established_emitted:
            self._stats["links_closed"] += 1
            self._events.append(LinkClosed(tag=sock.tag, peer=link.peer, reason=reason,
                                           error=error))
        elif link.initiator:
            self._events.append(LinkRefused(
                tag=sock.tag, peer=link.peer, decision=Decision.CANCELLED, reason=reason,
                permanent=True, by_peer=reason != "CANCELLED", retry_at=None))

    # ==== internals: flow ===================================================================

    def flow_after_delivery(self, sock: _Socket, link: _Link, now: float) -> None:
        ledger = link.ledger
        assert ledger is not None
        unlinking_done = (link.state is LinkState.UNLINKING and link.peer_unlink_count is not None
                          and ledger.delivered == link.peer_unlink_count)
        if ledger.flow_due or unlinking_done or self.settings.flow_delay == 0:
            LinkTimers.clear_flow(link)
            self.send_flow(link)
        elif link.flow_deadline is None and ledger.flow_pending:
            self._timers.arm(link, "flow", now + self.settings.flow_delay)
        self.check_drained(sock, link, now)

    def check_drained(self, sock: _Socket, link: _Link, now: float) -> None:
        if link.state is not LinkState.UNLINKING or link.peer_unlink_count is None:
            return
        ledger = link.ledger
        assert ledger is not None
        if (ledger.received == link.peer_unlink_count and ledger.delivered == ledger.received
                and not ledger.flow_pending and ledger.confirmed == ledger.sent):
            self._input(sock, link, LinkInput.DRAINED, None, now)

    # ==== actions (one per link_state.Action) ==============================================

    def _do_ignore(self, sock: _Socket, link: _Link, frame: Frame | None, now: float) -> None:
        if frame is not None:
            self._stats["ignored"] += 1

    def _do_not_linked(self, sock: _Socket, link: _Link, frame: Frame | None, now: float) -> None:
        self.not_linked(sock, link, frame)

    def _do_send_link(self, sock: _Socket, link: _Link, frame: Frame | None, now: float) -> None:
        self.fresh_incarnation(link)
        link.peer_incarnation = link.peer_node = None
        link.peer_meta = link.ledger = None
        link.our_decision = link.peer_decision = None
        link.seal = None  # a new handshake agrees on new keys
        link.token = link.peer_token = b""
        meta = self._metadata(sock, link, None)
        self._emit_frame(link.peer.address,
                         encode_link(sock.tag, link.peer.tag, link.incarnation, meta))
        link.resend_interval = self.settings.resend_initial
        self._timers.arm(link, "resend", now + link.resend_interval)

    def _do_resend_link(self, sock: _Socket, link: _Link, frame: Frame | None,
                        now: float) -> None:
        """No answer yet: the LINK again, same incarnation (its answer may have gone to a
        stream that was replaced); the interval doubles up to ``resend_max``."""
        self._stats["links_resent"] += 1
        meta = self._metadata(sock, link, None)
        self._emit_frame(link.peer.address,
                         encode_link(sock.tag, link.peer.tag, link.incarnation, meta))
        link.resend_interval = min(self.settings.resend_max, link.resend_interval * 2)
        self._timers.arm(link, "resend", now + link.resend_interval)

    def _do_resend_answer(self, sock: _Socket, link: _Link, frame: Frame | None,
                          now: float) -> None:
        """The peer repeated its LINK: it has not seen our LINKACK. Send it again, with
        our metadata (our own LINK, if we sent one, may be lost with it)."""
        self._stats["links_resent"] += 1
        self._send_linkack(sock, link, with_metadata=True)

    def _do_answer_link(self, sock: _Socket, link: _Link, frame: Frame | None,
                        now: float) -> Verdict:
        assert frame is not None
        if link.incarnation == 0 or link.state is LinkState.RETRY_WAIT:
            self.fresh_incarnation(link)
        self._learn_peer(sock, link, frame)
        self._decide(sock, link)
        self._send_linkack(sock, link, with_metadata=True)
        if link.our_decision is Decision.ACCEPTED:
            if link.state is LinkState.RETRY_WAIT:
                link.deadline = None  # the peer's LINK replaces our retry
            return Verdict.ACCEPT
        if link.state is LinkState.RETRY_WAIT:
            link.peer_incarnation = link.peer_node = None
            link.peer_meta = link.ledger = None
        return Verdict.REFUSE

    def _do_decide_on_link(self, sock: _Socket, link: _Link, frame: Frame | None,
                           now: float) -> Verdict:
        assert frame is not None
        self._learn_peer(sock, link, frame)
        self._decide(sock, link)
        self._send_linkack(sock, link, with_metadata=False)
        if link.peer_decision is None and link.our_decision is Decision.ACCEPTED:
            return Verdict.ACCEPT  # LINK_SENT -> DECIDED
        return self.conclude(sock, link, now)

    def _do_decide_on_ack(self, sock: _Socket, link: _Link, frame: Frame | None,
                          now: float) -> Verdict:
        assert frame is not None
        self._learn_peer(sock, link, frame)
        link.peer_decision, link.peer_reason = frame.decision, frame.reason
        link.peer_token = frame.token
        if frame.decision.accepted:
            self._decide(sock, link)
            self._send_linkack(sock, link, with_metadata=False)
        return self.conclude(sock, link, now)

    def _do_note_decision(self, sock: _Socket, link: _Link, frame: Frame | None,
                          now: float) -> Verdict:
        assert frame is not None
        link.peer_decision, link.peer_reason = frame.decision, frame.reason
        link.peer_incarnation = frame.incarnation
        link.peer_token = frame.token
        if frame.decision.accepted:
            return Verdict.ACCEPT
        return self.conclude(sock, link, now)

    def _do_conclude(self, sock: _Socket, link: _Link, frame: Frame | None,
                     now: float) -> Verdict:
        assert frame is not None
        link.peer_decision, link.peer_reason = frame.decision, frame.reason
        if link.state is LinkState.UNLINKING:
            if frame.decision.accepted:
                return Verdict.ACCEPT  # keep draining (nothing was sent)
            self.drop_held(link)
            self._lose_cookies(sock, link)
            self._closed_event(sock, link, "CANCELLED", False)
            return Verdict.REFUSE
        if frame.token and frame.decision.accepted and not link.peer_token:
            link.peer_token = frame.token  # the peer validates us too: echo its token
            self._send_linkack(sock, link, with_metadata=False)
        verdict = self.conclude(sock, link, now)
        if verdict is not Verdict.ACCEPT:
            self.drop_held(link)
            return verdict
        if link.held:
            link.machine.state = LinkState.ESTABLISHED
            return self._release_held(sock, link, now)
        return verdict

    def _do_implicit_accept(self, sock: _Socket, link: _Link, frame: Frame | None,
                            now: float) -> Verdict:
        assert frame is not None
        if link.token:
            # the peer has not shown that it receives at its reply address: hold the
            # frame (the echo establishes the link) and repeat our LINKACK once, in case
            # the first went to a stream that was replaced
            assert link.ledger is not None
            if link.held is None:
                link.held = []
                self._stats["links_resent"] += 1
                self._send_linkack(sock, link, with_metadata=True)
            if len(link.held) >= link.ledger.advertised:
                self._stats["unvalidated_dropped"] += 1  # beyond the credit we granted
            else:
                link.held.append(frame)
            return Verdict.HOLD
        link.peer_decision = Decision.ACCEPTED
        self._establish(sock, link)
        link.machine.state = LinkState.ESTABLISHED
        if frame.type is FrameType.DATA:
            return self._do_receive_data(sock, link, frame, now)
        self._do_receive_flow(sock, link, frame, now)
        return Verdict.ACCEPT

    def _do_receive_data(self, sock: _Socket, link: _Link, frame: Frame | None,
                         now: float) -> Verdict:
        assert frame is not None
        assert link.ledger is not None
        ledger = link.ledger
        if link.token:  # (UNLINKING before the peer validated its address)
            self._stats["unvalidated_dropped"] += 1
            return Verdict.ACCEPT
        if link.peer_unlink_count is not None and ledger.received >= link.peer_unlink_count:
            code, text = ErrorCode.PROTOCOL_VIOLATION, "DATA after UNLINK"
        elif len(frame.payload) > sock.max_message_size:
            self._stats["oversize_dropped"] += 1
            code, text = ErrorCode.MESSAGE_TOO_LARGE, (
                f"{len(frame.payload)} bytes exceed the {sock.max_message_size} advertised")
        elif not ledger.accept_data():
            self._stats["credit_violations"] += 1
            code, text = ErrorCode.CREDIT_EXCEEDED, "DATA beyond the granted credit"
        else:
            self._events.append(MessageReceived(tag=sock.tag, peer=link.peer,
                                                payload=frame.payload,
                                                incarnation=link.incarnation))
            return Verdict.ACCEPT
        self._emit_link_frame(link, encode_error(
            sock.tag, link.peer.tag, frame.incarnation, code, text))
        self._lose_cookies(sock, link)
        self._closed_event(sock, link, f"ERROR:{code.name}", True)
        return Verdict.REFUSE

    def _do_receive_flow(self, sock: _Socket, link: _Link, frame: Frame | None,
                         now: float) -> None:
        assert frame is not None
        assert link.ledger is not None
        newly, before = link.ledger.apply_flow(frame.delivered, frame.limit)
        if newly:
            for cookie in link.cookies.confirm(link.ledger.confirmed):
                self._stats["cookies_returned"] += 1
                self._events.append(CookieReturned(tag=sock.tag, peer=link.peer, cookie=cookie))
            link.ledger.hold_flow = len(link.cookies)
        if before <= 0 < link.ledger.credit:
            self._events.append(CreditAvailable(tag=sock.tag, peer=link.peer,
                                                credits=link.ledger.credit))

    def _do_echo_token(self, sock: _Socket, link: _Link, frame: Frame | None,
                       now: float) -> None:
        """An established link gets the peer's LINKACK again (it repeated it for a
        repeated LINK, or held our DATA/FLOW without our echo): echo its token."""
        assert frame is not None
        if not frame.token or link.our_decision is not Decision.ACCEPTED:
            self._stats["ignored"] += 1
            return
        self._stats["links_resent"] += 1
        link.peer_token = frame.token
        self._send_linkack(sock, link, with_metadata=False)

    def _do_start_unlink(self, sock: _Socket, link: _Link, frame: Frame | None,
                         now: float) -> None:
        self.drop_held(link)
        self._send_unlink(sock, link)
        self._timers.arm(link, "unlink", now + self.settings.unlink_timeout)

    def _do_answer_unlink(self, sock: _Socket, link: _Link, frame: Frame | None,
                          now: float) -> None:
        self._do_note_unlink(sock, link, frame, now)
        self._do_start_unlink(sock, link, frame, now)

    def _do_note_unlink(self, sock: _Socket, link: _Link, frame: Frame | None,
                        now: float) -> None:
        assert frame is not None
        link.peer_unlink_count = frame.count

    def _do_cancel(self, sock: _Socket, link: _Link, frame: Frame | None, now: float) -> None:
        self._send_unlink(sock, link)
        self._closed_event(sock, link, "CANCELLED", False)

    def _do_peer_cancel(self, sock: _Socket, link: _Link, frame: Frame | None,
                        now: float) -> None:
        if link.initiator:
            self._events.append(LinkRefused(
                tag=sock.tag, peer=link.peer, decision=Decision.CANCELLED,
                reason="the peer cancelled the handshake", permanent=True, by_peer=True,
                retry_at=None))

    def _do_link_error(self, sock: _Socket, link: _Link, frame: Frame | None,
                       now: float) -> Verdict:
        assert frame is not None
        link.peer_decision = (Decision.SOCKET_NOT_FOUND
                              if frame.error == ErrorCode.SOCKET_NOT_FOUND else Decision.TEMPORARY)
        link.peer_reason = frame.reason or link.peer_decision.name
        return self.conclude(sock, link, now)

    def _do_break(self, sock: _Socket, link: _Link, frame: Frame | None, now: float) -> None:
        assert frame is not None
        name = frame.error.name if isinstance(frame.error, ErrorCode) else str(frame.error)
        self._lose_cookies(sock, link)
        self._closed_event(sock, link, f"ERROR:{name}", True)

    def _do_give_up(self, sock: _Socket, link: _Link, frame: Frame | None, now: float) -> None:
        self._closed_event(sock, link, "CANCELLED", False)

    def _do_unlink_timeout(self, sock: _Socket, link: _Link, frame: Frame | None,
                           now: float) -> None:
        self._lose_cookies(sock, link)
        self._closed_event(sock, link, "TIMEOUT", True)

    def _do_finish(self, sock: _Socket, link: _Link, frame: Frame | None, now: float) -> None:
        self._closed_event(sock, link, "UNLINKED", False)
