"""The link state machine: one table, no I/O.

Rules (seed 002, "Links"):

* A link exists only when both sockets accepted. Each socket decides on the *other's*
  metadata (LINK, or LINKACK with metadata) and sends its decision in a LINKACK.
* LINK carries the sender's metadata. A LINKACK carries the sender's decision, and its
  metadata too when the sender has not sent a LINK (it is answering one).
* A LINKACK may arrive before the peer's LINK (simultaneous LINKs, reordered control
  frames): the decision is kept (GOT_DECISION) until the metadata arrives.
* Address validation (docs/protocol.md 2.6.1): a socket that answers a LINK its
  application did not ask for puts a token in its accepting LINKACK; the peer echoes it
  in its LINKACK. Until the echo came (a LINKACK without it is dropped, counted
  ``tokens_rejected``) the peer has not shown that it receives at the reply address it
  named, and the link cannot be established.
* DATA or FLOW arriving while we wait for the peer's decision means the peer accepted
  (a peer only sends them on an established link): the link is established, and a late
  LINKACK is then ignored; but while the peer's address is not validated they are held
  (HOLD, at most the credits we granted) and our LINKACK (with its token) is repeated
  once: the LINKACK with the echo establishes the link and delivers them, in order.
* A refusal with a temporary code (bit 7 set) makes the *initiator* retry after a
  randomised, growing delay (RETRY_WAIT); a permanent refusal ends the attempt. A
  responder that refuses keeps nothing (IDLE).
* UNLINK carries how many DATA frames its sender sent. Both sides send exactly one; a link
  closes when every DATA of the peer was delivered to the application, and every DATA of
  ours was confirmed by FLOW, or when the unlink timeout expires (cookies then lost).
* A frame that is not LINK from a socket we hold no link with gets SOCKET_NOT_LINKED.
* Aeron delivers every frame of a stream, but a stream can be replaced under a handshake
  (the peer node restarted, and its old stream is still read): an initiator in LINK_SENT
  repeats its LINK, same incarnation, with a growing interval, until an answer comes; a
  socket in DECIDED answers a repeated LINK with its LINKACK (and metadata) again.
* An UNLINK reaching LINK_SENT belongs to an older attempt (the peer answers our current
  LINK with a LINKACK before anything else, and would have sent its own LINK before an
  UNLINK of its own): it gets SOCKET_NOT_LINKED, which ends the peer's old record, and the
  current attempt goes on. (A cancelled attempt's LINK and UNLINK may reach the peer late,
  e.g. after waiting for a connection, and the peer's answering UNLINK must not cancel the
  next attempt.)

Frames are classified by the core into :class:`LinkInput` values (LINKACK is split by
whether it carries metadata) after incarnation checks (``socket_core.py``). Every
(state, frame input) pair has an entry. The local inputs OPEN/CLOSE/TIMER/DRAINED have
entries only where they make sense; :meth:`LinkStateMachine.lookup` raises
:class:`exon.errors.StateError` for the others and leaves the state unchanged.

A transition names an :class:`Action` the core performs, and the next state. Actions that
decide something return a :class:`Verdict`; for those the next state is a mapping keyed by
the verdict.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from exon.errors import StateError


class LinkState(enum.Enum):
    IDLE = "IDLE"  #: no link (initial and final; the core keeps no record)
    LINK_SENT = "LINK_SENT"  #: we sent LINK; waiting for the peer's metadata and decision
    GOT_DECISION = "GOT_DECISION"  #: the peer accepted (LINKACK w/o metadata) before its LINK
    DECIDED = "DECIDED"  #: we have the peer's metadata, accepted, sent LINKACK; await its decision
    ESTABLISHED = "ESTABLISHED"
    UNLINKING = "UNLINKING"  #: UNLINK sent; draining both directions
    RETRY_WAIT = "RETRY_WAIT"  #: temporarily refused; LINK again when the timer fires


class LinkInput(enum.Enum):
    # frames from the peer (after incarnation checks)
    LINK = "LINK"
    LINKACK_META = "LINKACK+meta"
    LINKACK = "LINKACK"
    DATA = "DATA"
    FLOW = "FLOW"
    UNLINK = "UNLINK"
    ERROR = "ERROR"
    # local inputs
    OPEN = "open"  #: the application asked for the link
    CLOSE = "close"  #: the application asked to unlink
    TIMER = "timer"  #: the record's deadline passed (retry, unlink timeout)
    RESEND = "resend"  #: LINK_SENT: no answer yet; repeat the LINK
    DRAINED = "drained"  #: UNLINKING finished: both directions delivered and confirmed


FRAME_INPUTS: tuple[LinkInput, ...] = (
    LinkInput.LINK,
    LinkInput.LINKACK_META,
    LinkInput.LINKACK,
    LinkInput.DATA,
    LinkInput.FLOW,
    LinkInput.UNLINK,
    LinkInput.ERROR,
)


class Verdict(enum.Enum):
    ACCEPT = "accept"  #: link established / frame accepted
    RETRY = "retry"  #: refused temporarily; the initiator will retry
    REFUSE = "refuse"  #: refused (or broken); the record ends
    HOLD = "hold"  #: DATA/FLOW kept until the peer's address is validated (2.6.1)


class Action(enum.Enum):
    IGNORE = "ignore"  #: drop (duplicate, late or stale), counted
    NOT_LINKED = "not_linked"  #: answer ERROR SOCKET_NOT_LINKED, drop
    SEND_LINK = "send_link"  #: new incarnation + nonce, send LINK with our metadata
    RESEND_LINK = "resend_link"  #: send the same LINK again (same incarnation); back off
    RESEND_ANSWER = "resend_answer"  #: the peer repeated its LINK: our LINKACK + metadata again
    ANSWER_LINK = "answer_link"  #: decide; send LINKACK with decision + metadata
    DECIDE_ON_LINK = "decide_on_link"  #: decide; send LINKACK w/o metadata; conclude if possible
    DECIDE_ON_ACK = "decide_on_ack"  #: decide; send LINKACK w/o metadata if peer accepted; conclude
    NOTE_DECISION = "note_decision"  #: keep the peer's early decision; a refusal concludes
    CONCLUDE = "conclude"  #: the peer's decision arrived; conclude
    IMPLICIT_ACCEPT = "implicit_accept"  #: DATA/FLOW while deciding: establish, then process
    #: it (HOLD it while the peer's address is not validated)
    ECHO_TOKEN = "echo_token"  #: a LINKACK with a token on a link: echo it (else ignore)
    RECEIVE_DATA = "receive_data"  #: credit/size check; MessageReceived (REFUSE: violation)
    RECEIVE_FLOW = "receive_flow"  #: credit + cookie confirmation
    START_UNLINK = "start_unlink"  #: send UNLINK(sent)
    ANSWER_UNLINK = "answer_unlink"  #: note the peer's count; send UNLINK(sent)
    NOTE_UNLINK = "note_unlink"  #: note the peer's count
    CANCEL = "cancel"  #: we give up a handshake: send UNLINK(0)
    PEER_CANCEL = "peer_cancel"  #: the peer gave up the handshake
    LINK_ERROR = "link_error"  #: ERROR during the handshake: a temporary refusal
    BREAK = "break"  #: ERROR on a link: close it with an error, cookies lost
    GIVE_UP = "give_up"  #: the application cancels a pending retry
    UNLINK_TIMEOUT = "unlink_timeout"  #: draining took too long: close, cookies lost
    FINISH = "finish"  #: clean close after UNLINK


@dataclass(frozen=True, slots=True)
class Transition:
    action: Action
    next: LinkState | Mapping[Verdict, LinkState]

    def next_state(self, verdict: Verdict | None) -> LinkState:
        if isinstance(self.next, LinkState):
            return self.next
        if verdict is None:
            raise StateError(f"action {self.action.value} needs a verdict")
        return self.next[verdict]


S = LinkState
I = LinkInput  # noqa: E741
A = Action
V = Verdict


def _t(action: Action, nxt: LinkState | Mapping[Verdict, LinkState]) -> Transition:
    return Transition(action, nxt)


_DECISION_FROM_LINK_SENT = {V.ACCEPT: S.DECIDED, V.RETRY: S.RETRY_WAIT, V.REFUSE: S.IDLE}
_FINAL = {V.ACCEPT: S.ESTABLISHED, V.RETRY: S.RETRY_WAIT, V.REFUSE: S.IDLE}
_EARLY = {V.ACCEPT: S.GOT_DECISION, V.RETRY: S.RETRY_WAIT, V.REFUSE: S.IDLE}
_REFUSAL = {V.RETRY: S.RETRY_WAIT, V.REFUSE: S.IDLE}
_IMPLICIT = {V.ACCEPT: S.ESTABLISHED, V.HOLD: S.DECIDED, V.REFUSE: S.IDLE}

#: (state, input) -> transition. The whole protocol of one link endpoint.
TABLE: dict[tuple[LinkState, LinkInput], Transition] = {
    # IDLE: no record. A LINK opens one as responder.
    (S.IDLE, I.OPEN): _t(A.SEND_LINK, S.LINK_SENT),
    (S.IDLE, I.CLOSE): _t(A.IGNORE, S.IDLE),
    (S.IDLE, I.LINK): _t(A.ANSWER_LINK, {V.ACCEPT: S.DECIDED, V.REFUSE: S.IDLE}),
    (S.IDLE, I.LINKACK_META): _t(A.IGNORE, S.IDLE),
    (S.IDLE, I.LINKACK): _t(A.IGNORE, S.IDLE),
    (S.IDLE, I.DATA): _t(A.NOT_LINKED, S.IDLE),
    (S.IDLE, I.FLOW): _t(A.NOT_LINKED, S.IDLE),
    (S.IDLE, I.UNLINK): _t(A.NOT_LINKED, S.IDLE),
    (S.IDLE, I.ERROR): _t(A.IGNORE, S.IDLE),
    # LINK_SENT: we initiated.
    (S.LINK_SENT, I.OPEN): _t(A.IGNORE, S.LINK_SENT),
    (S.LINK_SENT, I.CLOSE): _t(A.CANCEL, S.IDLE),
    (S.LINK_SENT, I.TIMER): _t(A.IGNORE, S.LINK_SENT),
    (S.LINK_SENT, I.RESEND): _t(A.RESEND_LINK, S.LINK_SENT),
    (S.LINK_SENT, I.LINK): _t(A.DECIDE_ON_LINK, _DECISION_FROM_LINK_SENT),
    (S.LINK_SENT, I.LINKACK_META): _t(A.DECIDE_ON_ACK, _FINAL),
    (S.LINK_SENT, I.LINKACK): _t(A.NOTE_DECISION, _EARLY),
    (S.LINK_SENT, I.DATA): _t(A.NOT_LINKED, S.LINK_SENT),
    (S.LINK_SENT, I.FLOW): _t(A.NOT_LINKED, S.LINK_SENT),
    (S.LINK_SENT, I.UNLINK): _t(A.NOT_LINKED, S.LINK_SENT),
    (S.LINK_SENT, I.ERROR): _t(A.LINK_ERROR, _REFUSAL),
    # GOT_DECISION: the peer accepted before we saw its metadata.
    (S.GOT_DECISION, I.OPEN): _t(A.IGNORE, S.GOT_DECISION),
    (S.GOT_DECISION, I.CLOSE): _t(A.CANCEL, S.IDLE),
    (S.GOT_DECISION, I.TIMER): _t(A.IGNORE, S.GOT_DECISION),
    (S.GOT_DECISION, I.LINK): _t(A.DECIDE_ON_LINK, _FINAL),
    (S.GOT_DECISION, I.LINKACK_META): _t(A.DECIDE_ON_ACK, _FINAL),
    (S.GOT_DECISION, I.LINKACK): _t(A.IGNORE, S.GOT_DECISION),
    (S.GOT_DECISION, I.DATA): _t(A.NOT_LINKED, S.GOT_DECISION),
    (S.GOT_DECISION, I.FLOW): _t(A.NOT_LINKED, S.GOT_DECISION),
    (S.GOT_DECISION, I.UNLINK): _t(A.PEER_CANCEL, S.IDLE),
    (S.GOT_DECISION, I.ERROR): _t(A.LINK_ERROR, _REFUSAL),
    # DECIDED: we accepted; the peer's decision is pending.
    (S.DECIDED, I.OPEN): _t(A.IGNORE, S.DECIDED),
    (S.DECIDED, I.CLOSE): _t(A.START_UNLINK, S.UNLINKING),
    (S.DECIDED, I.TIMER): _t(A.IGNORE, S.DECIDED),
    (S.DECIDED, I.LINK): _t(A.RESEND_ANSWER, S.DECIDED),
    (S.DECIDED, I.LINKACK_META): _t(A.CONCLUDE, _FINAL),
    (S.DECIDED, I.LINKACK): _t(A.CONCLUDE, _FINAL),
    (S.DECIDED, I.DATA): _t(A.IMPLICIT_ACCEPT, _IMPLICIT),
    (S.DECIDED, I.FLOW): _t(A.IMPLICIT_ACCEPT, _IMPLICIT),
    (S.DECIDED, I.UNLINK): _t(A.ANSWER_UNLINK, S.UNLINKING),
    (S.DECIDED, I.ERROR): _t(A.LINK_ERROR, _REFUSAL),
    # ESTABLISHED
    (S.ESTABLISHED, I.OPEN): _t(A.IGNORE, S.ESTABLISHED),
    (S.ESTABLISHED, I.CLOSE): _t(A.START_UNLINK, S.UNLINKING),
    (S.ESTABLISHED, I.TIMER): _t(A.IGNORE, S.ESTABLISHED),
    (S.ESTABLISHED, I.LINK): _t(A.IGNORE, S.ESTABLISHED),
    (S.ESTABLISHED, I.LINKACK_META): _t(A.ECHO_TOKEN, S.ESTABLISHED),
    (S.ESTABLISHED, I.LINKACK): _t(A.IGNORE, S.ESTABLISHED),
    (S.ESTABLISHED, I.DATA): _t(A.RECEIVE_DATA, {V.ACCEPT: S.ESTABLISHED, V.REFUSE: S.IDLE}),
    (S.ESTABLISHED, I.FLOW): _t(A.RECEIVE_FLOW, S.ESTABLISHED),
    (S.ESTABLISHED, I.UNLINK): _t(A.ANSWER_UNLINK, S.UNLINKING),
    (S.ESTABLISHED, I.ERROR): _t(A.BREAK, S.IDLE),
    # UNLINKING
    (S.UNLINKING, I.CLOSE): _t(A.IGNORE, S.UNLINKING),
    (S.UNLINKING, I.TIMER): _t(A.UNLINK_TIMEOUT, S.IDLE),
    (S.UNLINKING, I.DRAINED): _t(A.FINISH, S.IDLE),
    (S.UNLINKING, I.LINK): _t(A.IGNORE, S.UNLINKING),
    (S.UNLINKING, I.LINKACK_META): _t(A.CONCLUDE, {V.ACCEPT: S.UNLINKING, V.RETRY: S.IDLE,
                                                  V.REFUSE: S.IDLE}),
    (S.UNLINKING, I.LINKACK): _t(A.CONCLUDE, {V.ACCEPT: S.UNLINKING, V.RETRY: S.IDLE,
                                             V.REFUSE: S.IDLE}),
    (S.UNLINKING, I.DATA): _t(A.RECEIVE_DATA, {V.ACCEPT: S.UNLINKING, V.REFUSE: S.IDLE}),
    (S.UNLINKING, I.FLOW): _t(A.RECEIVE_FLOW, S.UNLINKING),
    (S.UNLINKING, I.UNLINK): _t(A.NOTE_UNLINK, S.UNLINKING),
    (S.UNLINKING, I.ERROR): _t(A.BREAK, S.IDLE),
    # RETRY_WAIT: like IDLE for the peer, but we still want the link.
    (S.RETRY_WAIT, I.OPEN): _t(A.IGNORE, S.RETRY_WAIT),
    (S.RETRY_WAIT, I.CLOSE): _t(A.GIVE_UP, S.IDLE),
    (S.RETRY_WAIT, I.TIMER): _t(A.SEND_LINK, S.LINK_SENT),
    (S.RETRY_WAIT, I.LINK): _t(A.ANSWER_LINK, {V.ACCEPT: S.DECIDED, V.REFUSE: S.RETRY_WAIT}),
    (S.RETRY_WAIT, I.LINKACK_META): _t(A.IGNORE, S.RETRY_WAIT),
    (S.RETRY_WAIT, I.LINKACK): _t(A.IGNORE, S.RETRY_WAIT),
    (S.RETRY_WAIT, I.DATA): _t(A.NOT_LINKED, S.RETRY_WAIT),
    (S.RETRY_WAIT, I.FLOW): _t(A.NOT_LINKED, S.RETRY_WAIT),
    (S.RETRY_WAIT, I.UNLINK): _t(A.NOT_LINKED, S.RETRY_WAIT),
    (S.RETRY_WAIT, I.ERROR): _t(A.IGNORE, S.RETRY_WAIT),
}


class LinkStateMachine:
    """The state of one link endpoint. The core looks up, acts, then commits."""

    __slots__ = ("state",)

    def __init__(self, state: LinkState = LinkState.IDLE) -> None:
        self.state = state

    def lookup(self, event: LinkInput) -> Transition:
        """The transition for ``event``; StateError (state unchanged) if it is illegal."""
        try:
            return TABLE[(self.state, event)]
        except KeyError:
            raise StateError(
                f"{event.value} is not valid for a link in state {self.state.value}"
            ) from None

    def commit(self, transition: Transition, verdict: Verdict | None = None) -> LinkState:
        self.state = transition.next_state(verdict)
        return self.state

    def handle(self, event: LinkInput, verdict: Verdict | None = None) -> Transition:
        """lookup + commit in one step (for callers whose action needs no verdict)."""
        transition = self.lookup(event)
        self.commit(transition, verdict)
        return transition


def table_markdown() -> str:
    """The table as Markdown (docs/protocol.md embeds this text)."""
    lines = ["| state | input | action | next state |", "|---|---|---|---|"]
    for (state, event), transition in TABLE.items():
        if isinstance(transition.next, LinkState):
            nxt = transition.next.value
        else:
            nxt = ", ".join(f"{v.value}: {s.value}" for v, s in transition.next.items())
        lines.append(f"| {state.value} | {event.value} | {transition.action.value} | {nxt} |")
    return "\n".join(lines)
