"""Log buffer files: 3 term partitions plus Aeron's metadata, mapped from shared memory.

A thin face over ``exon_logbuffer.h``. The driver creates log files; clients (and tests)
open them. Every error from the C side arrives as an :mod:`exon.errors` exception:
a corrupt or truncated file raises :class:`~exon.errors.LogBufferError` naming the file
and the bad field; bad creation parameters raise :class:`~exon.errors.ConfigurationError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Self

from exon.errors import ClosedError
from exon.native import check, ffi, lib
from exon.transport.aeron import layout as L

__all__ = ["LogBuffer", "LogUser"]


class LogBuffer:
    """One mapped log buffer file (``exon_log_t``).

    Not thread-safe to close while other threads use publications or images over it.
    """

    __slots__ = ("__weakref__", "_clean_position", "_log", "path")

    def __init__(self, log: Any, path: str) -> None:
        self._log = log
        self.path = path
        self._clean_position = ffi.new("int64_t *", 0)

    # ---- construction -------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        term_length: int,
        mtu: int = 1408,
        initial_term_id: int = 0,
        session_id: int = 0,
        stream_id: int = 0,
        correlation_id: int = 0,
        page_size: int = L.PAGE_MIN_SIZE,
        publication_window_length: int = 0,
        receiver_window_length: int = 0,
        log_type: int = L.LOG_TYPE_CONCURRENT_PUBLICATION,
        is_connected: bool = False,
        sparse: bool = False,
    ) -> LogBuffer:
        """Create and map a new log file (fails if ``path`` exists)."""
        params = ffi.new(
            "exon_log_params_t *",
            {
                "term_length": term_length,
                "mtu": mtu,
                "page_size": page_size,
                "initial_term_id": initial_term_id,
                "session_id": session_id,
                "stream_id": stream_id,
                "correlation_id": correlation_id,
                "publication_window_length": publication_window_length,
                "receiver_window_length": receiver_window_length,
                "type": log_type,
                "is_connected": int(is_connected),
                "sparse": int(sparse),
            },
        )
        log = ffi.new("exon_log_t *")
        spath = os.fspath(path)
        check(lib.exon_log_create(log, spath.encode(), params))
        return cls(log, spath)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> LogBuffer:
        """Map an existing log file, validating it."""
        log = ffi.new("exon_log_t *")
        spath = os.fspath(path)
        check(lib.exon_log_open(log, spath.encode()))
        return cls(log, spath)

    def close(self) -> None:
        """Unmap the file (idempotent). Publications and images over it must be closed first."""
        if self._log.addr != ffi.NULL:
            check(lib.exon_log_close(self._log))

    def unlink(self) -> None:
        """Remove the file (the mapping stays valid until :meth:`close`)."""
        check(lib.exon_log_unlink(self.path.encode()))

    def __enter__(self) -> LogBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"term_length={self.term_length}"
        return f"<LogBuffer {self.path} {state}>"

    # ---- native handles -----------------------------------------------------------

    @property
    def cdata(self) -> Any:
        """The ``exon_log_t *`` (for publications, images and the C driver)."""
        if self._log.addr == ffi.NULL:
            raise ClosedError(f"log buffer {self.path} is closed")
        return self._log

    @property
    def closed(self) -> bool:
        return bool(self._log.addr == ffi.NULL)

    @property
    def meta(self) -> Any:
        """The ``exon_log_metadata_t *`` in shared memory."""
        return self.cdata.meta

    # ---- properties ---------------------------------------------------------------

    @property
    def term_length(self) -> int:
        return int(self._log.term_length)

    @property
    def length(self) -> int:
        return int(self._log.length)

    @property
    def mtu(self) -> int:
        return int(self._log.mtu)

    @property
    def page_size(self) -> int:
        return int(self._log.page_size)

    @property
    def initial_term_id(self) -> int:
        return int(self._log.initial_term_id)

    @property
    def session_id(self) -> int:
        return int(self._log.session_id)

    @property
    def stream_id(self) -> int:
        return int(self._log.stream_id)

    @property
    def correlation_id(self) -> int:
        return int(self._log.correlation_id)

    @property
    def position_bits_to_shift(self) -> int:
        return int(self._log.position_bits_to_shift)

    @property
    def max_message_length(self) -> int:
        return int(self._log.max_message_length)

    @property
    def max_payload_length(self) -> int:
        return self.mtu - L.DATA_HEADER_LENGTH

    @property
    def is_connected(self) -> bool:
        return bool(self.meta.is_connected)

    @is_connected.setter
    def is_connected(self, value: bool) -> None:
        self.meta.is_connected = int(value)

    @property
    def end_of_stream_position(self) -> int:
        return int(self.meta.end_of_stream_position)

    @end_of_stream_position.setter
    def end_of_stream_position(self, position: int) -> None:
        lib.exon_log_set_end_of_stream(self.cdata, position)

    @property
    def active_term_count(self) -> int:
        return int(self.meta.active_term_count)

    @property
    def producer_position(self) -> int:
        """Position after the last claimed frame (from the active tail)."""
        return int(lib.exon_log_producer_position(self.cdata))

    @property
    def waiters(self) -> int:
        """Readers asleep on this log's doorbells."""
        return int(self.meta.exon_waiters)

    def add_doorbell(self, counter_id: int) -> None:
        """List a reader doorbell (a counter id) in the log's table."""
        check(lib.exon_log_add_doorbell(self.meta, counter_id))

    def remove_doorbell(self, counter_id: int) -> None:
        check(lib.exon_log_remove_doorbell(self.meta, counter_id))

    def term_buffer(self, index: int) -> memoryview:
        """A writable view of term partition ``index`` (0..2)."""
        if not 0 <= index < L.LOG_PARTITION_COUNT:
            raise IndexError(index)
        return memoryview(ffi.buffer(self.cdata.terms[index], self.term_length))

    def metadata_buffer(self) -> memoryview:
        """A writable view of the 4 KiB metadata block."""
        return memoryview(ffi.buffer(self.cdata.meta, L.LOG_META_DATA_LENGTH))

    # ---- driver duties (also used by tests that play the driver) -------------------

    @property
    def clean_position(self) -> int:
        return int(self._clean_position[0])

    def clean_to(self, position: int) -> int:
        """Zero the log behind ``position`` (Aeron: min subscriber position - term length)."""
        return int(lib.exon_log_clean_to(self.cdata, self._clean_position, position))

    def update_limit(self, limit: Any, min_subscriber_position: int, window: int = 0) -> int:
        """Play the driver: clean, then set ``limit[0]`` = slowest subscriber + window."""
        window = window or self.term_length // 2
        self.clean_to(min_subscriber_position - self.term_length)
        new_limit = min_subscriber_position + window
        limit[0] = new_limit
        return new_limit


class LogUser:
    """What Image and the publications share around a log: ``is_closed``, an idempotent
    ``close()`` (marks closed, ``_close_native()``, then ``on_close(self)``, then closes the
    log when it owns it) and the context manager that closes."""

    log: LogBuffer
    _closed: bool
    _on_close: Callable[[Any], None] | None
    _owns_log: bool

    def _init_log_user(
        self, log: LogBuffer, on_close: Callable[[Any], None] | None, owns_log: bool
    ) -> None:
        self.log = log
        self._on_close = on_close
        self._owns_log = owns_log
        self._closed = False

    def _close_native(self) -> None:
        raise NotImplementedError

    @property
    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Idempotent; see the class for the order of things."""
        if self._closed:
            return
        self._closed = True
        self._close_native()
        if self._on_close is not None:
            self._on_close(self)
        if self._owns_log:
            self._close_log()

    def _close_log(self) -> None:
        """Unmap the owned log (a publication defers it while calls or claims use it)."""
        self.log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
