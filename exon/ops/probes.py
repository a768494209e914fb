"""The liveness checks of :mod:`.health` and :mod:`.systemd`: does the driver answer?

:class:`DriverProbe` maps a driver directory's ``cnc.dat`` read-only (once; again when the
file was replaced) and finds the driver alive while its heartbeat is younger than the
driver's timeout: what an exon client itself checks, at the cost of a memory read.
"""

from __future__ import annotations

import os
import threading

from exon import errors
from exon.transport.aeron.cnc import CncFile

__all__ = ["DriverProbe"]


class DriverProbe:
    """``probe()``: None while the driver of ``directory`` answers, else why not."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._cnc: CncFile | None = None
        self._inode = -1
        self._lock = threading.Lock()

    def __call__(self) -> str | None:
        path = os.path.join(self.directory, "cnc.dat")
        with self._lock:
            try:
                inode = os.stat(path).st_ino
            except OSError:
                self._drop()
                return f"no driver in {self.directory} (no cnc.dat)"
            if self._cnc is None or inode != self._inode:
                self._drop()
                try:
                    self._cnc = CncFile.open(self.directory)
                except errors.ExonError as exc:
                    return f"the driver of {self.directory} cannot be read: {exc}"
                self._inode = inode
            cnc = self._cnc
            age = cnc.driver_heartbeat_age_ms()
            if age > cnc.driver_timeout_ms:
                return (f"the driver of {self.directory} does not answer (heartbeat "
                        f"{age} ms old)")
            return None

    def _drop(self) -> None:
        if self._cnc is not None:
            self._cnc.close()
            self._cnc = None

    def close(self) -> None:
        with self._lock:
            self._drop()
