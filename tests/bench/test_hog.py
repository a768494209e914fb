"""``exon bench sockets --hog``: a spinning process pinned to one CPU for the bench."""

from __future__ import annotations

import json
import os
import time

import pytest

from exon.bench import report
from exon.bench.hog import cpu_hog


def _children() -> set[int]:
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        found.add(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return found


def test_the_hog_spins_on_the_last_cpu_and_every_line_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    before = _children()
    last = max(os.sched_getaffinity(0))
    with cpu_hog() as cpu:
        assert cpu == last
        [pid] = _children() - before
        assert os.sched_getaffinity(pid) == {last}
        time.sleep(0.3)
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        assert fields[0] == "R" or int(fields[11]) > 0  # running, or has used CPU
        report.emit("x", exon=1.0, peer=2.0, peer_name="p", unit="u", higher_is_better=True)
    report.emit("y", exon=1.0, peer=2.0, peer_name="p", unit="u", higher_is_better=True)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["hog"] == last
    assert "hog" not in lines[1]
    assert pid not in _children()  # ended with the block


def test_a_cpu_this_process_may_not_use_is_refused() -> None:
    with pytest.raises(ValueError, match="is not one this process may use"), \
            cpu_hog(cpu=10_000):
        pass
