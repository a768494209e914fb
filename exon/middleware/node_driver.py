"""Which media driver a Node uses, and how it launches one of its own.

Which driver (``Node(driver=...)``, default ``$EXON_NODE_DRIVER``, else ``"auto"``), as
Aeron deploys one driver per host:

* ``"auto"``: the host driver when one is live at :func:`~exon.transport.aeron.settings.
  host_driver_dir` (``$EXON_DIR``, else ``/dev/shm/exon-<user>``, where ``exon driver``
  runs with no ``--dir``): nodes of one host then talk over IPC with no configuration.
  Otherwise an embedded driver of the node's own; a stale directory there (its driver
  gone) is reported in a warning (logger ``exon.node``) and left alone.
* ``"embedded"``: always a driver of its own (isolation: tests, benchmarks).
* ``"shared"``: the host driver, or :class:`~exon.errors.DriverUnavailable`.
* a directory (or ``driver_dir=DIR``): the driver of that directory.

An embedded driver's directory is ``PREFIX-<pid>-<random>`` under
:func:`~exon.transport.aeron.settings.driver_dir_base` (``Node(driver_dir_prefix=...)``,
default ``exon-node``). A process killed with SIGKILL leaves its directory behind, so a new
node first removes those of its prefix whose process is gone (:func:`sweep_stale_driver_dirs`,
public as ``exon.sweep_stale_driver_dirs``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from exon import errors
from exon.middleware.node_transport import NODE_DIR_PREFIX, sweep_stale_pid_dirs
from exon.transport.aeron.driver import probe_driver
from exon.transport.aeron.settings import driver_dir_base, host_driver_dir

__all__ = ["DRIVER_CHOICES", "EMBEDDED_DRIVER_DEFAULTS", "check_dir_prefix", "choose_driver",
           "sweep_stale_driver_dirs"]

log = logging.getLogger("exon.node")

#: the named choices of ``Node(driver=...)``; any other value is a driver directory
DRIVER_CHOICES = ("auto", "embedded", "shared")

#: settings of an embedded driver unless the caller overrides them. Client liveness stays
#: Aeron's 10 s: an embedded driver's client is normally its own process, which dies with
#: it, and a shorter limit only let a process starved of CPU for a few seconds (a Spark
#: worker beside busy JVMs) be timed out by its own driver, losing every link.
EMBEDDED_DRIVER_DEFAULTS: dict[str, Any] = {
    "threading_mode": "INVOKER",
    "publication_linger_timeout_ns": 0,
}


def choose_driver(driver: str | None, driver_dir: str | None) -> tuple[str | None, str]:
    """(directory of the driver to use, or None to embed one; a note on why)."""
    if driver_dir is not None:
        if driver is not None and driver != driver_dir:
            raise errors.ConfigurationError(
                f"give driver= or driver_dir=, not both (driver={driver!r}, "
                f"driver_dir={driver_dir!r})")
        return driver_dir, "external"
    choice = driver if driver is not None else (os.environ.get("EXON_NODE_DRIVER") or "auto")
    if choice == "embedded":
        return None, "embedded"
    if choice in ("auto", "shared"):
        found = probe_driver(host_driver_dir())
        if found.state == "live":
            return found.dir, "host"
        if choice == "shared":
            why = "nothing runs there" if found.state == "absent" else found.reason
            raise errors.DriverUnavailable(
                f"no live media driver in {found.dir} ({why}): start one with "
                f"`exon driver`, or use Node(driver='embedded')")
        if found.state == "stale":
            log.warning("the host driver directory %s is stale (%s); this node embeds a "
                        "driver of its own (start `exon driver` to share one)",
                        found.dir, found.reason)
        return None, "embedded"
    if os.sep not in choice:
        raise errors.ConfigurationError(
            f"driver must be one of {', '.join(DRIVER_CHOICES)} or a driver directory, "
            f"not {choice!r}")
    return choice, "external"


def check_dir_prefix(prefix: str) -> str:
    """``prefix`` if it can name embedded drivers' directories (a file name: not empty, no
    path separator, not ``.`` or ``..``), else :class:`~exon.errors.ConfigurationError`."""
    if not isinstance(prefix, str):
        raise errors.ArgumentTypeError(
            f"driver_dir_prefix must be a str, not {type(prefix).__name__}")
    if prefix in ("", ".", "..") or os.sep in prefix or "\0" in prefix:
        raise errors.ConfigurationError(
            f"driver_dir_prefix must be a file name (no {os.sep!r}), not {prefix!r}")
    return prefix


def sweep_stale_driver_dirs(prefix: str = NODE_DIR_PREFIX, base: str | None = None) -> list[str]:
    """Remove the embedded drivers' directories ``<prefix>-<pid>-*`` in ``base`` (default
    :func:`~exon.transport.aeron.settings.driver_dir_base`) whose process is gone, as Aeron
    cleans a dead driver's directory at the next start. A directory of a live process (or
    one not ours to signal), or of this process, is left alone. Returns the names removed."""
    return sweep_stale_pid_dirs(base or driver_dir_base(), check_dir_prefix(prefix))
