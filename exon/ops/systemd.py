"""systemd's notify protocol, without a dependency: a datagram to ``$NOTIFY_SOCKET``.

Under a unit with ``Type=notify``, systemd starts the service's dependents only once it
sent ``READY=1``; with ``WatchdogSec=`` it kills and restarts the service when no
``WATCHDOG=1`` came within that time. :func:`notify` sends one message (a no-op outside
systemd: no ``$NOTIFY_SOCKET``); :class:`Watchdog` sends ``WATCHDOG=1`` every half of
``$WATCHDOG_USEC`` from a daemon thread, as long as the service's liveness check holds
(a process whose driver stopped answering stops petting the watchdog, and systemd
restarts it). ``$NOTIFY_SOCKET`` is a path, or an abstract socket when it starts with
``@``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping

__all__ = ["Watchdog", "notify", "watchdog_interval"]

log = logging.getLogger("exon.ops")


def _address(env: Mapping[str, str]) -> str | None:
    path = env.get("NOTIFY_SOCKET")
    if not path or not (path.startswith("/") or path.startswith("@")):
        return None
    return "\0" + path[1:] if path.startswith("@") else path


def notify(state: str, env: Mapping[str, str] | None = None) -> bool:
    """Send ``state`` (``"READY=1"``, ``"STOPPING=1"``, ``"STATUS=..."``, lines joined by
    newlines) to ``$NOTIFY_SOCKET``; True when sent, False without one (not under systemd)
    or when the send failed (logged: notifying never stops the service)."""
    address = _address(os.environ if env is None else env)
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(state.encode(), address)
        return True
    except OSError as exc:
        log.warning("sd_notify %r to %s failed: %s", state, address.lstrip("\0"), exc)
        return False


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Seconds between two keep-alives: half of ``$WATCHDOG_USEC``, or None when the
    watchdog is off (unset, not a positive number, or ``$WATCHDOG_PID`` names another
    process)."""
    env = os.environ if env is None else env
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 2e6 if usec > 0 else None


class Watchdog:
    """Sends ``WATCHDOG=1`` every :func:`watchdog_interval` while ``alive()`` returns
    None (the health check of :mod:`.health`); does nothing when the watchdog is off.
    :meth:`close` stops it."""

    def __init__(self, alive: Callable[[], str | None] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self._env = dict(os.environ if env is None else env)
        self._alive = alive or (lambda: None)
        self._stop = threading.Event()
        self.interval = watchdog_interval(self._env)
        self._thread: threading.Thread | None = None
        if self.interval is not None:
            self._thread = threading.Thread(target=self._run, name="exon-watchdog",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self.interval is not None
        while not self._stop.wait(self.interval):
            try:
                reason = self._alive()
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if reason is None:
                notify("WATCHDOG=1", self._env)
            else:
                log.warning("not alive (%s): no watchdog keep-alive", reason)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
