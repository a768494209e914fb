"""Settings of the media driver and its clients: one pydantic model with Aeron's defaults.

Every field can also come from the environment: ``EXON_<FIELD NAME IN UPPER CASE>``
(e.g. ``EXON_THREADING_MODE=SHARED``, ``EXON_TERM_BUFFER_LENGTH=1m``,
``EXON_IMAGE_LIVENESS_TIMEOUT_NS=2s``). Explicit arguments win over the environment.
Sizes accept ``k``/``m``/``g`` suffixes and durations ``ns``/``us``/``ms``/``s``.
"""

from __future__ import annotations

import getpass
import os
import re
import tempfile
import uuid
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from exon.errors import ConfigurationError
from exon.transport.aeron import layout

#: INVOKER: SHARED agents, plus the embedding process's threads run the sender's and the
#: receiver's duty cycles while they wait (exon_invoker.h); for a driver embedded in a node
ThreadingMode = Literal["DEDICATED", "SHARED_NETWORK", "SHARED", "INVOKER"]
IdleStrategyName = Literal["backoff", "spin", "yield", "sleep", "noop"]

KIB = 1024
MIB = 1024 * 1024
MS = 1_000_000
SECOND = 1_000_000_000

_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+)\s*(ns|us|ms|s)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": KIB, "m": MIB, "g": 1024 * MIB}
_DURATION_UNITS = {None: 1, "ns": 1, "us": 1000, "ms": MS, "s": SECOND}


def parse_size(value: Any) -> Any:
    """``"64k"`` -> 65536; ints pass through; anything else is left to pydantic."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match:
            return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    return value


def parse_duration_ns(value: Any) -> Any:
    """``"200ms"`` -> 200_000_000 (nanoseconds); ints pass through."""
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            unit = match.group(2).lower() if match.group(2) else None
            return int(match.group(1)) * _DURATION_UNITS[unit]
    return value


def driver_dir_base() -> str:
    """Where driver directories go: ``/dev/shm`` (memory-backed), else the temp dir."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def default_driver_dir() -> str:
    """Aeron's convention, under exon's name: ``/dev/shm/exon-<user>`` (or the tmp dir)."""
    try:
        user = getpass.getuser()
    except Exception:  # pragma: no cover - no user database entry
        user = str(os.getuid())
    return os.path.join(driver_dir_base(), f"exon-{user}")


def host_driver_dir() -> str:
    """Where the host's shared driver runs: ``$EXON_DIR`` if set, else
    :func:`default_driver_dir`. ``exon driver`` with no ``--dir`` runs there and
    ``exon.Node()`` looks for a live driver there."""
    return os.environ.get("EXON_DIR") or default_driver_dir()


def fresh_driver_dir(prefix: str) -> str:
    """A new driver directory path, ``PREFIX-<random>`` under :func:`driver_dir_base` (an
    embedded driver's, a benchmark's, a test's)."""
    return os.path.join(driver_dir_base(), f"{prefix}-{uuid.uuid4().hex[:12]}")


