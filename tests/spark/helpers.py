"""Test helpers: an archive service subprocess, producers, and a Spark query in a
subprocess that the test can kill hard."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from typing import Any

from exon.spark.session import spark_env

REPO = pathlib.Path(__file__).resolve().parents[2]


class ArchiveService:
    """``exon archive serve`` in a subprocess on 127.0.0.1 (``with``: started, then stopped
    by SIGTERM; ``restart()`` comes back on the same port and directory)."""

    def __init__(self, directory: pathlib.Path, ingest: dict[str, int], *,
                 fsync: str = "none", segment_length: int | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.args = args
        self.ingest = ingest
        self.fsync = fsync
        self.segment_length = segment_length
        self.proc: subprocess.Popen[str] | None = None
        self.log = directory.parent / "archive-serve.log"
        self.address = ""

    def start(self, endpoint: str = "127.0.0.1:0", timeout: float = 30.0) -> str:
        args = [sys.executable, "-m", "exon.cli", "archive", "serve", "--dir",
                str(self.directory), "--endpoint", endpoint, "--fsync", self.fsync]
        for name, tag in self.ingest.items():
            args += ["--ingest", f"{name}={tag}"]
        if self.segment_length:
            args += ["--segment-length", str(self.segment_length)]
        args += list(self.args)
        # stderr to a file, never an unread pipe: the service writes one line per event,
        # and once a pipe's 64 KiB fill, its next event blocks it (it stops answering)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log,
                                         text=True, cwd=REPO)
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"archive serve did not print its address: {line!r}; "
                               f"{self.log.read_text(errors='replace')[-2000:]}")
        self.address = line
        return line

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        if proc.stdout is not None:
            proc.stdout.close()

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def __enter__(self) -> ArchiveService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def push_events(address: str, recording: str, payloads: Iterable[bytes],
                timeout: float = 30.0) -> int:
    """PUSH ``payloads`` to the recording's ingest; return once all are durable."""
    from exon.archive import ArchiveClient
    from exon.spark.sink import push_rows

    with ArchiveClient(address, timeout=timeout) as ac:
        return push_rows(ac.node, ac.ingest_peer(recording), payloads, timeout=timeout)


def events(count: int, *, start: int = 0, keys: int = 4) -> list[bytes]:
    """JSON events ``{"key", "value", "seq"}``: seq is unique, value = seq."""
    return [json.dumps({"key": f"k{i % keys}", "value": float(i), "seq": i}).encode()
            for i in range(start, start + count)]


def require_java() -> None:
    """Skip the test (naming what is missing) when there is no JVM for PySpark."""
    import shutil

    import pytest

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("java is not installed: PySpark needs a JVM (install a JDK 17)")


def wait_for(predicate: Any, timeout: float, interval: float = 0.1, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class StandaloneCluster:
    """A Spark standalone cluster on 127.0.0.1: one master and ``workers`` worker JVMs of
    ``cores`` cores each, started with the ``spark-class`` script the pyspark package ships
    (its wheel has no ``sbin/start-master.sh``; ``docs/spark.md``, Scale). Executors import
    exon from the tree under test (``spark_env``'s PYTHONPATH, which the workers pass on)."""

    def __init__(self, directory: pathlib.Path, *, workers: int = 1, cores: int = 2,
                 memory: str = "1g") -> None:
        import pyspark

        self.home = pathlib.Path(pyspark.__file__).resolve().parent
        self.directory = directory
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.procs: list[subprocess.Popen[bytes]] = []
        self.url = ""

    def _env(self) -> dict[str, str]:
        return {**os.environ, **spark_env(), "SPARK_HOME": str(self.home),
                "SPARK_LOG_DIR": str(self.directory / "logs"),
                "SPARK_WORKER_DIR": str(self.directory / "work"),
                "SPARK_LOCAL_DIRS": str(self.directory / "local"),
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
                "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=false"}

    def _launch(self, name: str, *args: str) -> pathlib.Path:
        log = self.directory / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(self.home / "bin" / "spark-class"), *args],
                                    stdout=out, stderr=subprocess.STDOUT, env=self._env(),
                                    start_new_session=True)
        self.procs.append(proc)
        return log

    def _wait(self, logs: dict[str, pathlib.Path], ready: str, timeout: float) -> list[str]:
        """The first match of ``ready`` in each log (the JVMs start side by side)."""
        import re

        found: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, log in logs.items():
                match = re.search(ready, log.read_text(errors="replace"))
                if match:
                    found[name] = match.group(0)
            if len(found) == len(logs):
                return [found[name] for name in logs]
            if any(proc.poll() is not None for proc in self.procs):
                break
            time.sleep(0.1)
        missing = [name for name in logs if name not in found]
        raise RuntimeError(f"spark {', '.join(missing)} did not start: " + " | ".join(
            logs[name].read_text(errors="replace")[-1500:] for name in missing))

    def start(self, timeout: float = 90.0) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        master = self._launch("master", "org.apache.spark.deploy.master.Master", "--host",
                              "127.0.0.1", "--port", "0", "--webui-port", "0")
        self.url = self._wait({"master": master}, r"spark://127\.0\.0\.1:\d+", timeout)[0]
        workers = {f"worker{i}": self._launch(
            f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host",
            "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", str(self.cores),
            "--memory", self.memory, "--work-dir", str(self.directory / f"work{i}"))
            for i in range(self.workers)}
        self._wait(workers, r"Successfully registered with master", timeout)
        return self.url

    def executor_logs(self) -> list[pathlib.Path]:
        """The stderr of every executor the workers ran (``work<i>/app-*/<id>/stderr``)."""
        return sorted(self.directory.glob("work*/app-*/*/stderr"))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(15)
        self.procs = []

    def __enter__(self) -> StandaloneCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
