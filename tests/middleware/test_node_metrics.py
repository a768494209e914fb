"""node.metrics() and the per-socket series in the CnC (issue #31): the same figures under
the same Prometheus names, moving as traffic moves, gone with their socket."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

import exon
from exon.middleware.node_metrics import SOCKET_METRICS, STATISTIC_METRICS
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.stat import add_rates, snapshot
from tests.transport.aeron.driver_fixtures import wait_until


def value(metrics: dict[str, list[dict[str, Any]]], name: str, **labels: str) -> float:
    found = [s["value"] for s in metrics.get(name, [])
             if all(s["labels"].get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, metrics.get(name))
    return float(found[0])


def cnc_metrics(driver_dir: str, node: exon.Node) -> dict[tuple[str, str, str], int]:
    """The series ``node`` published in its driver's CnC: (name, tag, reason) -> value."""
    node.statistics()  # publishes now
    with CncFile.open(driver_dir) as cnc:
        snap = add_rates(snapshot(cnc), None, None)
    return {(m["name"], m["labels"].get("tag", ""), m["labels"].get("reason", "")): m["value"]
            for m in snap["metrics"] if m["address"] == node.address}


def test_socket_figures_move_with_traffic(make_node: Callable[..., exon.Node]) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=5, credits=64)
    push = a.socket("push")
    push.link(f"{b.address}/5")
    pull.wait_for_links(1)
    for _ in range(20):
        push.send(b"x" * 8)
    assert wait_until(lambda: value(b.metrics(), "exon_socket_inbox_messages", tag="5") == 20)
    mb = b.metrics()
    assert value(mb, "exon_socket_links", tag="5", type="pull") == 1
    assert value(mb, "exon_node_links", node=b.address) == 1
    assert value(mb, "exon_node_drops_total", reason="malformed") == 0
    assert value(mb, "exon_node_frames_received_total") >= 1  # LINK (DATA: the fast path)
    # the sender's credits went down by what it sent (none confirmed: nothing taken)
    assert value(a.metrics(), "exon_socket_credits_available", type="push") == 64 - 20
    for _ in range(20):
        pull.receive(timeout=5)
    assert wait_until(lambda: value(b.metrics(), "exon_socket_inbox_messages", tag="5") == 0)
    assert wait_until(lambda: value(a.metrics(), "exon_socket_credits_available",
                                    type="push") == 64)


def test_the_cnc_carries_what_metrics_returns(make_node: Callable[..., exon.Node],
                                              driver: Any) -> None:
    node = make_node()
    req = node.socket("req")
    pull = node.socket("pull", tag=9)
    series = cnc_metrics(driver.dir, node)
    socket_names = {name for name in SOCKET_METRICS if name != "exon_socket_drops_total"}
    assert {n for n, tag, _ in series if tag == "9"} == socket_names
    assert {n for n, tag, _ in series if tag == str(req.tag)} == socket_names | {
        "exon_socket_drops_total"}
    assert ("exon_socket_drops_total", str(req.tag), "stale_reply") in series
    metrics = node.metrics()
    for (name, tag, reason), v in series.items():
        labels = {"tag": tag, **({"reason": reason} if reason else {})}
        assert value(metrics, name, **labels) == v
    pull.close()
    req.close()
    assert not cnc_metrics(driver.dir, node), "a closed socket's series are freed"


def test_every_statistic_has_a_metric(make_node: Callable[..., exon.Node]) -> None:
    node = make_node()
    named = {f.name for f in dataclasses.fields(node.statistics())} - {"queued_bytes"}
    assert named <= STATISTIC_METRICS.keys(), "a statistic without its own metric name"
    metrics = node.metrics()
    for statistic, (name, kind, labels) in STATISTIC_METRICS.items():
        assert name.endswith("_total") == (kind == "counter"), statistic
        assert any(s["labels"].items() >= labels.items() for s in metrics[name]), statistic


@pytest.mark.parametrize(("name", "kind", "labels"), [
    ("queue_depth", "gauge", {}),                       # no exon_ prefix
    ("exon_Queue", "gauge", {}),                        # upper case
    ("exon_app_sent", "counter", {}),                   # a counter without _total
    ("exon_app_depth_total", "gauge", {}),              # a gauge with _total
    ("exon_app_depth", "histogram", {}),                # no such kind
    ("exon_app_depth", "gauge", {"queue": "a b"}),      # a space in a label value
    ("exon_app_depth", "gauge", {"queue": "a=b"}),
])
def test_add_metric_refuses_bad_names_and_labels(make_node: Callable[..., exon.Node], name: str,
                                                 kind: Any, labels: dict[str, str]) -> None:
    with pytest.raises(exon.ConfigurationError):
        make_node().add_metric(name, kind, **labels)


def test_add_metric_publishes_a_series(make_node: Callable[..., exon.Node], driver: Any) -> None:
    node = make_node()
    m = node.add_metric("exon_app_queue_depth", queue="in")
    m.set(12)
    assert cnc_metrics(driver.dir, node)[("exon_app_queue_depth", "", "")] == 12
    m.close()
    assert ("exon_app_queue_depth", "", "") not in cnc_metrics(driver.dir, node)
