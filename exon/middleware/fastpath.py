"""The Node's native DATA fast path: a :class:`~exon.core.LinkAccelerator` over the C link
table (``exon/native/src/link/exon_link_table.h``).

Mirroring rules (the core stays authoritative; there is ONE copy of every count):

* A link is attached when the core establishes it and the peer node's publication exists;
  it is detached the moment it leaves ESTABLISHED (UNLINKING, closed, broken, re-linked).
* While attached, the link's ``CreditLedger`` counters (limit, sent, advertised, received,
  delivered, flowed_delivered) live in the table entry; the core reads and writes them
  there (a FLOW raises ``limit`` in place, ``make_flow`` moves ``advertised``). Detaching
  copies them back into the ledger first.
* ``send`` (C): round-robin over the socket's attached links with ``sent < limit``, one
  offer of header + payload, ``sent += 1`` only when the offer succeeded.
* ``poll`` (C): DATA of an attached link whose incarnation matches, within ``advertised``
  and size, is counted (``received += 1``) and handed to the socket without the core.
  A FLOW of an attached link is applied there too (``limit``/``confirmed`` maxima) unless
  ``hold_flow`` says cookies wait (the core returns them). Every other frame, and every
  later frame of the same image in that poll, goes to the core, in order.
* ``deliver`` (C): ``delivered += 1`` (``deliver(link, n)``: ``+= n``, one due-check); a
  due FLOW is offered natively; the Node calls
  ``core.delivered_natively`` only when that offer failed or a FLOW timer must be armed
  (``flow_timer`` is 0 while deliveries wait for a FLOW).
* Every receiving socket has one inbox (``open_queue``, exon_fast_inbox.c ``RecvQueue``):
  ``Poller.batch`` queues its fast DATA there, the socket queues the core's messages there
  too (``Socket._on_message``), each in its peer's lane, and ``receive()`` pops it,
  fair-queued, counting each delivery as it pops (a plain socket gets
  ``Message(payload, exon.Peer)`` items, the others ``(payload, PeerId)`` for their own
  checks, see ``Socket._accept_locked``). A link's queued messages stay when it detaches:
  from then on the core counts their delivery.
* A ROUTER or DEALER also gets a ``PeerRoutes`` (``open_routes``): the links it routed
  (those that need no envelope), Peer <-> link index, for its native send and receive
  doors. A link's route goes in ``detach``, with its queue entry.
* Sends while frames wait in the Node's backlog, and links without a table entry take
  the core's path (same counters, same publication, same order). The rule is C's alone
  (``exon_lt_hold_reason``, exon_link_table.h): a caller passes what holds it (``hold``:
  ``HOLD_*`` bits) and acts on the :class:`SendReason` it gets back. A send with a cookie
  leaves the doors (they keep no cookies) for Python, which sends through the table and
  hands the cookie to the core against that DATA (``SocketCore.cookie_on_last_sent``).

Not thread-safe: every call under the Node's lock (``Poller.batch`` under the poll role
too; it holds the lock and the GIL through one native call per batch).
"""

from __future__ import annotations

import enum
from typing import Any, Final

from exon import errors
from exon.core import PeerId
from exon.core.credits import CreditLedger
from exon.middleware.hosted import HostedSocket, InboxOwner
from exon.native import (
    address_of,
    check,
    fast_link_calls,
    fast_link_send_many,
    fast_poll_batch,
    fast_recv_queue,
    ffi,
    lib,
    peer_receive_door,
    peer_routes,
    peer_send_door,
    pub_send_door,
    socket_receive_door,
    socket_send_door,
    sub_receive_door,
)

__all__ = ["FLOW_CREDIT", "FLOW_DONE", "HEADER_LENGTH", "HOLD_BACKLOG", "HOLD_CLOSED",
           "HOLD_COOKIE", "LINK_NONE", "OFFER_SPINS", "OFFER_YIELD_AFTER", "RETRY",
           "ROUND_ROBIN", "FastLink", "FastLinks", "SendReason"]

#: exon_lt_desc_t.link of a FLOW applied natively, of a DATA ``poll_batch`` queued, and of
#: a sealed frame dropped natively (did not open)
FLOW_DONE = int(lib.EXON_LT_FLOW_DONE)
FLOW_CREDIT = int(lib.EXON_LT_FLOW_CREDIT)
HEADER_LENGTH = int(lib.EXON_LT_HEADER_LENGTH)
_MAX_PAYLOAD = 0x7FFF_FFFF


