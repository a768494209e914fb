"""The native doors of the sockets that name their peers: ROUTER and DEALER.

A ROUTER's ``send(data, peer=msg.peer)``, a DEALER's ``send(data)`` and both sockets'
``receive()`` run as single native calls (``exon_fast_peers.c``: PeerSend, PeerReceive)
over the socket's ``PeerRoutes``: per attached link that needs no envelope (a ROUTER's DEALER
peers, a DEALER's ROUTER peers; not the REQ and REP peers, whose envelopes the Python
methods add and strip) the public :class:`~exon.sockets.messages.Peer` its messages carry.

* ``receive``: the door pops the inbox when no cookie waits (``direct``) and
  the link of the next message (fair-queued) is routed; it builds the same ``Message``
  ``_accept_locked`` would.
* ``send`` with ``peer=``: the door sends on the peer's link when ``peer`` is the very Peer
  object routed (a received message's ``.peer``) and the link has credit; a DEALER's
  ``send`` goes round-robin natively while no REP is linked (``routes.round_robin``).

Everything else -- a peer given as a string or an equal Peer built elsewhere, an unknown or
unlinked peer (the method raises :class:`exon.SocketNotLinked`), no credit, a timeout
wait, a cookie, the node's backlog, a closed socket (its doors are disabled) -- goes to the
socket's Python method with the caller's arguments. A link's route is set when the socket
learns its peer's type (``LinkEstablished``, for the incarnation still attached) and goes
the moment the link detaches (``FastLinks.detach``), before its index can be reused.
"""

from __future__ import annotations

from typing import Any

from exon.core import LinkEstablished
from exon.sockets.messages import Message
from exon.sockets.socket import Socket

__all__ = ["RoutedDoorsMixin"]


class RoutedDoorsMixin(Socket):
    """Installs the PeerSend/PeerReceive doors of a ROUTER or DEALER and keeps its routes."""

    #: the peer socket type whose links need an envelope (never routed natively)
    _framed_peer_type: str = ""

    #: the socket's PeerRoutes (exon_fast_peers.c), None without a link-table slot (or once the
    #: node closed)
    _routes: Any = None

    def _open_doors(self, own_send: Any, *, takes_peer: bool) -> None:
        """Install the doors (from the subclass's ``__init__``): ``own_send`` is the class's
        ``send`` function, the door's fallback (a subclass's own send keeps its method)."""
        host = self._host
        fast = host.fast
        with self._lock:
            self._routes = fast.open_routes(self._fast_slot)
            if self._routes is None or self._closed:
                return
            cls = type(self)
            if cls.send is own_send:
                door = fast.peer_send_door(host.lock, self._fast_slot, host.backlog,
                                           self._routes, own_send.__get__(self),
                                           takes_peer=takes_peer)
                if door is not None:
                    self._doors.append(door)
                    self.send = door  # type: ignore[method-assign]
            if (cls.receive is Socket.receive and self._inbox.nq is not None
                    and cls._may_take_message is Socket._may_take_message):
                door = fast.peer_receive_door(host.lock, self._inbox.nq, self._routes, Message,
                                              Socket.receive.__get__(self))
                if door is not None:
                    self._doors.append(door)
                    self.receive = door  # type: ignore[method-assign]
                    self._sync_direct()

    def _route_established(self, ev: LinkEstablished) -> None:
        """Lock held: route the link of ``ev`` when it is still the attached incarnation and
        needs no envelope; otherwise make sure it has no route."""
        routes = self._routes
        if routes is None:
            return
        token = self._host.fast.by_link.get((self.tag, ev.peer))
        if token is None or not token.attached or token.incarnation != ev.incarnation:
            return  # detached since (its route went with it), or a later link is attached
        public = self._host.peer(ev.peer)
        if public is None or ev.peer_metadata.socket_type == self._framed_peer_type:
            routes.drop(token.index)
        else:
            routes.set(token.index, public)
