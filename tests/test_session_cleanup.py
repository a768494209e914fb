"""The suite ends the processes it left orphaned (tests/conftest.py), and only those."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LEAVES_AN_ORPHAN = '''
import os, subprocess, sys, time

def test_leave_an_orphan(tmp_path_factory):
    out = os.environ["ORPHAN_PID_FILE"]
    # a child that daemonizes (as PySpark's worker daemon does): reparented to init
    code = "import os, sys, time\\nif os.fork() == 0:\\n    os.setsid()\\n" \\
           "    open(sys.argv[1], 'w').write(str(os.getpid()))\\n    time.sleep(120)\\n"
    subprocess.run([sys.executable, "-c", code, out], check=True)
    for _ in range(100):
        if os.path.exists(out) and open(out).read():
            break
        time.sleep(0.02)
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_a_session_ends_the_orphans_it_started(tmp_path: Path) -> None:
    test_file = tmp_path / "test_orphan.py"
    test_file.write_text(LEAVES_AN_ORPHAN)
    pid_file = tmp_path / "orphan.pid"
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 start_new_session=True)  # started outside that session
    try:
        env = dict(os.environ, ORPHAN_PID_FILE=str(pid_file))
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
             str(test_file)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        pid = int(pid_file.read_text())
        assert f"orphaned process(es) this session started: [{pid}]" in run.stdout
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(pid)
        assert bystander.poll() is None  # not one of that session's processes
    finally:
        bystander.kill()
        bystander.wait(10)
