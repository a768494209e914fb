"""The records a :class:`~exon.core.socket_core.SocketCore` keeps (one per socket, one per
link), its statistics snapshot, and the interface of the native fast path beside it.

Plain data: the core owns and mutates the records; nothing here acts on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from exon.core.cookies import CookieJar
from exon.core.credits import CreditLedger
from exon.core.events import PeerId
from exon.core.frames import Decision, LinkMetadata
from exon.core.link_state import LinkState, LinkStateMachine
from exon.core.policy import LinkPolicy

__all__ = ["CoreStatistics", "LinkAccelerator", "LinkRecord", "SocketRecord"]


@dataclass(slots=True, eq=False)
class LinkRecord:
    """One link of a socket: its state machine, incarnations, credits, cookies, timers."""

    tag: int
    peer: PeerId
    machine: LinkStateMachine
    incarnation: int = 0
    nonce: bytes = b""
    initiator: bool = False
    peer_incarnation: int | None = None
    peer_node: str | None = None
    peer_meta: LinkMetadata | None = None
    our_decision: Decision | None = None
    our_reason: str = ""
    peer_decision: Decision | None = None
    peer_reason: str = ""
    ledger: CreditLedger | None = None
    cookies: CookieJar = field(default_factory=CookieJar)
    peer_unlink_count: int | None = None
    established_emitted: bool = False
    attempts: int = 0
    deadline: float | None = None
    flow_deadline: float | None = None
    resend_deadline: float | None = None  #: LINK_SENT: when the LINK is repeated
    resend_interval: float = 0.0
    stored: bool = False
    channel: int | None = None  #: the transport stream the peer's handshake came on
    fast: Any = None  #: the accelerator's token while the link is attached to it
    #: an encrypted link's keys (``LinkSeal``), once its handshake agreed on them: every
    #: frame of the link but LINK, LINKACK with metadata and refusals is sealed with them
    seal: Any = None
    #: (our incarnation, the credits our metadata granted in it): the memory budget's share
    grant: tuple[int, int] | None = None
    #: the receive window is below its share of the memory budget: the core computes each
    #: FLOW (the accelerator leaves them to it) and grows the window as the budget frees
    growing: bool = False
    #: bytes: the largest window granted in the budget x max message size (0: none); the
    #: core's sum of these bounds what all links may hold, so growing needs no walk
    budget_peak: int = 0
    #: the address-validation token our LINKACK carried (docs/protocol.md 2.6.1) while the
    #: peer has not echoed it; b"": validated, or nothing to validate (we initiated)
    token: bytes = b""
    peer_token: bytes = b""  #: the token of the peer's LINKACK, echoed in ours
    #: DATA/FLOW that came while the peer's address was not validated (at most the credits
    #: we granted), handled in order once it is; None: none held
    held: list[Any] | None = None

    @property
    def state(self) -> LinkState:
        return self.machine.state


@dataclass(slots=True, eq=False)
class SocketRecord:
    """One socket (tag) of the core: its options and links, and PUSH/REQ round-robin."""

    tag: int
    socket_type: str
    policy: LinkPolicy | None
    initial_credits: int
    max_message_size: int
    max_links: int | None
    budgeted: bool = True  #: its links' receive windows share the node's memory budget
    #: a new link's first window when the budget is crowded (None: the node's rule)
    start_credits: int | None = None
    links: dict[PeerId, LinkRecord] = field(default_factory=dict)
    rr: list[PeerId] = field(default_factory=list)
    rr_next: int = 0
    closing: bool = False


class LinkAccelerator(Protocol):
    """A DATA fast path beside the core (the Node's native link table).

    The core attaches every link when it becomes ESTABLISHED and detaches it as soon as it
    leaves that state (UNLINKING, closed, broken, forgotten). While attached:

    * the link's :class:`CreditLedger` counters live in the accelerator's record
      (``ledger.attach(record)`` inside :meth:`attach`); the core detaches the ledger
      (copying them back) *before* calling :meth:`detach`;
    * the accelerator may send DATA itself (spending ``sent`` < ``limit``), may count DATA
      it received itself (``received`` < ``advertised``, to be handed to the application
      without the core) and deliveries (``delivered``), calling
      :meth:`SocketCore.delivered_natively` when a FLOW may be due;
    * everything else (handshake, FLOW, UNLINK, ERROR, cookies, timers) goes through the
      core as before;
    * an encrypted link is attached with its seal's native state (``seal=``, the
      ``exon_seal_t`` the core's ``LinkSeal`` keeps its counters in): the accelerator seals
      what it sends and opens what it takes with it, one counter per direction.
    """

    def attach(self, tag: int, peer: PeerId, incarnation: int, peer_incarnation: int,
               ledger: CreditLedger, peer_max_size: int, max_size: int, *,
               seal: Any = None) -> Any:
        """Attach an ESTABLISHED link; a token, or None when it cannot be accelerated."""
        ...

    def detach(self, token: Any) -> None:
        """The link left ESTABLISHED: stop sending and receiving on it natively."""
        ...

    def set_window(self, token: Any, capacity: int, batch: int) -> None:
        """The receive window of an attached link changed: FLOWs grant ``capacity`` credits
        after ``batch`` deliveries; ``capacity`` 0: every FLOW goes through the core."""
        ...


@dataclass(frozen=True, slots=True)
class CoreStatistics:
    """An immutable snapshot of the core's counters."""

    frames_received: int
    frames_sent: int
    malformed_dropped: int
    stale_dropped: int
    ignored: int
    not_found_sent: int
    not_linked_sent: int
    credit_violations: int
    oversize_dropped: int
    refusals_sent: int
    refusals_received: int
    retries: int
    links_established: int
    links_closed: int
    cookies_returned: int
    cookies_lost: int
    relinks_refused: int  #: LINKs that would have replaced a live link, from another stream
    links_resent: int  #: LINKs repeated unanswered, and LINKACKs repeated for a repeated LINK
    #: frames of encrypted links dropped unopened: altered, injected, replayed, sealed for
    #: another link, or plaintext where the link is sealed
    unopened_dropped: int
    tokens_rejected: int  #: LINKACKs dropped: no or a wrong echo of our token (2.6.1)
    unvalidated_dropped: int  #: DATA/FLOW of a link whose peer never validated its address
    amplification_held: int  #: frames not sent: 3x the bytes from an unvalidated address
    amplification_held_bytes: int  #: their bytes
