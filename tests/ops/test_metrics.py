"""``exon stat --serve``: /metrics in Prometheus's text format (issue #31)."""

from __future__ import annotations

import os
import shutil
import socket
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import exon
from exon.middleware.node_metrics import STATISTIC_METRICS
from exon.ops.metrics import DriverCollector, known_metrics, serve_metrics
from tests.sockets.helpers import exon_cli as start_cli
from tests.sockets.helpers import kill as stop
from tests.sockets.helpers import read_line, run_cli
from tests.transport.aeron.driver_fixtures import wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> tuple[list[Any], Samples]:
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    families = list(text_string_to_metric_families(body))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families for s in f.samples}
    return families, samples


def pick(samples: Samples, name: str, **labels: str) -> list[float]:
    return [v for (n, ls), v in samples.items()
            if n == name and dict(ls).items() >= labels.items()]


def test_metrics_parse_and_name_what_exists(make_node: Callable[..., exon.Node],
                                            driver: Any) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=5)
    push = a.socket("push")
    push.link(f"{b.address}/5")
    for _ in range(7):
        push.send(b"hello")
    assert wait_until(lambda: pull.windows() and b.metrics() and any(
        s["value"] == 7 for s in b.metrics()["exon_socket_inbox_messages"]))
    a.statistics(), b.statistics()  # the CnC now
    with serve_metrics("127.0.0.1:0", [driver.dir]) as server:
        families, samples = scrape(server.url)
    known = known_metrics()
    for family in families:
        kind = family.type
        name = family.name + ("_total" if kind == "counter" else "")
        assert name in known, name
        assert known[name][0] == kind, name
        assert name.startswith("exon_")
    assert pick(samples, "exon_socket_inbox_messages", node=b.address, tag="5",
                type="pull", dir=driver.dir) == [7]
    assert pick(samples, "exon_socket_links", node=a.address, type="push") == [1]
    assert pick(samples, "exon_driver_up", dir=driver.dir) == [1]
    assert pick(samples, "exon_node_links", node=b.address) == [1]
    reasons = [labels["reason"] for name, _, labels in STATISTIC_METRICS.values()
               if name == "exon_node_drops_total"]
    assert len(reasons) >= 7
    assert len(pick(samples, "exon_node_drops_total", node=b.address)) == len(reasons)
    assert pick(samples, "exon_image_lag_bytes")  # the streams of exon stat's links


def test_counters_move_as_traffic_moves(make_node: Callable[..., exon.Node],
                                        driver: Any) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=5)
    push = a.socket("push")
    push.link(f"{b.address}/5")
    with serve_metrics("127.0.0.1:0", [driver.dir]) as server:
        a.statistics(), b.statistics()
        _, before = scrape(server.url)
        for _ in range(50):
            push.send(b"x" * 100)
        for _ in range(50):
            pull.receive(timeout=5)
        assert wait_until(lambda: pick(scrape(server.url)[1], "exon_publication_position_bytes")
                          != pick(before, "exon_publication_position_bytes"), timeout=5)
        a.statistics(), b.statistics()
        _, after = scrape(server.url)
    moved = sum(after[k] - v for k, v in before.items()
                if k in after and k[0] == "exon_publication_position_bytes")
    assert moved >= 50 * 100
    assert pick(after, "exon_socket_inbox_messages", tag="5") == [0]


def test_a_node_that_went_away_disappears(make_node: Callable[..., exon.Node],
                                          driver: Any) -> None:
    stays, goes = make_node(), make_node()
    goes.socket("pull", tag=3)
    stays.statistics(), goes.statistics()
    with serve_metrics("127.0.0.1:0", [driver.dir]) as server:
        _, samples = scrape(server.url)
        assert pick(samples, "exon_socket_links", node=goes.address)
        address = goes.address
        goes.close()  # its driver frees its counters with its client (CLIENT_CLOSE)

        def gone() -> bool:
            return not [k for k in scrape(server.url)[1] if ("node", address) in k[1]]

        assert wait_until(gone, timeout=10)
        _, samples = scrape(server.url)
    assert pick(samples, "exon_node_links", node=stays.address) == [0]


def test_every_driver_of_the_host_without_a_dir() -> None:
    """An embedded driver (a node without the host's) is found under /dev/shm, and its
    series go with its directory."""
    node = exon.Node(driver="embedded")
    try:
        node.statistics()
        collector = DriverCollector(None)
        dirs = {s.labels["dir"] for f in collector.collect() for s in f.samples}
        assert node.driver_dir in dirs
    finally:
        directory = node.driver_dir
        node.close()
    assert not os.path.exists(directory)
    assert directory not in {s.labels["dir"] for f in collector.collect() for s in f.samples}
    collector.close()


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(exon.ConfigurationError, match="in use"):
            serve_metrics(f"127.0.0.1:{port}")
        result = run_cli("stat", "--serve", f"127.0.0.1:{port}", timeout=60)
    assert result.returncode == 2
    assert "in use" in result.stderr


def test_the_cli_serves_until_terminated(driver: Any) -> None:
    proc = start_cli("stat", "--serve", "127.0.0.1:0", "--dir", driver.dir)
    try:
        line = read_line(proc)
        assert line.startswith("serving http://127.0.0.1:")
        url = line.split()[1]
        _, samples = scrape(url)
        assert pick(samples, "exon_driver_up", dir=driver.dir) == [1]
    finally:
        stop(proc, 15)
    assert proc.returncode == 0


def test_a_dir_without_a_driver_serves_it_down(tmp_path: Any) -> None:
    collector = DriverCollector([str(tmp_path)])
    assert list(collector.collect()) == []
    shutil.rmtree(tmp_path)
    assert list(collector.collect()) == []
