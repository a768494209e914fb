"""The Grafana dashboard and the alerting rules shipped in exon/ops name metrics that exist
(issue #31)."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess

import pytest

from exon.ops.metrics import known_metrics

OPS = pathlib.Path(__file__).resolve().parents[2] / "exon" / "ops"
METRIC = re.compile(r"\bexon_[a-z0-9_]+")


def dashboard_queries() -> list[tuple[str, str]]:
    board = json.loads((OPS / "dashboard.json").read_text())
    return [(panel["title"], target["expr"]) for panel in board["panels"]
            for target in panel.get("targets", [])]


def alert_queries() -> list[tuple[str, str]]:
    text = (OPS / "alerts.yml").read_text()
    return re.findall(r"- alert: (\w+)\n\s+expr: (.+)", text)


def test_every_dashboard_query_names_an_existing_metric() -> None:
    queries = dashboard_queries()
    assert len(queries) >= 20
    known = known_metrics()
    for title, expr in queries:
        names = METRIC.findall(expr)
        assert names, (title, expr)
        unknown = [n for n in names if n not in known]
        assert not unknown, f"panel {title!r} queries {unknown}, which exon does not serve"


def test_the_dashboard_covers_the_key_metrics() -> None:
    queried = {n for _, expr in dashboard_queries() for n in METRIC.findall(expr)}
    assert {"exon_socket_credits_available", "exon_socket_inbox_messages",
            "exon_socket_cookies_pending", "exon_socket_links", "exon_socket_drops_total",
            "exon_archive_recording_stop_position_bytes", "exon_archive_recording_bytes",
            "exon_archive_recording_replays", "exon_archive_consumer_lag_bytes"} <= queried


def test_the_ten_alerts_name_existing_metrics() -> None:
    alerts = alert_queries()
    assert len(alerts) == 10
    known = known_metrics()
    for alert, expr in alerts:
        names = METRIC.findall(expr)
        assert names, alert
        unknown = [n for n in names if n not in known]
        assert not unknown, (alert, unknown)
    doc = (OPS.parents[1] / "docs" / "guide" / "observability.md").read_text()
    missing = [alert for alert, _ in alerts if f"`{alert}`" not in doc]
    assert not missing, f"alerts not explained in observability.md: {missing}"


def test_promtool_accepts_the_rules() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool (Debian package 'prometheus', installed by .ci/run)")
    result = subprocess.run([promtool, "check", "rules", str(OPS / "alerts.yml")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
