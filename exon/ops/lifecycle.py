"""What ``exon node``, ``exon driver`` and ``exon archive serve`` do as services: answer
``--health`` (:mod:`.health`) and tell systemd (:mod:`.systemd`) when they are ready, that
they live (watchdog) and when they stop.

``ServiceLifecycle(health="127.0.0.1:9100")`` binds the health port first (a port in use
stops the command before it starts anything); :meth:`~ServiceLifecycle.ready` is called
once the service can take work: ``/readyz`` turns 200, systemd gets ``READY=1`` and the
watchdog keep-alives start (while the liveness check holds).
"""

from __future__ import annotations

from exon.ops.health import Check, HealthServer, serve_health
from exon.ops.systemd import Watchdog, notify

__all__ = ["ServiceLifecycle"]


class ServiceLifecycle:
    """One service's health endpoint (optional) and systemd notifications."""

    def __init__(self, health: str | None = None, *, waiting: str = "starting") -> None:
        #: alive while it starts (a long recovery is no reason to kill it): /readyz waits
        self._alive: Check = lambda: None
        self.health: HealthServer | None = None
        if health:
            self.health = serve_health(health, alive=self.alive)
            self.health.set_waiting(waiting)
        self._watchdog: Watchdog | None = None

    def alive(self) -> str | None:
        """The liveness check now: None, or why the service is not alive."""
        return self._alive()

    def set_alive(self, check: Check) -> None:
        """The service's liveness check from now on (the driver probe, once it is up)."""
        self._alive = check

    def waiting(self, what: str) -> None:
        """What ``/readyz`` says the service waits for."""
        if self.health is not None:
            self.health.set_waiting(what)

    def ready(self, status: str = "") -> None:
        """The service takes work: ``/readyz`` 200, ``READY=1``, watchdog keep-alives."""
        if self.health is not None:
            self.health.set_ready()
        notify("READY=1" + (f"\nSTATUS={status}" if status else ""))
        if self._watchdog is None:
            self._watchdog = Watchdog(self.alive)

    def close(self) -> None:
        """``STOPPING=1``, then stop the watchdog and the health endpoint."""
        notify("STOPPING=1")
        if self._watchdog is not None:
            self._watchdog.close()
        if self.health is not None:
            self.health.close()

    def __enter__(self) -> ServiceLifecycle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
