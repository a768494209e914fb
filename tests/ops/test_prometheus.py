"""A real Prometheus server scrapes ``exon stat --serve`` (issue #31): a node and an
archive, and a query through Prometheus's HTTP API returns the message count the test
sent. Needs Debian's ``prometheus`` (``.ci/run`` installs it); skips, saying why, without
it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import exon
from exon.archive.service import ArchiveService
from exon.ops.metrics import serve_metrics

pytestmark = pytest.mark.slow

SCRAPE = "1s"
WAIT = 60.0  #: seconds a query may take to show a value (a few scrapes on a loaded host)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def prometheus(tmp_path: Any) -> Iterator[Callable[[int], str]]:
    """``start(metrics_port)`` runs Prometheus scraping it every second; returns its API
    URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary (Debian package 'prometheus', installed by .ci/run "
                    "where apt-get and root are)")
    procs: list[subprocess.Popen[bytes]] = []

    def start(metrics_port: int) -> str:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {SCRAPE}\n  evaluation_interval: {SCRAPE}\n"
            f"scrape_configs:\n  - job_name: exon\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{metrics_port}']\n")
        port = free_port()
        log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - closed below
        procs.append(subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log))
        log.close()
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def query(api: str, expr: str) -> list[float]:
    """The values of an instant query (empty: no series, or Prometheus not up yet)."""
    url = f"{api}/api/v1/query?query={urllib.parse.quote(expr)}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            data = json.load(answer)
    except OSError:
        return []
    assert data["status"] == "success", data
    return [float(r["value"][1]) for r in data["data"]["result"]]


def wait_for(api: str, expr: str, expected: float) -> list[float]:
    deadline = time.monotonic() + WAIT
    values = query(api, expr)
    while values != [expected] and time.monotonic() < deadline:
        time.sleep(0.5)
        values = query(api, expr)
    return values


def test_prometheus_scrapes_a_node_and_an_archive(
        make_node: Callable[..., exon.Node], driver: Any, tmp_path: Any,
        prometheus: Callable[[int], str]) -> None:
    sent = 137
    receiver, sender = make_node(), make_node()
    pull = receiver.socket("pull", tag=5, credits=1024)
    push = sender.socket("push")
    push.link(f"{receiver.address}/5")
    for i in range(sent):
        push.send(b"m%d" % i)
    service = ArchiveService(str(tmp_path / "arch"), ingest={"orders": 10},
                             node=make_node()).start()
    try:
        producer = sender.socket("push")
        producer.link(f"{service.address}/10")
        for i in range(sent):
            producer.send(b"record %d" % i)
        producer.close(timeout=10)  # returns once every message was recorded
        stop = service.archive.stop_position("orders")
        with serve_metrics("127.0.0.1:0", [driver.dir]) as server:
            api = prometheus(server.port)
            inbox = (f'exon_socket_inbox_messages{{node="{receiver.address}",tag="5",'
                     f'type="pull"}}')
            assert wait_for(api, inbox, sent) == [sent]
            assert wait_for(api, 'exon_archive_recording_stop_position_bytes'
                                 '{recording="orders"}', stop) == [stop]
            assert query(api, f'exon_socket_links{{node="{receiver.address}"}}') == [1]
            assert query(api, 'exon_driver_up') == [1]
            # the receiver takes them: the inbox empties, and Prometheus sees it
            for _ in range(sent):
                pull.receive(timeout=5)
            assert wait_for(api, inbox, 0) == [0]
    finally:
        service.close()