class SendReason(enum.IntEnum):
    """Why a native send (``FastLinks.send``, a door) did not send: its negative results,
    declared once in exon_link_table.h (Aeron's offer outcomes keep their values)."""

    NOT_CONNECTED = lib.EXON_LT_NOT_CONNECTED
    BACK_PRESSURED = lib.EXON_LT_BACK_PRESSURED
    ADMIN_ACTION = lib.EXON_LT_ADMIN_ACTION
    PUB_CLOSED = lib.EXON_LT_PUB_CLOSED
    MAX_POSITION = lib.EXON_LT_MAX_POSITION
    NO_CREDIT = lib.EXON_LT_NO_CREDIT
    TOO_LARGE = lib.EXON_LT_TOO_LARGE
    NO_LINK = lib.EXON_LT_NO_LINK
    COOKIE = lib.EXON_LT_COOKIE
    BACKLOG = lib.EXON_LT_BACKLOG
    CLOSED = lib.EXON_LT_CLOSED


#: the reasons to offer again (nothing was spent), at most OFFER_SPINS times, yielding the
#: CPU after the first OFFER_YIELD_AFTER
RETRY: Final = frozenset((SendReason.BACK_PRESSURED, SendReason.ADMIN_ACTION))
OFFER_SPINS: Final = int(lib.EXON_LT_OFFER_SPINS)
OFFER_YIELD_AFTER: Final = int(lib.EXON_LT_OFFER_YIELD_AFTER)
#: ``send``'s ``hold`` bits: what holds a message off the fast path
HOLD_COOKIE: Final = int(lib.EXON_LT_HOLD_COOKIE)
HOLD_BACKLOG: Final = int(lib.EXON_LT_HOLD_BACKLOG)
HOLD_CLOSED: Final = int(lib.EXON_LT_HOLD_CLOSED)
#: ``send``'s ``link``: round-robin over the socket's links with credit, or none
ROUND_ROBIN: Final = int(lib.EXON_LT_ROUND_ROBIN)
LINK_NONE: Final = int(lib.EXON_LT_LINK_NONE)


class FastLink:
    """The token of one attached link."""

    __slots__ = ("attached", "incarnation", "index", "peer", "tag")

    def __init__(self, index: int, tag: int, peer: PeerId, incarnation: int) -> None:
        self.index = index
        self.tag = tag
        self.peer = peer
        self.incarnation = incarnation
        self.attached = True

    def __repr__(self) -> str:
        return f"<FastLink {self.index} {self.tag}->{self.peer} {'on' if self.attached else 'off'}>"


