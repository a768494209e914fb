"""``--health HOST:PORT``: the two paths an orchestrator asks a process.

* ``/healthz``: the process is alive and its driver answers (200 "ok", else 503 and why);
* ``/readyz``: it can take work -- its endpoint is bound, and for the archive its
  recordings are recovered (200 "ready", else 503 and what it waits for).

:class:`HealthServer` binds at construction (a port in use is a
:class:`~exon.errors.ConfigurationError` at start, not a surprise later) and answers
from a daemon thread. Its checks are callables returning ``None`` when fine or the
reason they are not; a check that raises answers 503 with the error. Each answer is
computed when asked: nothing runs between two probes.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from exon import errors

__all__ = ["Check", "HealthServer", "serve_health"]

#: a check: None when fine, else the reason it is not
Check = Callable[[], "str | None"]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            reason = self.server.owner.run_check(self.server.owner.alive)
            self._answer(reason, "ok")
        elif path == "/readyz":
            reason = self.server.owner.run_check(self.server.owner.alive)
            if reason is None:
                reason = self.server.owner.run_check(self.server.owner.readiness)
            self._answer(reason, "ready")
        else:
            self._send(404, "not found: /healthz or /readyz\n")

    def _answer(self, reason: str | None, fine: str) -> None:
        if reason is None:
            self._send(200, fine + "\n")
        else:
            self._send(503, reason + "\n")

    def _send(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # probes every few seconds: not a line each on stderr


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: HealthServer


class _Server6(_Server):
    address_family = socket.AF_INET6


class HealthServer:
    """``HealthServer(host, port, alive=check)``; :meth:`set_ready` (or a ``ready`` check)
    says when ``/readyz`` turns 200; :meth:`close` stops it. ``with`` closes it."""

    def __init__(self, host: str, port: int, *, alive: Check | None = None,
                 ready: Check | None = None) -> None:
        self.alive: Check = alive or (lambda: None)
        self._ready_check = ready
        self._ready = threading.Event()
        self._waiting = "starting"
        server = _Server6 if ":" in host else _Server
        try:
            self._server = server((host, port), _Handler)
        except OSError as exc:
            reason = ("the port is in use" if exc.errno == errno.EADDRINUSE
                      else exc.strerror or str(exc))
            raise errors.ConfigurationError(
                f"--health {host}:{port}: cannot listen: {reason}") from None
        self._server.owner = self
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name=f"exon-health-{self.port}", daemon=True)
        self._thread.start()

    def set_ready(self) -> None:
        """``/readyz`` answers 200 from now on (while the ``alive`` check holds)."""
        self._ready.set()

    def set_waiting(self, what: str) -> None:
        """What ``/readyz`` says it waits for until :meth:`set_ready`."""
        self._waiting = what

    def readiness(self) -> str | None:
        """None when ready, else what it waits for."""
        if not self._ready.is_set():
            return f"not ready: {self._waiting}"
        return None if self._ready_check is None else self._ready_check()

    @property
    def ready(self) -> bool:
        return self.run_check(self.alive) is None and self.run_check(self.readiness) is None

    @staticmethod
    def run_check(check: Check) -> str | None:
        try:
            return check()
        except Exception as exc:  # a probe never takes the process down
            return f"check failed: {type(exc).__name__}: {exc}"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2.0)

    def __enter__(self) -> HealthServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_health(address: str, *, alive: Check | None = None,
                 ready: Check | None = None) -> HealthServer:
    """A :class:`HealthServer` on ``address`` (``HOST:PORT``, ``[V6]:PORT``)."""
    from exon.core.address import split_address

    host, port = split_address(address, what="--health")
    return HealthServer(host, port, alive=alive, ready=ready)
