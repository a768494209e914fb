"""The command-and-control file ``cnc.dat``, from Python; twin of ``exon_cnc_file.h``.

:meth:`CncFile.open` maps and validates a driver directory's ``cnc.dat`` (refusing a
missing, truncated, foreign or other-version file with a :class:`~exon.errors.CncError`
that names the file and what is wrong) and gives views of its sections, the driver's pid
and the age of its heartbeat. :meth:`CncFile.create` makes a fresh one (the driver does
this in C; tools and tests use it from Python).
"""

from __future__ import annotations

import enum
import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from exon import errors
from exon.native import check, ffi, last_error, lib

from .counters import CountersReader

CNC_FILE: Final = "cnc.dat"
CNC_VERSION: Final = 1
HEADER_LENGTH: Final = 1024
SECTION_ALIGNMENT: Final = 128


class Section(enum.IntEnum):
    """The sections of ``cnc.dat``, in file order."""

    TO_DRIVER = 0
    TO_CLIENTS = 1
    COUNTERS_METADATA = 2
    COUNTERS_VALUES = 3
    ERROR_LOG = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRecord:
    """One distinct error in the driver's error log."""

    observation_count: int
    """How many times this exact text was observed."""
    first_timestamp_ms: int
    """Epoch ms of the first observation."""
    last_timestamp_ms: int
    """Epoch ms of the latest observation."""
    text: str
    """The error text."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class CncFile:
    """A mapped ``cnc.dat``. Use :meth:`open` or :meth:`create`; close with :meth:`close`."""

    def __init__(self, handle: Any) -> None:
        self._cnc = handle
        self._counters: CountersReader | None = None

    # ---- construction ---------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, wait: float = 0.0) -> CncFile:
        """Map and validate ``directory/cnc.dat``.

        ``wait`` (seconds): keep retrying while the file is missing or not ready yet (a
        driver starting up). Raises :class:`~exon.errors.CncError` naming the file.
        """
        deadline = time.monotonic() + wait
        handle = ffi.new("exon_cnc_t *")
        while True:
            rc = lib.exon_cnc_open(handle, os.fsencode(directory))
            if rc >= 0:
                return cls(handle)
            retryable = rc in (-errno.ENOENT, -errno.EAGAIN)
            if not retryable or time.monotonic() >= deadline:
                raise errors.CncError(last_error() or f"{directory}/{CNC_FILE}: error {rc}")
            time.sleep(0.01)

    @classmethod
    def create(
        cls,
        directory: str | os.PathLike[str],
        *,
        to_driver_capacity: int = 1 << 20,
        to_clients_capacity: int = 1 << 20,
        counters_values_length: int = 1 << 20,
        error_log_length: int = 1 << 20,
        client_liveness_timeout_ns: int = 10_000_000_000,
        driver_timeout_ms: int = 10_000,
        driver_instance_id: int = 0,
    ) -> CncFile:
        """Create a fresh ``directory/cnc.dat`` (replacing any old one)."""
        config = ffi.new("exon_cnc_config_t *")
        lib.exon_cnc_config_defaults(config)
        config.to_driver_capacity = to_driver_capacity
        config.to_clients_capacity = to_clients_capacity
        config.counters_values_length = counters_values_length
        config.error_log_length = error_log_length
        config.client_liveness_timeout_ns = client_liveness_timeout_ns
        config.driver_timeout_ms = driver_timeout_ms
        config.driver_instance_id = driver_instance_id
        handle = ffi.new("exon_cnc_t *")
        check(lib.exon_cnc_create(handle, os.fsencode(directory), config), "create cnc")
        return cls(handle)

    def close(self) -> None:
        """Unmap the file (views taken from it become invalid)."""
        if self._cnc is not None and self._cnc.base != ffi.NULL:
            self._counters = None
            lib.exon_cnc_close(self._cnc)

    def __enter__(self) -> CncFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- header ---------------------------------------------------------------------

    @property
    def handle(self) -> Any:
        """The ``exon_cnc_t *`` (for C calls)."""
        return self._live()

    @property
    def path(self) -> Path:
        return Path(os.fsdecode(ffi.string(self._cnc.path)))

    @property
    def header(self) -> Any:
        """The ``exon_cnc_header_t *``."""
        return self._live().header

    @property
    def cnc_version(self) -> int:
        return int(self.header.cnc_version)

    @property
    def pid(self) -> int:
        """Process id of the driver that created the file."""
        return int(self.header.pid)

    @property
    def start_timestamp_ms(self) -> int:
        return int(self.header.start_timestamp_ms)

    @property
    def client_liveness_timeout_ns(self) -> int:
        return int(self.header.client_liveness_timeout_ns)

    @property
    def driver_timeout_ms(self) -> int:
        return int(self.header.driver_timeout_ms)

    @property
    def length(self) -> int:
        return int(self._live().length)

    # ---- sections -------------------------------------------------------------------

    def section_offset(self, section: Section) -> int:
        return int(lib.exon_cnc_section_offset(self.header, int(section)))

    def section_length(self, section: Section) -> int:
        return int(lib.exon_cnc_section_length(self.header, int(section)))

    def section_pointer(self, section: Section) -> Any:
        """``uint8_t *`` to the start of a section in this process's mapping."""
        return self._live().base + self.section_offset(section)

    def section(self, section: Section) -> memoryview:
        """A writable view of one section (valid until :meth:`close`)."""
        return memoryview(ffi.buffer(self.section_pointer(section), self.section_length(section)))

    # ---- driver heartbeat -----------------------------------------------------------

    def driver_heartbeat_ms(self) -> int:
        """The driver conductor's last heartbeat (epoch ms)."""
        return int(lib.exon_cnc_driver_heartbeat_ms(self._live()))

    def set_driver_heartbeat_ms(self, value_ms: int) -> None:
        lib.exon_cnc_set_driver_heartbeat_ms(self._live(), value_ms)

    def driver_heartbeat_age_ms(self, now: int | None = None) -> int:
        """Milliseconds since the driver's last heartbeat."""
        return (now_ms() if now is None else now) - self.driver_heartbeat_ms()

    def is_driver_alive(self, timeout_ms: int | None = None, *, now: int | None = None) -> bool:
        """True if the heartbeat is younger than ``timeout_ms`` (default: the CnC's)."""
        limit = self.driver_timeout_ms if timeout_ms is None else timeout_ms
        return self.driver_heartbeat_age_ms(now) <= limit

    # ---- counters and errors --------------------------------------------------------

    def counters(self) -> CountersReader:
        """A reader over this file's counters (shares the mapping)."""
        if self._counters is None:
            cnc = self._live()
            h = cnc.header
            self._counters = CountersReader(
                cnc.counters_metadata_buffer,
                h.counters_metadata_buffer_length,
                cnc.counters_values_buffer,
                h.counters_values_buffer_length,
                keepalive=self,
            )
        return self._counters

    def errors(self) -> list[ErrorRecord]:
        """The distinct errors the driver logged, oldest first."""
        cnc = self._live()
        buf = cnc.error_log_buffer
        length = cnc.header.error_log_buffer_length
        count, first, last = ffi.new("int32_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
        text_offset, text_length = ffi.new("int32_t *"), ffi.new("int32_t *")
        out: list[ErrorRecord] = []
        offset = 0
        while True:
            offset = lib.exon_error_log_read(
                buf, length, offset, count, first, last, text_offset, text_length
            )
            if offset <= 0:
                return out
            text = bytes(ffi.buffer(buf + text_offset[0], text_length[0]))
            out.append(
                ErrorRecord(
                    observation_count=int(count[0]),
                    first_timestamp_ms=int(first[0]),
                    last_timestamp_ms=int(last[0]),
                    text=text.decode("utf-8", "replace"),
                )
            )

    def _live(self) -> Any:
        if self._cnc is None or self._cnc.base == ffi.NULL:
            raise errors.ClosedError("the CnC file is closed")
        return self._cnc