class FastLinks:
    """The link table of one Node. ``publication_of(address)`` returns the peer node's
    ``ExclusivePublication`` or None."""

    def __init__(self, publication_of: Any, *, capacity: int = 1024,
                 socket_capacity: int = 1024) -> None:
        self._table = ffi.new("exon_link_table_t *")
        check(lib.exon_lt_init(self._table, capacity, socket_capacity), "link table")
        self._publication_of = publication_of
        self._socket_capacity = socket_capacity
        #: ``send(slot, link, payload, hold=0)``: the link used (>= 0) or a SendReason
        self.send, self.deliver = fast_link_calls(self._table)
        #: ``send_many(slot, link, payloads, start)``: the index of the first payload not sent
        self.send_many = fast_link_send_many(self._table)
        self.tokens: dict[int, FastLink] = {}
        self.by_link: dict[tuple[int, PeerId], FastLink] = {}
        self.slots: dict[int, int] = {}
        self._free_slots = list(range(socket_capacity - 1, -1, -1))
        self.keys: dict[str, int] = {}
        self._capacity = capacity
        #: per socket slot: the socket's inbox (None: none)
        self.queues: list[Any] = [None] * socket_capacity
        self.slot_owners: dict[int, HostedSocket] = {}  #: per socket slot: its socket
        self.slot_inboxes: dict[int, InboxOwner] = {}  #: per socket slot: its inbox
        #: per socket slot: the PeerRoutes of a ROUTER or DEALER (exon_fast_peers.c); a
        #: link's entry goes the moment the link detaches (before its index can be reused)
        self.routes: dict[int, Any] = {}
        self._closed = False

    # ---- sockets and peers ------------------------------------------------------------

    def open_socket(self, tag: int) -> int:
        """A socket slot for ``tag`` (-1 when the table has none left: core path only)."""
        if not self._free_slots:
            return -1
        slot = self._free_slots.pop()
        self.slots[tag] = slot
        return slot

    def open_queue(self, owner: InboxOwner, message_type: type) -> Any:
        """A native queue for the inbox ``owner`` (exon_fast_inbox.c ``RecvQueue``): its
        socket's one receive queue, items
        ``message_type((payload, peer))``. ``owner.on_due(link)``: a delivery counted on a
        link needs the core (FLOW due or timer); ``owner.on_core(peer, incarnation,
        count)``: deliveries for the core to count. Until :meth:`register_queue` it holds
        what the socket pushes only."""
        return fast_recv_queue(self._table, owner.on_due, owner.on_core, message_type,
                               self._capacity)

    def register_queue(self, slot: int, queue: Any, owner: HostedSocket,
                       inbox: InboxOwner) -> None:
        """From now on the fast DATA of the socket ``owner`` of ``slot`` (-1: none; its
        inbox holds the core's messages only) is queued in its inbox's ``queue``
        (``Poller.batch``), each link's in its peer's lane (``inbox.lane(peer)``)."""
        if slot < 0 or self._closed:
            return
        self.queues[slot] = queue
        self.slot_owners[slot] = owner
        self.slot_inboxes[slot] = inbox
        for token in self.tokens.values():  # links attached before the queue was
            if self._table.links[token.index].socket_slot == slot:
                queue.attach(token.index, inbox.lane(token.peer))

    def send_door(self, lock: Any, slot: int, backlog: dict[Any, Any], fallback: Any) -> Any:
        """The native ``send`` of the socket of ``slot`` (None: not available); see
        :func:`exon.native.socket_send_door`."""
        if slot < 0 or self._closed:
            return None
        return socket_send_door(lock, self._table, slot, backlog, fallback)

    def receive_door(self, lock: Any, queue: Any, fallback: Any) -> Any:
        """The native ``receive`` of a plain socket over its queue (None: not available);
        see :func:`exon.native.socket_receive_door`."""
        if self._closed:
            return None
        return socket_receive_door(lock, queue, fallback)

    def pub_door(self, lock: Any, slot: int, backlog: dict[Any, Any], fallback: Any,
                 rest: Any) -> Any:
        """The native ``send`` of the PUB of ``slot`` (None: not available); see
        :func:`exon.native.pub_send_door`."""
        if slot < 0 or self._closed:
            return None
        return pub_send_door(lock, self._table, slot, backlog, fallback, rest)

    def sub_door(self, lock: Any, queue: Any, message_type: type, fallback: Any) -> Any:
        """The native ``receive`` of a SUB over its queue (None: not available); see
        :func:`exon.native.sub_receive_door`."""
        if self._closed:
            return None
        return sub_receive_door(lock, queue, message_type, fallback)

    def target(self, token: FastLink) -> tuple[int, int, int, int]:
        """(link, peer key, destination tag, peer incarnation) of an attached link: its
        identity as a PUB's door checks it."""
        rec = self._table.links[token.index]
        return token.index, int(rec.peer_key), int(rec.destination_tag), int(rec.peer_incarnation)

    def open_routes(self, slot: int) -> Any:
        """The PeerRoutes of the socket of ``slot`` (None: not available): the socket routes
        a link (``routes.set(index, peer)``) once it knows the link needs no framing; the
        link's route goes when it detaches."""
        if slot < 0 or self._closed:
            return None
        routes = self.routes[slot] = peer_routes(self._capacity)
        return routes

    def peer_send_door(self, lock: Any, slot: int, backlog: dict[Any, Any], routes: Any,
                       fallback: Any, *, takes_peer: bool) -> Any:
        """The native ``send`` of a ROUTER or DEALER (None: not available); see
        :func:`exon.native.peer_send_door`."""
        if slot < 0 or self._closed or routes is None:
            return None
        return peer_send_door(lock, self._table, slot, backlog, routes, fallback,
                              takes_peer=takes_peer)

    def peer_receive_door(self, lock: Any, queue: Any, routes: Any, message_type: type,
                          fallback: Any) -> Any:
        """The native ``receive`` of a ROUTER or DEALER over its queue (None: not
        available); see :func:`exon.native.peer_receive_door`."""
        if self._closed or queue is None or routes is None:
            return None
        return peer_receive_door(lock, queue, routes, message_type, fallback)

    def close_socket(self, tag: int) -> None:
        slot = self.slots.pop(tag, None)
        if slot is not None:
            self.routes.pop(slot, None)
            self.queues[slot] = None
            self.slot_owners.pop(slot, None)
            self.slot_inboxes.pop(slot, None)
            self._free_slots.append(slot)

    def key_of(self, address: str) -> int:
        key = self.keys.get(address)
        if key is None:
            key = self.keys[address] = len(self.keys)
        return key

    # ---- LinkAccelerator ----------------------------------------------------------------

    def attach(self, tag: int, peer: PeerId, incarnation: int, peer_incarnation: int,
               ledger: CreditLedger, peer_max_size: int, max_size: int, *,
               seal: Any = None) -> FastLink | None:
        if self._closed:
            return None
        slot = self.slots.get(tag)
        pub = self._publication_of(peer.address)
        if slot is None or pub is None or pub.is_closed:
            return None
        index = int(lib.exon_lt_reserve(self._table))
        if index < 0:
            return None  # table full: this link stays on the core's path
        rec = self._table.links[index]
        ledger.attach(rec)
        rec.batch = ledger.batch
        rec.capacity = ledger.capacity  # FLOWs of a due batch are sent natively
        rec.source_tag = tag
        rec.destination_tag = peer.tag
        rec.incarnation = incarnation
        rec.peer_incarnation = peer_incarnation
        rec.socket_slot = slot
        rec.max_out = min(peer_max_size, _MAX_PAYLOAD)
        rec.max_in = min(max_size, _MAX_PAYLOAD)
        rec.peer_key = self.key_of(peer.address)
        if seal is not None:  # an encrypted link: its exon_seal_t (the core keeps it alive)
            rec.seal = seal
        if lib.exon_lt_activate(self._table, index, pub._pub) < 0:  # indexed, then live
            ledger.detach()
            lib.exon_lt_detach(self._table, index)
            return None  # a duplicate of a live link: this one stays on the core's path
        token = FastLink(index, tag, peer, incarnation)
        queue = self.queues[slot]
        if queue is not None:
            queue.attach(index, self.slot_inboxes[slot].lane(peer))
        self.tokens[index] = token
        self.by_link[(tag, peer)] = token
        return token

    def set_window(self, token: FastLink | None, capacity: int, batch: int) -> None:
        """The core resized the link's receive window (memory budget); 0: the core sends
        every FLOW of the link."""
        if token is not None and token.attached:
            rec = self._table.links[token.index]
            rec.capacity = capacity
            rec.batch = batch

    def detach(self, token: FastLink | None) -> None:
        if token is None or not token.attached:
            return
        slot = self._table.links[token.index].socket_slot
        queue = self.queues[slot] if 0 <= slot < self._socket_capacity else None
        if queue is not None:  # its messages queued stay, counted by the core from now on
            queue.detach(token.index, token.incarnation)
        routes = self.routes.get(slot)
        if routes is not None:
            routes.drop(token.index)
        token.attached = False
        lib.exon_lt_detach(self._table, token.index)
        if self.tokens.get(token.index) is token:
            del self.tokens[token.index]
        if self.by_link.get((token.tag, token.peer)) is token:
            del self.by_link[(token.tag, token.peer)]

    # ---- FLOW timers ------------------------------------------------------------------------

    def set_flow_delay(self, seconds: float) -> None:
        """Keep the FLOW timers of attached links here (natively) with this delay; 0 leaves
        every FLOW timer to the core (see ``exon_link_table_t.flow_delay_ns``)."""
        lib.exon_lt_set_flow_delay(self._table, int(seconds * 1e9))

    def flush_flows(self) -> int:
        """Send the FLOWs whose timers expired (lock held); the number sent."""
        if self._table.flow_count == 0:
            return 0
        return int(lib.exon_lt_flush_flows(self._table, lib.exon_nano_clock_ns()))

    def next_flow_in(self) -> float | None:
        """Seconds until the next native FLOW timer expires (0 if overdue), or None."""
        if self._table.flow_count == 0:
            return None
        due_ns: int = lib.exon_lt_next_flow_ns(self._table) - lib.exon_nano_clock_ns()
        return max(0.0, due_ns / 1e9)

    def record(self, token: FastLink) -> Any:
        """The table entry of an attached link (tests, diagnostics)."""
        if not token.attached:
            raise errors.StateError("the link is not attached")
        return self._table.links[token.index]

    # ---- polling --------------------------------------------------------------------------

    @property
    def malformed_dropped(self) -> int:
        """Messages ``exon_lt_poll`` dropped as malformed (no exon frame at all)."""
        return 0 if self._closed else int(self._table.malformed_dropped)

    @property
    def unopened_dropped(self) -> int:
        """Sealed frames of attached encrypted links that ``exon_lt_classify`` dropped
        because they did not open (opened in place, so never handed to the core)."""
        return 0 if self._closed else int(self._table.unopened_dropped)

    def poller(self, limit: int) -> Poller:
        return Poller(self._table, limit)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.queues = [None] * self._socket_capacity
            self.slot_owners.clear()
            self.slot_inboxes.clear()
            self.routes.clear()
            for token in list(self.tokens.values()):
                token.attached = False
            self.tokens.clear()
            self.by_link.clear()
            lib.exon_lt_close(self._table)


