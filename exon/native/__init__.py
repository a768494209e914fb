"""The one door to exon's compiled C core.

Only this module imports the cffi extension ``exon.native._exon``. Every C function
returns ``>= 0`` or a negative code (``-errno`` or ``EXON_E_*``); :func:`check` turns a
negative code into the matching :mod:`exon.errors` exception, with the C side's
thread-local error text as the message.
"""

from __future__ import annotations

import os
from typing import Any

from exon import errors

try:
    from exon.native._exon import ffi, lib
except ImportError as exc:  # pragma: no cover - only when the package was not built
    raise ImportError(
        "exon's C core is not built: install the package with `pip install -e .` "
        "(or run `python exon/native/build.py`)"
    ) from exc


def _address(pointer: Any) -> int:
    """A cdata pointer as the integer the fast door takes."""
    return int(ffi.cast("uintptr_t", pointer))


# The fast door (exon_fast.c) is part of every build (setup.py's ext_modules, build.py's
# in-place build): the Node, the sockets and the publications have no path without it.
try:
    import exon.native._fast as _fast
except ImportError as exc:  # pragma: no cover - only when the package was not built
    raise ImportError(
        "exon's fast door (exon.native._fast) is not built: install the package with "
        "`pip install -e .` (or run `python exon/native/build.py`)"
    ) from exc
# It calls the cffi module's own functions through these addresses.
_fast.bind(_address(ffi.addressof(lib, "exon_publication_offer")))
_fast.bind_links(_address(ffi.addressof(lib, "exon_lt_send")),
                 _address(ffi.addressof(lib, "exon_lt_deliver")),
                 _address(ffi.addressof(lib, "exon_lt_deliver_many")))
_fast.bind_poll(_address(ffi.addressof(lib, "exon_lt_poll")),
                _address(ffi.addressof(lib, "exon_lt_classify")))

__all__ = ["address_of", "check", "error_for", "fast_link_calls", "fast_link_send_many",
           "fast_offer", "fast_poll_batch", "fast_prefix_matches", "fast_recv_queue", "ffi",
           "last_error", "lib",
           "node_lock", "peer_receive_door", "peer_routes", "peer_send_door",
           "pub_send_door", "socket_receive_door", "socket_send_door", "sub_receive_door"]

_BY_CODE: dict[int, type[errors.ExonError]] = {
    lib.EXON_E_GENERIC: errors.TransportError,
    lib.EXON_E_DRIVER_TIMEOUT: errors.DriverTimeout,
    lib.EXON_E_CLIENT_CLOSED: errors.ClosedError,
    lib.EXON_E_CNC_VERSION: errors.CncError,
    lib.EXON_E_CNC_CORRUPT: errors.CncError,
    lib.EXON_E_LOG_CORRUPT: errors.LogBufferError,
    lib.EXON_E_MESSAGE_TOO_LARGE: errors.MessageTooLarge,
    lib.EXON_E_URI: errors.ChannelUriError,
    lib.EXON_E_DRIVER_ERROR: errors.DriverError,
    lib.EXON_E_TIMEOUT: errors.Timeout,
    lib.EXON_E_ARGUMENT: errors.ConfigurationError,
    lib.EXON_E_STATE: errors.StateError,
    lib.EXON_E_FULL: errors.BackPressured,
    lib.EXON_E_NO_SPACE: errors.ResourceExhausted,
    lib.EXON_E_UNAVAILABLE: errors.EncryptionUnavailable,
}


def last_error() -> str:
    """The C core's last error text on this thread."""
    text: bytes = ffi.string(lib.exon_last_error())
    return text.decode("utf-8", "replace")


