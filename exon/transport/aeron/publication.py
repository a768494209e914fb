"""Publications: append messages to a log buffer (Aeron's Publication and ExclusivePublication).

``offer(data)`` returns the new stream position (> 0) or one of Aeron's outcome codes,
exported here as constants: :data:`NOT_CONNECTED`, :data:`BACK_PRESSURED`,
:data:`ADMIN_ACTION`, :data:`CLOSED`, :data:`MAX_POSITION_EXCEEDED`. A message longer than
:attr:`~Publication.max_message_length` raises :class:`~exon.errors.MessageTooLarge` and
leaves the log untouched.

Each ``offer`` is one C call (the GIL is released inside it). :class:`Publication` is safe
to offer to from many threads (and processes, through the same log); an
:class:`ExclusivePublication` must have one writer at a time.

``close()`` may come from any thread: later offers return :data:`CLOSED`, ``position`` is
where the stream stopped, and the log stays mapped until the calls in progress and the open
:class:`Claim` objects are done (a claim committed after the close is written, but nobody
may read it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from exon import errors
from exon.native import check, error_for, fast_offer, ffi, lib
from exon.transport.aeron.logbuffer import LogBuffer, LogUser

__all__ = [
    "ADMIN_ACTION",
    "BACK_PRESSURED",
    "CLOSED",
    "MAX_POSITION_EXCEEDED",
    "NOT_CONNECTED",
    "Claim",
    "ClaimRefused",
    "ExclusivePublication",
    "Publication",
    "outcome_name",
]

NOT_CONNECTED: Final = -1
BACK_PRESSURED: Final = -2
ADMIN_ACTION: Final = -3
CLOSED: Final = -4
MAX_POSITION_EXCEEDED: Final = -5

_NAMES = {
    NOT_CONNECTED: "NOT_CONNECTED",
    BACK_PRESSURED: "BACK_PRESSURED",
    ADMIN_ACTION: "ADMIN_ACTION",
    CLOSED: "CLOSED",
    MAX_POSITION_EXCEEDED: "MAX_POSITION_EXCEEDED",
}


def outcome_name(code: int) -> str:
    """Name of an offer outcome code (or ``"POSITION"`` for a position)."""
    return _NAMES.get(code, "POSITION" if code >= 0 else f"ERROR({code})")


class ClaimRefused(errors.BackPressured):
    """``try_claim`` found no room; ``code`` is the Aeron outcome (e.g. BACK_PRESSURED)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"try_claim refused: {outcome_name(code)}")
        self.code = code