class Poller:
    """Buffers for ``exon_lt_poll``: one copy buffer and one descriptor array, reused.

    :meth:`batch` (lock held) polls, classifies and dispatches one batch in one GIL-holding
    call of the fast door (``poll_batch``)."""

    def __init__(self, table: Any, limit: int, copy_capacity: int = 1 << 20) -> None:
        self._table = table
        self.limit = limit
        self._descs = ffi.new("exon_lt_desc_t[]", limit)
        self._ints = memoryview(ffi.buffer(self._descs)).cast("i")
        self._scratch = ffi.new("exon_fragment_t[]", limit)
        self._used = ffi.new("int32_t *")
        self._images: Any = None
        self._keys: Any = None
        self._count = 0
        self._native_args: tuple[int, ...] = ()
        self._set_copy(copy_capacity)

    def _set_copy(self, capacity: int) -> None:
        self._copy = ffi.new("uint8_t[]", capacity)
        self._copy_cap = capacity
        self._view = ffi.buffer(self._copy, capacity)
        self._bind_native()

    def _bind_native(self) -> None:
        """The integer arguments of the fast door's poll_batch for the current buffers."""
        self._native_args = (
            address_of(self._table),
            0 if self._images is None else address_of(self._images),
            self._count, self.limit,
            address_of(self._copy), self._copy_cap, address_of(self._used),
            address_of(self._descs), address_of(self._scratch),
            0 if self._keys is None else address_of(self._keys))

    def set_images(self, images: list[Any], keys: list[int]) -> None:
        self._count = len(images)
        self._images = ffi.new("exon_image_t *[]", [img.cdata for img in images]) if images \
            else None
        self._keys = ffi.new("int32_t[]", keys) if images else None
        self._bind_native()

    def set_key(self, index: int, key: int) -> None:
        self._keys[index] = key

    def batch(self, queues: list[Any]) -> tuple[int, int, list[int]]:
        """Poll the images, classify the messages and queue the fast DATA into the native
        receive queues (``queues`` by socket slot): (messages, descriptors left for the
        caller to look at, slots touched). Lock held."""
        if not self._count:
            return 0, 0, []
        while True:
            n, left, touched = fast_poll_batch(*self._native_args, queues)
            if n >= 0:
                return n, left, touched
            if n == lib.EXON_E_FULL:
                self._set_copy(max(int(self._used[0]), 2 * self._copy_cap))
                continue
            check(n, "poll")

    def note_garbage(self, index: int) -> None:
        """A message of image ``index`` (of the last :meth:`batch`) was garbage to the
        core: count it as the native poll counts a malformed one, for that image's share
        (``exon_lt_poll``; nothing else reads the count)."""
        if self._images is not None and 0 <= index < self._count:
            self._images[index].lt_malformed += 1

    def descriptors(self) -> tuple[Any, Any]:
        """After :meth:`batch`: (int32 view of the descriptors: link, image, offset,
        length, slot per message; a memoryview of the copy buffer). The view is valid
        until the next :meth:`batch` overwrites (or replaces) the buffer: copy what you
        keep (no copy of the whole batch is made here; most of it went to the native
        queues already)."""
        return self._ints, memoryview(self._view)[0 : self._used[0]]