def error_for(rc: int, what: str = "", detail: str | None = None) -> errors.ExonError:
    """The exception for a negative return code ``rc`` from the C core (``detail``: the
    error text, if not the core's own thread-local one: another module's, say)."""
    if detail is None:
        detail = last_error() if lib.exon_last_error_code() == rc else ""
    prefix = f"{what}: " if what else ""
    cls = _BY_CODE.get(rc)
    if cls is not None:
        return cls(prefix + (detail or cls.__doc__ or cls.__name__).strip())
    if -4096 < rc < 0:
        code = -rc
        text = detail or os.strerror(code)
        return errors.NativeOSError(code, prefix + text)
    return errors.TransportError(f"{prefix}unknown native error {rc}: {detail}")


def check(rc: int, what: str = "") -> int:
    """Return ``rc`` if it is ``>= 0``; otherwise raise the matching exon error."""
    if rc >= 0:
        return rc
    raise error_for(rc, what)


def fast_offer(publication: Any, on_error: Any, keep: Any = None) -> Any:
    """A callable ``offer(data, reserved_value=0)`` for an ``exon_publication_t *`` that
    holds the GIL through the (never blocking) append.

    ``on_error(rc)`` is called (and must raise) for a code below Aeron's outcomes. The
    callable keeps ``keep`` alive (default: the publication struct alone); pass everything
    the struct points to (its position-limit cell, its log) when the caller may drop them."""
    return _fast.Offer(_address(publication), on_error, publication if keep is None else keep)


def fast_link_calls(table: Any) -> tuple[Any, Any]:
    """``(send, deliver)`` GIL-holding callables over an ``exon_link_table_t *``:
    ``send(slot, link, data, hold=0)`` -> exon_lt_send_held's result (the link used, or
    why not: exon_lt_hold_reason(hold), then exon_lt_send's reasons), ``deliver(link)`` ->
    exon_lt_deliver's (``deliver(link, count)`` -> exon_lt_deliver_many's)."""
    address = _address(table)
    return _fast.LinkSend(address, table), _fast.LinkDeliver(address, table)


def fast_link_send_many(table: Any) -> Any:
    """A GIL-holding callable over an ``exon_link_table_t *``: ``send_many(slot, link,
    payloads, start, hold=0)`` (none sent while exon_lt_hold_reason(hold) holds them)
    offers ``payloads[start:]`` (a list or tuple of bytes) as
    exon_lt_send offers one, in one call, and returns the index of the first payload it did
    not send (``len(payloads)``: all); the caller sends that one its own way. Call it with
    the node's lock held, as ``send`` from :func:`fast_link_calls`."""
    return _fast.LinkSendMany(_address(table), table)


def fast_recv_queue(table: Any, on_due: Any, on_core: Any, message_type: type,
                    capacity: int) -> Any:
    """A socket's inbox, its one GIL-holding receive queue, over an ``exon_link_table_t *``
    of ``capacity`` links (``exon_fast_inbox.c``: ``RecvQueue``). ``on_due(link)``: a
    delivery counted on an attached link needs the core; ``on_core(peer, incarnation,
    count)``: deliveries for the core to count."""
    return _fast.RecvQueue(_address(table), table, on_due, on_core, message_type, capacity)


def node_lock() -> Any:
    """A Node's lock: ``exon_fast.c``'s NodeLock (threading.Lock's interface, shared with
    the sockets' doors)."""
    return _fast.NodeLock()


def socket_send_door(lock: Any, table: Any, slot: int, backlog: dict[Any, Any],
                     fallback: Any) -> Any:
    """A socket's ``send(data, *, cookie=None, timeout=None)`` as one native call over the
    link table (``exon_fast.c``: SocketSend); what it cannot finish at once goes to
    ``fallback`` with the same arguments. None unless ``lock`` is a NodeLock."""
    if type(lock) is not _fast.NodeLock:
        return None
    return _fast.SocketSend(lock, _address(table), table, slot, backlog, fallback)


