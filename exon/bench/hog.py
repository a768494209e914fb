"""``--hog``: a CPU hog beside a benchmark, one process spinning on one core.

Issue #34's goals must hold on a quiet machine and beside a hog: on a 2-core machine a bench
that wins only by spinning both cores loses the moment another process wants one. The hog
is a child process that spins in pure Python (no syscalls, no sleeping), pinned to the
machine's last CPU, from before the bench's first case to after its last; every JSON line
of the bench says ``"hog": <cpu>``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from exon.bench import report

__all__ = ["cpu_hog"]

_SPIN = "while True:\n    pass\n"


@contextmanager
def cpu_hog(cpu: int | None = None) -> Iterator[int]:
    """Run a spinning process pinned to ``cpu`` (default: the last CPU this process may
    use) while the block runs; yields the CPU. Every :func:`~exon.bench.report.emit` in
    the block adds ``hog`` to its line."""
    allowed = sorted(os.sched_getaffinity(0))
    target = allowed[-1] if cpu is None else cpu
    if target not in allowed:
        raise ValueError(f"cpu {target} is not one this process may use ({allowed})")
    proc = subprocess.Popen([sys.executable, "-c", _SPIN])
    try:
        os.sched_setaffinity(proc.pid, {target})
        with report.extra_fields(hog=target):
            yield target
    finally:
        proc.kill()
        proc.wait(10)
