"""Archive clients and nodes for Spark's Python processes, and the replay that retries.

Spark runs this code in processes it forks and reuses (executor workers, the streaming
source runner, the planner). Nothing here is created at import or in a constructor: the
first call in a process opens what it needs, and it stays open for the life of that process
(a Spark Python worker is reused across tasks and micro-batches, so a task does not pay for
a node start). The cache is keyed by pid, so a forked child never uses its parent's handles,
and it is an optimisation only: a client that failed is dropped and the next call opens a
new one.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import exon
from exon.errors import ExonError

__all__ = [
    "ReplayFailed",
    "archive_error",
    "close_all",
    "drop_client",
    "open_client",
    "process_node",
    "replay_range",
    "shared_client",
    "sweep_stale_dirs",
]

_LOCK = threading.Lock()
_CLIENTS: dict[tuple[int, str], Any] = {}
_NODES: dict[tuple[int, str], Any] = {}  # (pid, endpoint) -> node
_CLEANUP_INSTALLED: set[int] = set()

#: driver directories of this package's nodes: ``exon-spark-<pid>-<random>``
DIR_PREFIX = "exon-spark"


class ReplayFailed(ExonError):
    """``read()`` could not replay its range from the archive within ``replayTimeout``."""


def archive_error(address: str, exc: BaseException) -> ExonError:
    """``exc`` from talking to the archive at ``address``, as an error that names it."""
    return ExonError(f"exon: the archive at {address} (option 'archive') did not answer: "
                     f"{type(exc).__name__}: {exc}")


def _endpoint_for(address: str) -> str:
    from exon.archive.client import local_endpoint_for
    from exon.sockets.messages import split_address

    host, _ = split_address(address.split(",")[0].strip(), what="address")
    return local_endpoint_for(host)


def process_node(address: str) -> Any:
    """This process's exon node for talking to ``address`` (``HOST:PORT``).

    One per process and local endpoint, on an embedded media driver in a directory named
    ``exon-spark-<pid>-...``: Spark SIGKILLs idle Python workers, which leaves such a
    directory behind, so each new node first removes those of processes that are gone."""
    endpoint = _endpoint_for(address)
    key = (os.getpid(), endpoint)
    with _LOCK:
        node = _NODES.get(key)
        if node is not None and not node.closed:
            return node
        _install_cleanup()
        node = _NODES[key] = exon.Node(endpoint, driver="embedded",
                                       driver_dir_prefix=DIR_PREFIX)
        return node


def sweep_stale_dirs(base: str | None = None) -> list[str]:
    """Remove ``exon-spark-<pid>-*`` driver directories whose process is gone."""
    return exon.sweep_stale_driver_dirs(DIR_PREFIX, base)


def open_client(address: str, timeout: float) -> Any:
    """A new :class:`exon.archive.ArchiveClient` for ``address`` on this process's node
    (the caller closes the client; the node stays for the process)."""
    from exon.archive import ArchiveClient

    return ArchiveClient(address, timeout=timeout, node=process_node(address))


def shared_client(address: str, timeout: float) -> Any:
    """This process's client of the archive at ``address``."""
    key = (os.getpid(), address)
    with _LOCK:
        client = _CLIENTS.get(key)
    if client is None:
        client = open_client(address, timeout)
        with _LOCK:
            _CLIENTS[key] = client
    return client


def drop_client(address: str) -> None:
    """Forget (and close) this process's client of ``address`` after it failed."""
    with _LOCK:
        client = _CLIENTS.pop((os.getpid(), address), None)
    if client is not None:
        try:
            client.close()
        except Exception:
            pass


def close_all() -> None:
    """Close this process's clients, nodes and drivers (at exit, or on Spark's hang-up)."""
    pid = os.getpid()
    with _LOCK:
        clients = [_CLIENTS.pop(k) for k in [k for k in _CLIENTS if k[0] == pid]]
        nodes = [_NODES.pop(k) for k in [k for k in _NODES if k[0] == pid]]
    for closeable in [*clients, *nodes]:  # a node closes its embedded driver
        try:
            closeable.close()
        except Exception:
            pass


def _install_cleanup() -> None:
    """Close at exit; and when Spark's daemon hangs up its workers (SIGHUP, whose default
    action would skip atexit and leave the driver directory behind)."""
    pid = os.getpid()
    if pid in _CLEANUP_INSTALLED:
        return
    _CLEANUP_INSTALLED.add(pid)
    atexit.register(close_all)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
                signal.signal(signal.SIGHUP, _on_hangup)
        except (ValueError, OSError):
            pass


def _on_hangup(signum: int, frame: Any) -> None:
    close_all()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGHUP)


def _permanent(exc: BaseException) -> bool:
    from exon.archive import ArchiveCorrupt, RecordingNotFound, ReplayRangeError

    return isinstance(exc, (RecordingNotFound, ReplayRangeError, ArchiveCorrupt))


def replay_range(address: str, recording: str, start: int, end: int, *, timeout: float,
                 replay_timeout: float, client: Any = None,
                 sleep: Any = time.sleep, clock: Any = time.monotonic) -> Iterator[list[Any]]:
    """Yield the records of ``recording`` at positions ``[start, end)`` in batches.

    If the archive goes away mid-replay (restart, network), it reconnects and resumes after
    the last record yielded, retrying for up to ``replay_timeout`` seconds from the first
    failure in a row, then raises :class:`ReplayFailed`. It never skips a record: a range it
    cannot finish fails the task. A missing recording, a range outside the recording or a
    corrupt segment is permanent and raised at once."""
    last: int | None = None  # position of the last record yielded
    failing_since: float | None = None
    delay = 0.05
    while True:
        resume = start if last is None else last
        try:
            ac = client if client is not None else shared_client(address, timeout)
            for batch in ac.replay_batches(recording, resume, end):
                if last is not None and batch and batch[0][0] <= last:
                    batch = [r for r in batch if r[0] > last]
                if batch:
                    failing_since = None
                    last = batch[-1][0]
                    yield batch
            return
        except Exception as exc:
            if _permanent(exc) or not isinstance(exc, (ExonError, OSError)):
                raise
            if client is None:
                drop_client(address)
            now = clock()
            if failing_since is None:
                failing_since = now
            if now - failing_since >= replay_timeout:
                done = "nothing" if last is None else f"up to position {last}"
                raise ReplayFailed(
                    f"exon: replaying {recording!r} [{start}, {end}) from the archive at "
                    f"{address} failed for {replay_timeout:g} s (option replayTimeout); "
                    f"{done} was read; last error: {type(exc).__name__}: {exc}") from exc
            sleep(delay)
            delay = min(delay * 2, 1.0)