class DriverSettings(BaseModel):
    """The media driver's settings. Defaults are Aeron's (1.15.1 through current), but for the
    term lengths, the receiver window and the receive buffer (the comments below say why)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    dir: str = Field(default_factory=default_driver_dir, description="driver directory (CnC, logs)")
    dir_delete_on_start: bool = Field(False, description="remove an existing directory at launch")
    dir_delete_on_shutdown: bool = Field(False, description="remove the directory on close")
    dir_mode: int = Field(
        0o700, ge=0o700, le=0o3777,
        description="mode of the driver directory (files get it without the x bits): 0o700 "
                    "keeps the log buffers private to the driver's user (the default); "
                    "0o770 (or 0o2770, setgid) shares a host driver with its group on purpose "
                    "(docs/guide/deployment.md)")

    threading_mode: ThreadingMode = "DEDICATED"
    idle_strategy: IdleStrategyName = "backoff"
    idle_max_spins: int = Field(10, ge=0, le=1_000_000)
    idle_max_yields: int = Field(20, ge=0, le=1_000_000)
    idle_min_park_ns: int = Field(1_000, ge=1, le=SECOND)
    idle_max_park_ns: int = Field(1 * MS, ge=1, le=10 * SECOND)

    # exon's third departure from Aeron (16 MiB UDP, 64 MiB IPC): 2 MiB terms. Three of them
    # per log keep a node's logs within the CPU's last-level cache, where every log write
    # and read of a longer term is a miss (and its first pass a page fault): UDP push/pull
    # of 1 KiB ran 1.4-1.8x faster and pub/sub fan-out 1.45x (docs/guide/tuning.md). The
    # term no longer caps the message size (a longer frame travels in FRAGMENTs,
    # docs/protocol.md 2.14); messages above an eighth of a term pay for the cut.
    term_buffer_length: int = Field(2 * MIB, description="UDP publications")
    ipc_term_buffer_length: int = Field(2 * MIB, description="IPC publications")
    max_image_term_length: int = Field(
        64 * MIB, description="UDP: SETUPs announcing longer terms are refused (counted invalid)"
    )
    file_page_size: int = 4 * KIB
    # Aeron's default (its term buffer sparse file setting is false): a log's pages are
    # reserved when the driver makes it, and the driver and every client map it with its
    # pages in place. A sparse log costs a page fault per 4 KiB on its first pass instead:
    # IPC push/pull of 64 B ran 1.5-2x faster without them, pub/sub fan-out 1.2-1.4x.
    # A channel's `sparse=true|false` overrides this for its publication.
    term_buffer_sparse_file: bool = Field(
        False, description="logs as sparse files (pages on first touch; less /dev/shm used)")
    mtu_length: int = 1408
    ipc_mtu_length: int = 1408
    publication_term_window_length: int = Field(0, ge=0, description="0 = term length / 2")
    ipc_publication_term_window_length: int = Field(0, ge=0, description="0 = term length / 2")
    # exon's other two departures from Aeron's defaults (128 KiB each): a receiver window of 128
    # KiB is 128 one-KiB messages in flight per status message round trip, which held UDP
    # push/pull of 1 KiB to 0.6-0.75x pyzmq over TCP; 512 KiB with a 2 MiB buffer measured
    # 1.0-1.2x (docs/guide/tuning.md). The image's window is also capped at half the buffer
    # the kernel grants, so a host whose net.core.rmem_max is lower does not lose datagrams.
    initial_window_length: int = Field(
        512 * KIB, ge=4 * KIB, le=layout.TERM_MAX_LENGTH // 2,
        description="UDP: receiver window (at most term length / 2 and half the granted "
        "receive buffer)")
    socket_rcvbuf_length: int = Field(2 * MIB, ge=0, le=1024 * MIB, description="0 = OS default")
    socket_sndbuf_length: int = Field(0, ge=0, le=1024 * MIB, description="0 = OS default")

    status_message_timeout_ns: int = Field(200 * MS, ge=1 * MS, le=60 * SECOND)
    image_liveness_timeout_ns: int = Field(10 * SECOND, ge=10 * MS, le=3600 * SECOND)
    publication_linger_timeout_ns: int = Field(5 * SECOND, ge=0, le=3600 * SECOND)
    publication_connection_timeout_ns: int = Field(5 * SECOND, ge=10 * MS, le=3600 * SECOND)
    publication_unblock_timeout_ns: int = Field(15 * SECOND, ge=10 * MS, le=3600 * SECOND)
    client_liveness_timeout_ns: int = Field(10 * SECOND, ge=10 * MS, le=3600 * SECOND)
    flow_control_receiver_timeout_ns: int = Field(5 * SECOND, ge=10 * MS, le=3600 * SECOND)
    timer_interval_ns: int = Field(1 * SECOND, ge=1 * MS, le=60 * SECOND)
    heartbeat_interval_ns: int = Field(100 * MS, ge=1 * MS, le=60 * SECOND)
    setup_interval_ns: int = Field(100 * MS, ge=1 * MS, le=60 * SECOND)

    nak_unicast_delay_ns: int = Field(1_000, ge=1_000, le=SECOND)
    nak_unicast_retry_delay_ratio: int = Field(100, ge=1, le=100_000)
    retransmit_unicast_delay_ns: int = Field(0, ge=0, le=SECOND)
    retransmit_unicast_linger_ns: int = Field(10 * MS, ge=0, le=10 * SECOND)
    max_resend: int = Field(16, ge=1, le=256)
    # exon (issue 13): NAKs wait for a verified source, back off on a repeated gap, are capped
    nak_retry_max_delay_ns: int = Field(
        250 * MS, ge=1_000, le=60 * SECOND,
        description="UDP: the same gap NAKed again doubles its retry delay up to this")
    nak_rate_window_ns: int = Field(
        10 * MS, ge=0, le=SECOND, description="UDP: NAK cap window per image (0 = no cap)")
    nak_rate_max_per_window: int = Field(
        200, ge=1, le=1_000_000, description="UDP: NAKs per image per window at most")

    # exon (issue 13): the image table of a receive endpoint, and who may fill it
    max_images_per_endpoint: int = Field(
        64, ge=1, le=1024, description="UDP: images (plus queued SETUPs) per receive endpoint")
    max_unverified_images_per_source: int = Field(
        4, ge=1, le=1024,
        description="UDP: images not yet verified (data from the join, or an RTTM echo) "
                    "per source address; its next SETUP evicts its oldest")
    image_idle_eviction_timeout_ns: int = Field(
        2 * SECOND, ge=10 * MS, le=3600 * SECOND,
        description="UDP: a verified image quiet this long may be evicted when the table is full")

    # exon (issue 11): segmentation offload; the datagrams on the wire are the same either way
    udp_gso: bool = Field(
        True, description="UDP: send runs of equal-length datagrams as one UDP GSO message "
                          "(UDP_SEGMENT) where the kernel supports it")
    udp_gro: bool = Field(
        True, description="UDP: receive coalesced datagrams (UDP_GRO) where the kernel "
                          "supports it, one syscall for many")

    to_driver_buffer_length: int = Field(1 * MIB, description="ring capacity (power of two)")
    to_clients_buffer_length: int = Field(1 * MIB, description="broadcast capacity (power of 2)")
    counters_values_buffer_length: int = Field(1 * MIB, description="128 bytes per counter")
    error_buffer_length: int = Field(1 * MIB, ge=64 * KIB, le=256 * MIB)

    receive_loss_rate: float = Field(0.0, ge=0.0, le=1.0, description="debug: drop received data")
    receive_loss_seed: int = Field(0, description="debug: -1 = random seed")
    send_loss_rate: float = Field(0.0, ge=0.0, le=1.0, description="debug: drop sent data")
    send_loss_seed: int = Field(0, description="debug: -1 = random seed")

    # ---- parsing of human-friendly values ---------------------------------------------

    @field_validator(
        "term_buffer_length",
        "ipc_term_buffer_length",
        "max_image_term_length",
        "file_page_size",
        "mtu_length",
        "ipc_mtu_length",
        "publication_term_window_length",
        "ipc_publication_term_window_length",
        "initial_window_length",
        "socket_rcvbuf_length",
        "socket_sndbuf_length",
        "to_driver_buffer_length",
        "to_clients_buffer_length",
        "counters_values_buffer_length",
        "error_buffer_length",
        mode="before",
    )
    @classmethod
    def _sizes(cls, value: Any) -> Any:
        return parse_size(value)

    @field_validator(
        "idle_min_park_ns",
        "idle_max_park_ns",
        "status_message_timeout_ns",
        "image_liveness_timeout_ns",
        "publication_linger_timeout_ns",
        "publication_connection_timeout_ns",
        "publication_unblock_timeout_ns",
        "client_liveness_timeout_ns",
        "flow_control_receiver_timeout_ns",
        "timer_interval_ns",
        "heartbeat_interval_ns",
        "setup_interval_ns",
        "nak_unicast_delay_ns",
        "retransmit_unicast_delay_ns",
        "retransmit_unicast_linger_ns",
        "nak_retry_max_delay_ns",
        "nak_rate_window_ns",
        "image_idle_eviction_timeout_ns",
        mode="before",
    )
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return parse_duration_ns(value)

    @field_validator("threading_mode", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    # ---- limits ---------------------------------------------------------------------

    @field_validator("dir")
    @classmethod
    def _dir(cls, value: str) -> str:
        if not value or "\0" in value:
            raise ValueError("driver dir must be a non-empty path without NUL characters")
        length = len(value.encode())
        if length >= layout.DRIVER_DIR_MAX_LENGTH:
            raise ValueError(
                f"driver dir {value[:64]!r}... is {length} bytes long; it must be shorter "
                f"than {layout.DRIVER_DIR_MAX_LENGTH} (room for the file names under it)")
        return value

    @field_validator("dir_mode", mode="before")
    @classmethod
    def _dir_mode_text(cls, value: object) -> object:
        return int(value, 8) if isinstance(value, str) else value  # "0770", "0o2770"

    @field_validator("dir_mode")
    @classmethod
    def _dir_mode(cls, value: int) -> int:
        if value & 0o700 != 0o700 or value & 0o007:
            raise ValueError(
                f"dir_mode {value:#o}: the owner needs rwx (0o700) and other users get nothing "
                "(share with a group instead: 0o750, 0o770, 0o2770)")
        return value

    @field_validator("term_buffer_length", "ipc_term_buffer_length", "max_image_term_length")
    @classmethod
    def _term_length(cls, value: int) -> int:
        try:
            layout.check_term_length(value)
        except ValueError as exc:
            raise ValueError(f"{exc} (allowed: a power of two from 64 KiB to 1 GiB)") from None
        return value

    @field_validator("file_page_size")
    @classmethod
    def _page_size(cls, value: int) -> int:
        if not layout.PAGE_MIN_SIZE <= value <= layout.PAGE_MAX_SIZE or value & (value - 1):
            raise ValueError(f"page size {value} is not a power of two from 4 KiB to 1 GiB")
        return value

    @field_validator("mtu_length", "ipc_mtu_length")
    @classmethod
    def _mtu(cls, value: int) -> int:
        if not layout.DATA_HEADER_LENGTH < value <= layout.MAX_UDP_PAYLOAD_LENGTH or value % 32:
            raise ValueError(
                f"mtu {value} must be a multiple of 32 in ({layout.DATA_HEADER_LENGTH}, "
                f"{layout.MAX_UDP_PAYLOAD_LENGTH}]"
            )
        return value

    @field_validator("to_driver_buffer_length", "to_clients_buffer_length")
    @classmethod
    def _ring_capacity(cls, value: int) -> int:
        if not 64 * KIB <= value <= 256 * MIB or value & (value - 1):
            raise ValueError(f"buffer length {value} is not a power of two from 64 KiB to 256 MiB")
        return value

    @field_validator("counters_values_buffer_length")
    @classmethod
    def _counters(cls, value: int) -> int:
        if not 64 * KIB <= value <= 256 * MIB or value % 128:
            raise ValueError(
                f"counters length {value} must be a multiple of 128 in [64 KiB, 256 MiB]"
            )
        return value

    @model_validator(mode="after")
    def _cross_checks(self) -> DriverSettings:
        if self.idle_min_park_ns > self.idle_max_park_ns:
            raise ValueError("idle_min_park_ns must not exceed idle_max_park_ns")
        for mtu_field, term_field in (("mtu_length", "term_buffer_length"),
                                      ("ipc_mtu_length", "ipc_term_buffer_length")):
            if getattr(self, mtu_field) > getattr(self, term_field) // 8:
                raise ValueError(f"{mtu_field} must not exceed {term_field} / 8")
        return self

    # ---- derived values -------------------------------------------------------------

    def publication_window(self, term_length: int, *, ipc: bool) -> int:
        """Aeron's producer window: the set value capped at term length / 2 (0 = term / 2)."""
        configured = (
            self.ipc_publication_term_window_length if ipc else self.publication_term_window_length
        )
        half = term_length // 2
        return min(configured, half) if configured else half

    def receiver_window(self, term_length: int) -> int:
        """Static-window congestion control: min(initial window, term length / 2)."""
        return min(self.initial_window_length, term_length // 2)

    # ---- construction from the environment ----------------------------------------------

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> DriverSettings:
        """Settings from ``EXON_*`` variables, then ``overrides``; errors name the variable."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            key = f"EXON_{name.upper()}"
            if key in environ:
                values[name] = environ[key]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return build_settings(cls, values)


_Model = TypeVar("_Model", bound=BaseModel)


def build_settings(model: type[_Model], values: Mapping[str, Any]) -> _Model:
    """Validate ``values`` into ``model``; turn pydantic's error into a ConfigurationError."""
    try:
        return model(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or model.__name__}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigurationError(f"invalid {model.__name__}: {problems}") from None
