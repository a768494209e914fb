"""Run the real Aeron 1.15.1 Java peer (interop/ExonPeer.java) from tests.

The jar comes from ``../shared/tools/aeron-peer.sh install`` (cache ~/.cache/exon/aeron-peer);
tests skip, saying why, when java, javac or the jar is missing. ``message(seed, i)`` is the
twin of ExonPeer.message: both sides generate the same messages.
"""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "interop" / "ExonPeer.java"
CACHE = Path(os.environ.get("AERON_PEER_CACHE", Path.home() / ".cache" / "exon" / "aeron-peer"))
JARS = [CACHE / "agrona-jdk17-ioutil-patch.jar", CACHE / "aeron-all-1.15.1.jar"]
SIZES = [0, 1, 31, 100, 1000, 1376, 1377, 3000, 8000]
MASK = (1 << 64) - 1


def _next(state: int) -> int:
    return (state * 6364136223846793005 + 1442695040888963407) & MASK


def message(seed: int, i: int) -> bytes:
    s = _next((seed ^ (i * 0x9E3779B97F4A7C15)) & MASK)
    length = SIZES[(s >> 33) % len(SIZES)]
    s = _next(s)
    base = (s >> 40) + i
    return ((base + 31 * np.arange(length, dtype=np.int64)) & 0xFF).astype(np.uint8).tobytes()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compile_peer(directory: Path) -> Path:
    """Compile ExonPeer into ``directory`` or skip the test with the reason."""
    missing = [name for name in ("java", "javac") if shutil.which(name) is None]
    if missing:
        pytest.skip(f"interop needs {', '.join(missing)} on PATH")
    absent = [str(j) for j in JARS if not j.exists()]
    if absent:
        pytest.skip(f"Aeron jar not installed ({', '.join(absent)}); run "
                    "../shared/tools/aeron-peer.sh install")
    classpath = os.pathsep.join(str(j) for j in JARS)
    subprocess.run(["javac", "-d", str(directory), "-cp", classpath, str(SOURCE)], check=True,
                   timeout=120, capture_output=True)
    return directory


class JavaPeer:
    """One ExonPeer process with its own embedded driver directory."""

    def __init__(self, classes: Path, mode: str, channel: str, stream: int, count: int,
                 seed: int, timeout_s: int, props: list[str] | None = None) -> None:
        self.aeron_dir = tempfile.mkdtemp(prefix="exon-h5-aeron-", dir="/dev/shm")
        classpath = os.pathsep.join([str(classes), *map(str, JARS)])
        cmd = ["java", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
               f"-Daeron.dir={self.aeron_dir}", *(props or []), "-cp", classpath, "ExonPeer",
               mode, channel, str(stream), str(count), str(seed), str(timeout_s)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)

    def wait_ready(self, timeout: float = 30.0) -> None:
        sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        lines = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not sel.select(timeout=0.5):
                if self.proc.poll() is not None:
                    break
                continue
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.strip() == "READY":
                return
        raise AssertionError(f"java peer not ready: {''.join(lines)}")

    def result(self, timeout: float) -> str:
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            out, _ = self.proc.communicate()
            return "TIMEOUT " + out
        return out.strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its handle
            self.proc.wait(timeout=10)
        shutil.rmtree(self.aeron_dir, ignore_errors=True)