class Claim:
    """A claimed frame: write into :attr:`buffer`, then :meth:`commit` or :meth:`abort`.

    As a context manager it yields the buffer, commits on normal exit and aborts (the frame
    becomes padding that readers skip) on an exception, so a half-written frame never leaks.
    """

    __slots__ = ("_claim", "_done", "_pub", "buffer", "position")

    def __init__(self, pub: _PublicationBase, claim: Any, position: int) -> None:
        # holds one use of ``pub`` (taken by try_claim) until commit, abort or collection:
        # a publication closed meanwhile keeps its log mapped for the claim's writes
        self._pub = pub
        self._claim = claim
        self._done = False
        self.position = position
        self.buffer = memoryview(ffi.buffer(claim.data, claim.length))

    @property
    def length(self) -> int:
        return len(self.buffer)

    def set_reserved_value(self, value: int) -> None:
        lib.exon_claim_set_reserved_value(self._claim, value)

    def commit(self) -> int:
        """Publish the frame; returns the position after it."""
        self._finish(lib.exon_claim_commit)
        return self.position

    def abort(self) -> None:
        """Turn the frame into padding."""
        self._finish(lib.exon_claim_abort)

    def _finish(self, fn: Callable[[Any], int]) -> None:
        if self._done:
            raise errors.StateError("claim already committed or aborted")
        self._done = True
        self.buffer.release()
        try:
            check(fn(self._claim))
        finally:
            self._pub._leave()

    def __del__(self) -> None:
        if not self._done:  # dropped unfinished: give its publication's use back
            self._done = True
            self._pub._leave()

    def __enter__(self) -> memoryview:
        return self.buffer

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._done:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class _PublicationBase(LogUser):
    _exclusive = 0
    #: set by ``AeronClient.add_publication`` (a publication made there, not in a test):
    #: the channel it was added on and the driver's registration id of the shared log
    channel: str
    original_registration_id: int

    def __init__(
        self,
        log: LogBuffer,
        position_limit: Any,
        counters_values: Any = None,
        *,
        registration_id: int = 0,
        on_close: Callable[[_PublicationBase], None] | None = None,
        owns_log: bool = False,
    ) -> None:
        """``position_limit`` is an ``int64_t *`` (the pub-lmt counter, or a test's own
        ``ffi.new("int64_t[...]")``); ``counters_values`` the counters base (doorbells)."""
        self._init_log_user(log, on_close, owns_log)
        #: native calls that read the log (offer2, try_claim, position) and open claims in
        #: progress: close() leaves the owned log mapped until the last one has left, as
        #: unmapping it under them crashed the process (offers through the fast door hold
        #: the GIL, so no close runs during one)
        self._users = 0
        self._users_lock = threading.Lock()
        self._unmap_pending = False
        self._final_position = 0  #: position once closed: where the stream stopped
        self._final_limit = 0  #: position_limit once closed
        self.registration_id = registration_id
        self._limit = position_limit
        self._counters = counters_values if counters_values is not None else ffi.NULL
        pub = ffi.new("exon_publication_t *")
        check(lib.exon_publication_init(pub, log.cdata, position_limit, self._counters,
                                        self._exclusive))
        self._pub = pub
        # the offer callable outlives this object when a caller keeps it: it holds what
        # the C struct points to (the limit cell, the log's handle and mapping, the
        # counters), not just the struct, or an offer after this object went reads freed
        # memory (ASan: heap-use-after-free in begin_append)
        keep = (pub, position_limit, log, self._counters)
        self.offer = self._make_offer(pub, keep)  # type: ignore[method-assign]

    @classmethod
    def standalone(
        cls, log: LogBuffer, *, limit: int | None = None, owns_log: bool = False
    ) -> _PublicationBase:
        """A publication with its own position-limit cell (tests, benchmarks). The limit
        starts at ``limit`` (default: one term window) and is set through
        :attr:`position_limit`."""
        cell = ffi.new("int64_t[16]")  # a padded cache line of its own
        cell[0] = log.term_length // 2 if limit is None else limit
        return cls(log, cell, owns_log=owns_log)

    @staticmethod
    def _make_offer(pub: Any, keep: tuple[Any, ...]) -> Callable[..., int]:
        """The offer callable of ``pub`` (``keep[0]``); it holds ``keep``, everything
        ``pub`` points to."""

        def on_error(rc: int) -> int:
            raise error_for(rc, "offer")

        return fast_offer(pub, on_error, keep)  # type: ignore[no-any-return]

    def offer(self, data: bytes | bytearray | memoryview, reserved_value: int = 0) -> int:
        """Append ``data`` as one message: new position, or an outcome code < 0."""
        raise NotImplementedError  # replaced per instance by a closure (fast path)

    def offer2(
        self,
        head: bytes | bytearray | memoryview,
        body: bytes | bytearray | memoryview,
        reserved_value: int = 0,
    ) -> int:
        """Append ``head + body`` as one message without joining them first."""
        a = head if type(head) is bytes else ffi.from_buffer(head)
        b = body if type(body) is bytes else ffi.from_buffer(body)
        if not self._enter():
            return CLOSED
        try:
            rc: int = lib.exon_publication_offer2(self._pub, a, len(a), b, len(b),
                                                  reserved_value)
        finally:
            self._leave()
        if rc < MAX_POSITION_EXCEEDED:
            raise error_for(rc, "offer")
        return rc

    def try_claim(self, length: int) -> Claim:
        """Claim room for one message of ``length`` <= :attr:`max_payload_length` bytes.

        Use as ``with pub.try_claim(n) as buf: buf[:] = ...``. Raises
        :class:`ClaimRefused` (a :class:`~exon.errors.BackPressured`) when the outcome is
        BACK_PRESSURED, NOT_CONNECTED, ADMIN_ACTION or MAX_POSITION_EXCEEDED, and
        :class:`~exon.errors.ClosedError` when closed.
        """
        claim = ffi.new("exon_claim_t *")
        if not self._enter():
            raise errors.ClosedError("publication is closed")
        try:
            rc = lib.exon_publication_try_claim(self._pub, length, claim)
        except BaseException:
            self._leave()
            raise
        if rc < 0:
            self._leave()
            if rc == CLOSED:
                raise errors.ClosedError("publication is closed")
            if rc < MAX_POSITION_EXCEEDED:
                raise error_for(rc, "try_claim")
            raise ClaimRefused(rc)
        return Claim(self, claim, rc)

    # ---- state --------------------------------------------------------------------

    @property
    def cdata(self) -> Any:
        """The ``exon_publication_t *``."""
        return self._pub

    def _enter(self) -> bool:
        """Take a use of the log for a native call; False once closed."""
        with self._users_lock:
            if self._closed:
                return False
            self._users += 1
            return True

    def _leave(self) -> None:
        """Give a use back; the last one out of a closed publication unmaps its log."""
        with self._users_lock:
            self._users -= 1
            unmap = self._unmap_pending and self._users == 0
            if unmap:
                self._unmap_pending = False
        if unmap:
            self.log.close()

    def _close_log(self) -> None:
        with self._users_lock:
            if self._users:
                self._unmap_pending = True  # the last call or claim out unmaps it
                return
        self.log.close()

    @property
    def position(self) -> int:
        """The position after the last message appended; once closed, where it stopped."""
        if not self._enter():
            return self._final_position
        try:
            return int(lib.exon_publication_position(self._pub))
        finally:
            self._leave()

    @property
    def position_limit(self) -> int:
        """The flow-control limit (the driver's pub-lmt counter); once closed, its value at
        close (the counter lives in the client's mapping, gone when the client closes)."""
        if not self._enter():
            return self._final_limit
        try:
            return int(lib.exon_publication_position_limit(self._pub))
        finally:
            self._leave()

    @position_limit.setter
    def position_limit(self, value: int) -> None:
        if self._closed:
            raise errors.ClosedError("publication is closed")
        self._limit[0] = value

    @property
    def max_message_length(self) -> int:
        return int(self._pub.max_message_length)

    @property
    def max_payload_length(self) -> int:
        return int(self._pub.max_payload_length)

    @property
    def session_id(self) -> int:
        return int(self._pub.session_id)

    @property
    def stream_id(self) -> int:
        return int(self._pub.stream_id)

    @property
    def is_connected(self) -> bool:
        if not self._enter():
            return False
        try:
            return bool(lib.exon_publication_is_connected(self._pub))
        finally:
            self._leave()

    def _close_native(self) -> None:
        """Later offers return CLOSED (close() is idempotent)."""
        if not self.log.closed:  # (a standalone's log may have been closed by its owner)
            self._final_position = int(lib.exon_publication_position(self._pub))
        self._final_limit = int(lib.exon_publication_position_limit(self._pub))
        lib.exon_publication_close(self._pub)

    def __repr__(self) -> str:
        kind = type(self).__name__
        return (f"<{kind} session={self.session_id} stream={self.stream_id} "
                f"position={self.position if not self.log.closed or self._closed else '?'}>")


class Publication(_PublicationBase):
    """A concurrent publication: ``offer`` is thread-safe (atomic add on the tail in C)."""

    _exclusive = 0


class ExclusivePublication(_PublicationBase):
    """A single-writer publication: one thread offers at a time (cheaper: plain stores)."""

    _exclusive = 1
