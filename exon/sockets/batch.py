"""``send_many``: a batch of payloads, one native call per run of credit.

The walk (``exon_fast.c``: LinkSendMany) offers the payloads one after another into the
links' logs under their credits, in one call, and stops at the first payload it cannot send
at once (no credit left, too large, not ``bytes``, a back-pressured log, ...). That one
payload goes through the socket's own single-message path, which waits for credit, retries
or raises exactly as ``send`` does; then the walk goes on from the next. So a batch costs
one Python step per run of credit, not per message, and behaves as the same sends in a row.

The batch has one cookie (exon.sockets.batch_cookie), attached to the last message the
batch put on each link, while the node's lock is still held after sending it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from exon import errors
from exon.core import PeerId
from exon.middleware.fastpath import HOLD_BACKLOG, ROUND_ROBIN
from exon.sockets.batch_cookie import BatchCookie
from exon.sockets.socket import _payload
from exon.sockets.timeouts import deadline as _deadline

if TYPE_CHECKING:
    from exon.sockets.socket import Socket

__all__ = ["batch_error", "send_many"]


def batch_error(exc: errors.ExonError, sent: int, total: int) -> errors.ExonError:
    """``exc`` (raised for payload ``sent``) as the error of the batch: the same type, the
    message saying what went out, and ``sent`` as an attribute."""
    text = (f"send_many sent {sent} of {total} messages (payloads[:{sent}]); payload {sent} "
            f"failed and none after it was sent: {exc}")
    out: errors.ExonError
    if isinstance(exc, OSError):  # its args carry the errno: keep them, add a note
        exc.add_note(text)
        out = exc
    else:
        out = copy.copy(exc)
        out.args = (text,)
    out.sent = sent  # type: ignore[attr-defined]
    return out


def send_many(sock: Socket, payloads: Iterable[Any], cookie: Any,
              timeout: float | None) -> int:
    """Send ``payloads`` in order on ``sock`` (a socket that sends round-robin over its
    links); see ``PushSocket.send_many``. Returns how many were sent (all of them)."""
    deadline = _deadline(timeout)
    items = payloads if type(payloads) in (list, tuple) else list(payloads)
    total = len(items)  # type: ignore[arg-type]
    host = sock._host
    core = sock._core
    tag = sock.tag
    fast_many = host.fast.send_many
    batch = None if cookie is None else BatchCookie(cookie)
    touched: set[PeerId] = set()  # links sent on since their part was attached
    i = 0
    with sock._lock:
        sock._check_open()
        host.activity += 1
        try:
            while i < total:
                # the table's rule judges whether the run may go natively (none: j == i)
                before = None if batch is None else core.sent_counts(tag)
                j = fast_many(sock._fast_slot, ROUND_ROBIN, items, i,
                              HOLD_BACKLOG if host.backlog else 0)
                if before is not None and j > i:
                    touched.update(p for p, n in core.sent_counts(tag).items()
                                   if n != before.get(p))
                i = j
                if i == total:
                    break
                # the single-message path may wait, releasing the lock: parts first
                _attach(sock, batch, touched)
                dest = sock._send_locked(_payload(items[i]), None, None,  # type: ignore[index]
                                         deadline, False)
                if batch is not None:
                    touched.add(dest)
                i += 1
        except errors.ExonError as exc:
            raise batch_error(exc, i, total) from exc
        finally:
            _attach(sock, batch, touched)
            if batch is not None:
                outcome = batch.seal()
                if outcome is not None:
                    sock._on_cookie(cookie, lost=outcome)
                    sock.wakeup.notify_all()
            host.flush()
    return total


def _attach(sock: Socket, batch: BatchCookie | None, touched: set[PeerId]) -> None:
    """Give each link in ``touched`` a part of the batch's cookie, on its last message."""
    if batch is None or not touched:
        return
    core = sock._core
    for peer in touched:
        core.cookie_on_last_sent(sock.tag, peer, batch.part())
    touched.clear()