def socket_receive_door(lock: Any, queue: Any, fallback: Any) -> Any:
    """A plain socket's ``receive(timeout=None)`` popping its native queue in one call
    (``exon_fast.c``: SocketReceive) while ``queue.direct`` is set; otherwise
    ``fallback``. None unless ``lock`` is a NodeLock."""
    if type(lock) is not _fast.NodeLock:
        return None
    return _fast.SocketReceive(lock, queue, fallback)


def pub_send_door(lock: Any, table: Any, slot: int, backlog: dict[Any, Any], fallback: Any,
                  rest: Any) -> Any:
    """A PUB's ``send(data, *, cookie=None, timeout=None)`` as one native call
    (``exon_fast_pubsub.c``: PubSend) while its targets are set (``door.set_targets``);
    otherwise ``fallback``. ``rest(payload, k)`` (lock held) sends to the targets from
    ``k`` on when an offer failed midway. None unless ``lock`` is a NodeLock."""
    if type(lock) is not _fast.NodeLock:
        return None
    return _fast.PubSend(lock, _address(table), table, slot, backlog, fallback, rest)


def sub_receive_door(lock: Any, queue: Any, message_type: type, fallback: Any) -> Any:
    """A SUB's ``receive(timeout=None)`` handing out the next published message of its
    native queue in one call while ``queue.pass_all`` and ``queue.direct`` are set
    (``exon_fast_pubsub.c``: SubReceive); otherwise ``fallback``. None unless ``lock`` is a
    NodeLock."""
    if type(lock) is not _fast.NodeLock:
        return None
    return _fast.SubReceive(lock, queue, message_type, fallback)


def peer_routes(capacity: int) -> Any:
    """The routed links of one ROUTER or DEALER for its doors (``exon_fast_peers.c``:
    PeerRoutes: ``set(link, peer)``, ``drop(link)``, ``link_of(peer)``, ``round_robin``)."""
    return _fast.PeerRoutes(capacity)


def peer_send_door(lock: Any, table: Any, slot: int, backlog: dict[Any, Any], routes: Any,
                   fallback: Any, *, takes_peer: bool) -> Any:
    """A ROUTER's or DEALER's ``send(data, *, peer=None, cookie=None, timeout=None)`` as one
    native call (``exon_fast_peers.c``: PeerSend): to a routed ``peer`` (``takes_peer``: the
    ROUTER's; a DEALER's door hands a ``peer`` keyword to ``fallback``), or round-robin
    while ``routes.round_robin``; anything else goes to ``fallback`` with the same
    arguments. None unless ``lock`` is a NodeLock."""
    if type(lock) is not _fast.NodeLock:
        return None
    return _fast.PeerSend(lock, _address(table), table, slot, backlog, routes, takes_peer,
                          fallback)


def peer_receive_door(lock: Any, queue: Any, routes: Any, message_type: type,
                      fallback: Any) -> Any:
    """A ROUTER's or DEALER's ``receive(timeout=None)`` popping its native queue in one call
    when the next message's link is routed (``exon_fast_peers.c``: PeerReceive); otherwise
    ``fallback``. None unless ``lock`` is a NodeLock."""
    if type(lock) is not _fast.NodeLock:
        return None
    return _fast.PeerReceive(lock, queue, routes, message_type, fallback)


def address_of(pointer: Any) -> int:
    """A cdata pointer as an integer (for :func:`fast_poll_batch`)."""
    return _address(pointer)


#: ``poll_batch(table, images, count, limit, copy, copy_cap, used, descs, scratch, keys,
#: queues) -> (n, left, touched)``: exon_lt_poll + exon_lt_classify + dispatch in one
#: GIL-holding call over integer addresses (``exon_fast.c``)
fast_poll_batch: Any = _fast.poll_batch
#: the PUB door's prefix rule (``exon_fast_pubsub.c`` pub_matches): ``(prefixes or None,
#: data) -> bool``; its Python twin is ``exon.core.pubsub.PrefixFilter.matches``
fast_prefix_matches: Any = _fast.prefix_matches
