"""The embedded media driver: the C driver on native threads inside this process.

``MediaDriver.launch(settings, **overrides)`` creates the driver directory (refusing a
directory where another driver is alive, cleaning a stale one), ``cnc.dat`` and the agent
threads of the threading mode (DEDICATED: conductor, sender, receiver; SHARED_NETWORK:
conductor, sender+receiver; SHARED: one thread). It is a context manager; ``close()``
stops the agents, removes the log files and, with ``dir_delete_on_shutdown``, the dir.
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass
from typing import Any, Literal

from exon.native import check, ffi, lib
from exon.transport.aeron.settings import DriverSettings

__all__ = ["DEFAULT_DRIVER_TIMEOUT_MS", "DriverProbe", "MediaDriver", "driver_context",
           "probe_driver"]

DEFAULT_DRIVER_TIMEOUT_MS = 10_000

_THREADING = {
    "DEDICATED": lib.EXON_THREADING_DEDICATED,
    "SHARED_NETWORK": lib.EXON_THREADING_SHARED_NETWORK,
    "SHARED": lib.EXON_THREADING_SHARED,
    "INVOKER": lib.EXON_THREADING_SHARED,  # + ctx.invoker
}
_IDLE = {
    "spin": lib.EXON_IDLE_SPIN,
    "yield": lib.EXON_IDLE_YIELD,
    "backoff": lib.EXON_IDLE_BACKOFF,
    "sleep": lib.EXON_IDLE_SLEEP,
    "noop": lib.EXON_IDLE_NOOP,
}


def driver_context(settings: DriverSettings, *, driver_timeout_ms: int) -> Any:
    """The C ``exon_driver_context_t`` for ``settings``."""
    ctx = ffi.new("exon_driver_context_t *")
    lib.exon_driver_context_defaults(ctx)
    ctx.dir = settings.dir.encode()  # its length: checked by DriverSettings (and by C)
    ctx.dir_delete_on_start = int(settings.dir_delete_on_start)
    ctx.dir_delete_on_shutdown = int(settings.dir_delete_on_shutdown)
    ctx.dir_mode = settings.dir_mode
    ctx.threading_mode = _THREADING[settings.threading_mode]
    ctx.invoker = int(settings.threading_mode == "INVOKER")
    ctx.idle_strategy = _IDLE[settings.idle_strategy]
    ctx.idle_max_spins = settings.idle_max_spins
    ctx.idle_max_yields = settings.idle_max_yields
    ctx.idle_min_park_ns = settings.idle_min_park_ns
    ctx.idle_max_park_ns = settings.idle_max_park_ns
    ctx.ipc_term_buffer_length = settings.ipc_term_buffer_length
    ctx.ipc_mtu_length = settings.ipc_mtu_length
    ctx.term_buffer_length = settings.term_buffer_length
    ctx.mtu_length = settings.mtu_length
    ctx.file_page_size = settings.file_page_size
    ctx.term_buffer_sparse_file = int(settings.term_buffer_sparse_file)
    ctx.ipc_publication_term_window_length = settings.ipc_publication_term_window_length
    ctx.to_driver_buffer_length = settings.to_driver_buffer_length
    ctx.to_clients_buffer_length = settings.to_clients_buffer_length
    ctx.counters_values_buffer_length = settings.counters_values_buffer_length
    ctx.error_buffer_length = settings.error_buffer_length
    ctx.client_liveness_timeout_ns = settings.client_liveness_timeout_ns
    ctx.publication_linger_timeout_ns = settings.publication_linger_timeout_ns
    ctx.publication_unblock_timeout_ns = settings.publication_unblock_timeout_ns
    ctx.timer_interval_ns = settings.timer_interval_ns
    ctx.driver_timeout_ms = driver_timeout_ms
    ctx.publication_connection_timeout_ns = settings.publication_connection_timeout_ns
    ctx.image_liveness_timeout_ns = settings.image_liveness_timeout_ns
    ctx.status_message_timeout_ns = settings.status_message_timeout_ns
    ctx.publication_term_window_length = settings.publication_term_window_length
    ctx.initial_window_length = settings.initial_window_length
    ctx.socket_rcvbuf_length = settings.socket_rcvbuf_length
    ctx.socket_sndbuf_length = settings.socket_sndbuf_length
    ctx.receive_loss_rate = settings.receive_loss_rate
    ctx.receive_loss_seed = settings.receive_loss_seed
    ctx.send_loss_rate = settings.send_loss_rate
    ctx.send_loss_seed = settings.send_loss_seed
    ctx.nak_delay_ns = settings.nak_unicast_delay_ns
    ctx.nak_retry_delay_ns = settings.nak_unicast_delay_ns * settings.nak_unicast_retry_delay_ratio
    ctx.retransmit_delay_ns = settings.retransmit_unicast_delay_ns
    ctx.retransmit_linger_ns = settings.retransmit_unicast_linger_ns
    ctx.max_resend = settings.max_resend
    ctx.max_image_term_length = settings.max_image_term_length
    ctx.heartbeat_interval_ns = settings.heartbeat_interval_ns
    ctx.setup_interval_ns = settings.setup_interval_ns
    ctx.max_images_per_endpoint = settings.max_images_per_endpoint
    ctx.max_unverified_images_per_source = settings.max_unverified_images_per_source
    ctx.image_idle_eviction_timeout_ns = settings.image_idle_eviction_timeout_ns
    ctx.nak_retry_max_delay_ns = settings.nak_retry_max_delay_ns
    ctx.nak_rate_window_ns = settings.nak_rate_window_ns
    ctx.nak_rate_max_per_window = settings.nak_rate_max_per_window
    ctx.udp_gso = int(settings.udp_gso)
    ctx.udp_gro = int(settings.udp_gro)
    return ctx


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverProbe:
    """What :func:`probe_driver` found in a driver directory."""

    #: "live": a driver serves it; "absent": no ``cnc.dat``; "stale": a ``cnc.dat`` whose
    #: driver is gone (its pid is dead, its heartbeat is old or zero) or unreadable
    state: Literal["live", "absent", "stale"]
    dir: str
    #: the driver's pid as its CnC says (0 when unknown)
    pid: int = 0
    #: why the directory is stale, for the message a caller prints
    reason: str = ""


def probe_driver(directory: str) -> DriverProbe:
    """Whether a live media driver serves ``directory``: its ``cnc.dat`` opens, its
    heartbeat is younger than its driver timeout and (same host) its pid exists."""
    from exon import errors
    from exon.transport.aeron.cnc import CncFile

    if not os.path.exists(os.path.join(directory, "cnc.dat")):
        return DriverProbe(state="absent", dir=directory)
    try:
        cnc = CncFile.open(directory)
    except errors.ExonError as exc:
        return DriverProbe(state="stale", dir=directory, reason=f"unreadable cnc.dat: {exc}")
    with cnc:
        pid = cnc.pid
        if cnc.driver_heartbeat_ms() == 0:
            return DriverProbe(state="stale", dir=directory, pid=pid,
                               reason="its driver shut down")
        if not cnc.is_driver_alive():
            return DriverProbe(state="stale", dir=directory, pid=pid,
                               reason=f"heartbeat {cnc.driver_heartbeat_age_ms()} ms old")
        if pid > 0 and not _pid_alive(pid):
            return DriverProbe(state="stale", dir=directory, pid=pid,
                               reason=f"driver process {pid} is gone")
    return DriverProbe(state="live", dir=directory, pid=pid)


def _refuse_live_or_clean_dead(directory: str) -> None:
    """Two drivers never share a directory: a live one there refuses the launch (the C
    launch checks the heartbeat again, which closes the race). A driver killed moments ago
    still has a fresh heartbeat; its pid is gone, so its files are removed here."""
    from exon import errors

    found = probe_driver(directory)
    if found.state == "live":
        raise errors.StateError(
            f"launch driver in {directory}: driver already active in {directory} (pid "
            f"{found.pid}); two drivers cannot share a directory: use that driver, stop it, "
            f"or choose another dir")
    if found.state == "stale" and found.pid > 0 and not _pid_alive(found.pid):
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno != errno.ESRCH
    return True


class MediaDriver:
    """A running embedded media driver (``exon_driver_t``)."""

    def __init__(self, handle: Any, settings: DriverSettings) -> None:
        self._handle = handle
        self.settings = settings
        self._lock = threading.Lock()

    @classmethod
    def launch(
        cls,
        settings: DriverSettings | None = None,
        *,
        driver_timeout_ms: int = DEFAULT_DRIVER_TIMEOUT_MS,
        **overrides: Any,
    ) -> MediaDriver:
        """Start a driver. ``overrides`` are :class:`DriverSettings` fields applied over
        ``settings`` (or over the environment's settings when ``settings`` is None).
        ``driver_timeout_ms`` is written to the CnC: clients give up on a driver whose
        heartbeat is older than that."""
        if settings is None:
            settings = DriverSettings.from_env(**overrides)
        elif overrides:
            settings = DriverSettings.from_env({}, **{**settings.model_dump(), **overrides})
        _refuse_live_or_clean_dead(settings.dir)
        ctx = driver_context(settings, driver_timeout_ms=driver_timeout_ms)
        out = ffi.new("exon_driver_t **")
        check(lib.exon_driver_launch(out, ctx), f"launch driver in {settings.dir}")
        return cls(out[0], settings)

    @property
    def dir(self) -> str:
        """The driver's directory (``cnc.dat`` and log buffers)."""
        return self.settings.dir

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._handle is None

    @property
    def handle(self) -> Any:
        """The ``exon_driver_t *`` (for the INVOKER calls of the process that embeds it)."""
        return self._handle

    @property
    def invoker(self) -> bool:
        """True in INVOKER mode: this process's threads run the sender and receiver duty
        cycles while they wait (``exon_invoker_wait``)."""
        return self._handle is not None and bool(lib.exon_driver_invoker_enabled(self._handle))

    @property
    def thread_count(self) -> int:
        """Agent threads running (3, 2 or 1 by threading mode)."""
        return 0 if self._handle is None else int(lib.exon_driver_runner_count(self._handle))

    @property
    def terminate_requested(self) -> bool:
        """True once a client sent TERMINATE_DRIVER."""
        return self._handle is not None and bool(lib.exon_driver_terminate_requested(self._handle))

    def close(self) -> None:
        """Stop the agents, free the logs and (if configured) delete the dir. Idempotent."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            check(lib.exon_driver_close(handle), f"close driver in {self.settings.dir}")

    def __enter__(self) -> MediaDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else self.settings.threading_mode
        return f"<MediaDriver dir={self.dir!r} {state}>"
