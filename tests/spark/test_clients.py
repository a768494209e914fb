"""Process-wide nodes of the Spark side: reused, and their leftovers swept."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from exon.spark import clients


def test_sweep_removes_only_the_directories_of_processes_that_are_gone(
        tmp_path: pathlib.Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    gone = tmp_path / f"{clients.DIR_PREFIX}-{dead_pid}-abc"
    mine = tmp_path / f"{clients.DIR_PREFIX}-{os.getpid()}-def"
    other = tmp_path / f"exon-node-{dead_pid}-123"  # not ours: left alone
    for directory in (gone, mine, other):
        (directory / "logs").mkdir(parents=True)
    removed = clients.sweep_stale_dirs(str(tmp_path))
    assert removed == [gone.name]
    assert not gone.exists()
    assert mine.exists()
    assert other.exists()


def test_one_node_per_process_and_endpoint_until_closed() -> None:
    node = clients.process_node("127.0.0.1:9")
    try:
        assert clients.process_node("127.0.0.1:10") is node
        assert os.path.basename(node.driver_dir).startswith(
            f"{clients.DIR_PREFIX}-{os.getpid()}-")
    finally:
        clients.close_all()
    assert node.closed
    assert not os.path.exists(node.driver_dir)
    again = clients.process_node("127.0.0.1:9")
    try:
        assert again is not node
    finally:
        clients.close_all()
