"""Images: read whole messages from a log buffer, from the subscriber position.

A thin face over ``exon_image.h``. One C call pulls a batch of whole (reassembled)
messages, copied into a private buffer, and advances the subscriber position; Python then
hands each message to the handler as ``bytes``, so the data stays valid after the position
moves on. One thread polls an image at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from exon.errors import ClosedError, LogBufferError
from exon.native import check, error_for, ffi, lib
from exon.transport.aeron.logbuffer import LogBuffer, LogUser

__all__ = ["FragmentHeader", "Image"]

_INITIAL_COPY_CAPACITY = 64 * 1024
_DEFAULT_BATCH = 256
_MAX_POSITION = (1 << 63) - 1  #: end of stream not set (the log's initial value)
# exon_fragment_t seen as int32s: record stride, index of `offset` (`length` follows it)
_STRIDE = ffi.sizeof("exon_fragment_t") // 4
_OFFSET = ffi.offsetof("exon_fragment_t", "offset") // 4
assert ffi.offsetof("exon_fragment_t", "length") == ffi.offsetof("exon_fragment_t", "offset") + 4


class FragmentHeader:
    """Header of the message being handled; valid only during the handler call (it is
    reused for the next message, as in Aeron)."""

    __slots__ = ("_frag", "_i")

    def __init__(self, frags: Any) -> None:
        self._frag = frags
        self._i = 0

    @property
    def position(self) -> int:
        """Stream position just after the message."""
        return int(self._frag[self._i].position)

    @property
    def reserved_value(self) -> int:
        return int(self._frag[self._i].reserved_value)

    @property
    def session_id(self) -> int:
        return int(self._frag[self._i].session_id)

    @property
    def stream_id(self) -> int:
        return int(self._frag[self._i].stream_id)

    @property
    def term_id(self) -> int:
        return int(self._frag[self._i].term_id)

    @property
    def term_offset(self) -> int:
        return int(self._frag[self._i].term_offset)

    @property
    def flags(self) -> int:
        return int(self._frag[self._i].flags)

    @property
    def fragments(self) -> int:
        """How many frames the message spanned (1 when unfragmented)."""
        return int(self._frag[self._i].fragments)


class Image(LogUser):
    """One publication's stream as seen by one subscription (``exon_image_t``)."""

    def __init__(
        self,
        log: LogBuffer,
        subscriber_position: Any,
        counters_values: Any = None,
        *,
        correlation_id: int = 0,
        on_close: Callable[[Image], None] | None = None,
        owns_log: bool = False,
    ) -> None:
        """``subscriber_position`` is an ``int64_t *`` (the sub-pos counter, or a test's
        own cell) holding the start position."""
        self._init_log_user(log, on_close, owns_log)
        #: held by every native call that reads the log, and by close(): a thread that
        #: closes the image (or its client) while another polls waits for that poll to
        #: end instead of unmapping the log under it (polls never block)
        self._busy = threading.RLock()
        #: held by the short native calls that a wait() must not block (position), and by
        #: close() while it closes the native image: such a call in another thread ends
        #: before the log and the sub-pos counter go away, or finds the image closed
        self._short = threading.Lock()
        self._closing = False  #: close() began: no new native call starts
        self._waiting_on: Any = None  #: the doorbell a wait() sleeps on (close rings it)
        self._final_end_of_stream = _MAX_POSITION  #: end_of_stream_position once closed
        self._final_position = 0  #: position once closed
        self.correlation_id = correlation_id
        self._position_cell = subscriber_position
        self._counters = counters_values if counters_values is not None else ffi.NULL
        img = ffi.new("exon_image_t *")
        check(lib.exon_image_init(img, log.cdata, subscriber_position, self._counters))
        self._img = img
        self._used = ffi.new("int32_t *")
        self._new_batch(_DEFAULT_BATCH)
        self._set_copy_capacity(_INITIAL_COPY_CAPACITY)

    @classmethod
    def standalone(cls, log: LogBuffer, *, position: int = 0, owns_log: bool = False) -> Image:
        """An image with its own subscriber-position cell (tests, benchmarks)."""
        cell = ffi.new("int64_t[16]")
        cell[0] = position
        return cls(log, cell, owns_log=owns_log)

    def _set_copy_capacity(self, capacity: int) -> None:
        self._copy = ffi.new("uint8_t[]", capacity)
        self._copy_cap = capacity
        self._view = ffi.buffer(self._copy, capacity)

    def _new_batch(self, n: int) -> None:
        """Room for ``n`` fragment records (the batch only grows)."""
        self._frags = ffi.new("exon_fragment_t[]", n)
        self._nfrags = n
        self._header = FragmentHeader(self._frags)
        # int32 view of the batch: reading offset/length through it is much cheaper
        # than cdata attribute access on the hot path.
        self._ints = memoryview(ffi.buffer(self._frags)).cast("i")

    def _pull(self, limit: int) -> int:
        """One C call: up to ``limit`` fragments into the batch; returns the message count."""
        if limit > self._nfrags:
            self._new_batch(limit)
        while True:
            if self._closing:
                return 0
            with self._busy:
                if self._closed:
                    return 0
                n: int = lib.exon_image_poll(self._img, self._frags, limit, limit, self._copy,
                                             self._copy_cap, self._used)
            if n >= 0:
                return n
            if n == lib.EXON_E_FULL:
                # The next message is larger than the copy buffer: grow (bounded by the
                # log's maximum message length) and retry; nothing was lost.
                needed = int(self._used[0])
                if needed > self.log.max_message_length:
                    raise LogBufferError(f"log buffer {self.log.path}: message of {needed} "
                                         "bytes exceeds the maximum message length")
                self._set_copy_capacity(max(needed, 2 * self._copy_cap))
                continue
            raise error_for(n, "poll")

    def poll(
        self, handler: Callable[[bytes, FragmentHeader], object], fragment_limit: int = 10
    ) -> int:
        """Deliver up to ``fragment_limit`` frames' worth of whole messages to
        ``handler(data, header)``; returns the number of messages delivered. The limit
        never cuts a committed message in two, so 0 means nothing whole is waiting."""
        if self._closed:
            return 0
        n = self._pull(fragment_limit)
        if n:
            ints = self._ints
            data = self._view[0 : self._used[0]]  # one copy of the batch into a bytes
            header = self._header
            for i in range(n):
                k = i * _STRIDE + _OFFSET
                off = ints[k]
                header._i = i
                handler(data[off : off + ints[k + 1]], header)
        return n

    def poll_messages(self, limit: int = _DEFAULT_BATCH) -> list[bytes]:
        """Up to ``limit`` whole messages as ``bytes`` (fast path, no handler)."""
        if self._closed:
            return []
        n = self._pull(limit)
        if not n:
            return []
        ints = self._ints
        data = self._view[0 : self._used[0]]
        out: list[bytes] = []
        append = out.append
        for k in range(_OFFSET, n * _STRIDE, _STRIDE):
            off = ints[k]
            append(data[off : off + ints[k + 1]])
        return out

    def poll_count(self, fragment_limit: int = 4096) -> tuple[int, int]:
        """Consume frames without copying: ``(messages, payload bytes)``."""
        nbytes = ffi.new("int64_t *")
        with self._busy:
            if self._closed:
                return 0, 0
            n = check(lib.exon_image_poll_count(self._img, fragment_limit, nbytes))
        return n, int(nbytes[0])

    # ---- state --------------------------------------------------------------------

    @property
    def cdata(self) -> Any:
        """The ``exon_image_t *``."""
        return self._img

    @property
    def position(self) -> int:
        """The subscriber's position in this image (bytes consumed); once closed, where it
        stopped (the sub-pos counter lives in the client's mapping, gone when the client
        closes)."""
        with self._short:  # (not _busy: a wait() holds it while it sleeps)
            if self._closed:
                return self._final_position
            return int(lib.exon_image_position(self._img))

    @position.setter
    def position(self, value: int) -> None:
        with self._short:
            if self._closed:
                raise ClosedError("image is closed")
            check(lib.exon_image_set_position(self._img, value))

    @property
    def session_id(self) -> int:
        """The session id of the publication this image receives."""
        return self.log.session_id

    @property
    def stream_id(self) -> int:
        """The stream id of the image."""
        return self.log.stream_id

    @property
    def end_of_stream_position(self) -> int:
        """The position where the publication ended, once it has (else the maximum position)."""
        with self._busy:
            if self._closed:  # the log is unmapped: the value it had at close
                return self._final_end_of_stream
            return int(lib.exon_image_end_of_stream_position(self._img))

    @property
    def is_end_of_stream(self) -> bool:
        """Whether the subscriber has consumed up to the publication's end of stream."""
        with self._busy:
            if self._closed:
                return self.position >= self._final_end_of_stream
            return bool(lib.exon_image_is_end_of_stream(self._img))

    @property
    def available(self) -> bool:
        """True when a committed frame waits at the subscriber position."""
        with self._busy:
            return not self._closed and lib.exon_image_available(self._img) > 0

    def wait(self, doorbell: Any, timeout: float | None) -> bool:
        """Sleep (GIL released) until data arrives, the doorbell rings or ``timeout``
        seconds pass; True when data is available. ``doorbell`` is an ``int32_t *``."""
        arr = ffi.new("exon_image_t *[1]", [self._img])
        timeout_ns = -1 if timeout is None else int(timeout * 1e9)
        with self._busy:
            if self._closed:
                return False
            self._waiting_on = doorbell
            try:
                rc = lib.exon_image_wait(arr, 1, doorbell, timeout_ns)
            finally:
                self._waiting_on = None
        if rc == lib.EXON_E_TIMEOUT:
            return False
        return check(rc) == 1

    def close(self) -> None:
        """Stop reading and unmap (idempotent): waits for a poll running in another thread
        to end, and wakes a wait() there first."""
        self._closing = True
        busy = self._busy
        while not busy.acquire(timeout=0.05):
            doorbell = self._waiting_on
            if doorbell is not None:
                lib.exon_doorbell_ring(doorbell)
        try:
            with self._short:
                super().close()
        finally:
            busy.release()

    def _close_native(self) -> None:
        """Stop reading (close() is idempotent); frees the assembly buffer."""
        if not self.log.closed:  # (its owner may have closed a shared log first)
            self._final_end_of_stream = int(lib.exon_image_end_of_stream_position(self._img))
        self._final_position = int(lib.exon_image_position(self._img))
        lib.exon_image_close(self._img)

    def __repr__(self) -> str:
        return f"<Image session={self.session_id} stream={self.stream_id} position={self.position}>"
