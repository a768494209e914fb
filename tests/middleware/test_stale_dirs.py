"""A node killed with SIGKILL leaves its embedded driver's directory in /dev/shm; the next
node that starts removes it, as Aeron does, and never a live one's (issue #13)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid

import pytest

import exon
from exon.middleware.node_transport import sweep_stale_node_dirs
from exon.transport.aeron.settings import driver_dir_base
from tests.sockets.helpers import kill, python_process, read_line


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=10)
    return proc.pid


def _fake_dir(base: str, pid: int) -> str:
    path = os.path.join(base, f"exon-node-{pid}-{uuid.uuid4().hex[:12]}")
    os.makedirs(os.path.join(path, "publications"))
    with open(os.path.join(path, "cnc.dat"), "wb") as f:
        f.write(b"\0" * 4096)
    return path


def test_sweep_removes_dead_pids_dirs_only(tmp_path) -> None:
    base = str(tmp_path)
    stale = _fake_dir(base, _dead_pid())
    live = _fake_dir(base, os.getppid())  # a live process that is not us
    mine = _fake_dir(base, os.getpid())
    other = os.path.join(base, "exon-spark-1-abc")
    os.makedirs(other)
    odd = os.path.join(base, "exon-node-notapid-x")
    os.makedirs(odd)
    assert sweep_stale_node_dirs(base) == [os.path.basename(stale)]
    assert not os.path.exists(stale)
    for kept in (live, mine, other, odd):
        assert os.path.isdir(kept)
    assert sweep_stale_node_dirs(os.path.join(base, "missing")) == []


KILLED_NODE = """
import pytest

import exon
node = exon.Node("127.0.0.1:0", driver="embedded")
print(node.driver_dir, flush=True)
import time
time.sleep(60)
"""


def test_a_killed_nodes_dir_is_cleaned_when_the_next_node_starts() -> None:
    proc = python_process(KILLED_NODE)
    try:
        left = read_line(proc)
        kill(proc, signal.SIGKILL)
        assert os.path.isdir(left)  # SIGKILL: nobody cleaned up
        live = _fake_dir(driver_dir_base(), os.getppid())
        try:
            with exon.Node("127.0.0.1:0", driver="embedded") as node:
                assert node.driver_kind == "embedded"
                assert not os.path.exists(left)
                assert os.path.isdir(live)
                assert os.path.isdir(node.driver_dir)
        finally:
            shutil.rmtree(live, ignore_errors=True)
    finally:
        kill(proc)


def test_a_prefix_names_the_embedded_drivers_dir_and_what_its_sweep_removes(tmp_path) -> None:
    """``Node(driver_dir_prefix=...)`` (Spark's ``exon-spark``) names the embedded driver's
    directory; ``exon.sweep_stale_driver_dirs(prefix)`` removes only that prefix's dead."""
    base = str(tmp_path)
    dead = _dead_pid()
    stale = os.path.join(base, f"exon-test-{dead}-abc")
    node_dir = _fake_dir(base, dead)  # exon-node-...: another prefix, left alone
    os.makedirs(stale)
    assert exon.sweep_stale_driver_dirs("exon-test", base) == [os.path.basename(stale)]
    assert os.path.isdir(node_dir)
    assert exon.sweep_stale_driver_dirs(base=base) == [os.path.basename(node_dir)]
    with exon.Node("127.0.0.1:0", driver="embedded", driver_dir_prefix="exon-test") as node:
        assert os.path.basename(node.driver_dir).startswith(f"exon-test-{os.getpid()}-")
    assert not os.path.exists(node.driver_dir)  # the node's driver removed it on close


@pytest.mark.parametrize("prefix", ["", ".", "..", "a/b", "a\0b"])
def test_a_prefix_that_is_no_file_name_is_refused(prefix: str) -> None:
    with pytest.raises(exon.ConfigurationError, match="driver_dir_prefix"):
        exon.Node("127.0.0.1:0", driver="embedded", driver_dir_prefix=prefix)
    with pytest.raises(exon.ConfigurationError, match="driver_dir_prefix"):
        exon.sweep_stale_driver_dirs(prefix)
