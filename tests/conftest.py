"""Suite-wide setup.

Nodes of the test suite embed their own driver unless a test asks otherwise: a host
driver someone left running at /dev/shm/exon-<user> (``exon driver``) must not be picked
up by ``exon.Node()``'s default (``driver="auto"``). Set at import time, so the worker
processes the tests start inherit it. Tests of the choice itself pass ``driver=`` or
change the variable with ``monkeypatch``.
"""

from __future__ import annotations

import os

os.environ["EXON_NODE_DRIVER"] = "embedded"

# Hypothesis' per-example deadline (200 ms) measures the machine, not the code: on a shared,
# loaded CI host it fails tests that are correct. Speed is measured by the benchmarks.
from hypothesis import settings

settings.register_profile("exon-suite", deadline=None)
settings.load_profile("exon-suite")


# ---- processes the session leaves behind ------------------------------------------------
#
# Every process the suite starts (and every process those start) inherits this mark. When
# the session ends, it ends those of them that were left orphaned -- PySpark's Python
# worker daemon puts itself in its own process group, so it can outlive a JVM that a test
# killed with its group -- by pid, and no other process.

import signal  # noqa: E402
import uuid  # noqa: E402

_MARK_NAME = "EXON_TEST_SESSION"
os.environ[_MARK_NAME] = uuid.uuid4().hex


def _orphans_of_this_session() -> list[int]:
    mark = f"{_MARK_NAME}={os.environ[_MARK_NAME]}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
        if ppid == 1 and mark in environ:
            found.append(int(entry))
    return found


def pytest_sessionfinish(session, exitstatus) -> None:  # type: ignore[no-untyped-def]
    ended = []
    for pid in _orphans_of_this_session():
        try:
            os.kill(pid, signal.SIGKILL)
            ended.append(pid)
        except OSError:
            pass
    if ended:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\nended {len(ended)} orphaned process(es) this session started: "
                                f"{ended}")
