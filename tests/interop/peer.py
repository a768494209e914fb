"""The real Aeron 1.15.1 Java peer for interop tests: ExonInterop.java, compiled per session.

``java_peer()`` returns a :class:`JavaPeer` or skips (with the reason) when java, javac or
``aeron-peer.sh`` is missing. Messages follow ExonInterop's deterministic pattern.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(os.path.dirname(ROOT), "shared", "tools", "aeron-peer.sh")
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "ExonInterop.java")
FLAGS = ["--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED", "-Dagrona.disable.bounds.checks=true"]
SIZES = (4, 8, 31, 32, 100, 500, 1000, 1376, 1377, 3000, 5000, 9000)
_PATTERN = bytes(k & 0xFF for k in range(256 + max(SIZES)))


def message(i: int) -> bytes:
    """Message ``i`` of ExonInterop: byte j = (i * 31 + j) & 0xff, bytes 0..3 = i (LE)."""
    n = SIZES[i % len(SIZES)]
    start = (i * 31) & 0xFF
    return i.to_bytes(4, "little") + _PATTERN[start + 4:start + n]


@dataclass
class JavaPeer:
    classpath: str

    def command(self, mode: str, channel: str, stream: int, count: int, *args: str,
                props: tuple[str, ...] = ()) -> tuple[list[str], str]:
        aeron_dir = f"/dev/shm/exon-interop-java-{uuid.uuid4().hex[:12]}"
        return ["java", *FLAGS, *props, "-cp", self.classpath, "ExonInterop", mode, aeron_dir,
                channel, str(stream), str(count), *args], aeron_dir


def java_peer(build_dir: str) -> JavaPeer:
    missing = [tool for tool in ("java", "javac") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"interop: {', '.join(missing)} not installed")
    if not os.path.exists(SCRIPT):
        pytest.skip(f"interop: {SCRIPT} not found")
    cp = subprocess.run([SCRIPT, "classpath"], capture_output=True, text=True, timeout=600,
                        check=True).stdout.strip().splitlines()[-1]
    subprocess.run(["javac", "-d", build_dir, "-cp", cp, SOURCE], check=True, timeout=120)
    return JavaPeer(classpath=f"{cp}:{build_dir}")


def stop(proc: subprocess.Popen[str], aeron_dir: str) -> None:
    """Kill our own Java process if it is still running and remove its Aeron dir."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    shutil.rmtree(aeron_dir, ignore_errors=True)
