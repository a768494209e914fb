"""``exon stat --serve HOST:PORT``: every counter of the host's drivers in Prometheus's
text format at ``/metrics``, built with ``prometheus_client``.

:class:`DriverCollector` reads the counters at scrape time (a custom collector: nothing is
kept between scrapes, so the series of a node or a driver that went away disappear with
it). What it reads is what ``exon stat`` shows (:mod:`exon.transport.aeron.stat`), from
the CnC of every driver directory it is given, or of every live driver of the host
(``exon-*`` under ``/dev/shm``): the host driver's, and the embedded drivers of nodes that
run without one. Reading costs the drivers and the nodes nothing: the counters are memory
they write and the scraper maps.

The names (every series labelled ``dir``, the driver directory):

* the driver: ``exon_driver_up``, ``exon_driver_heartbeat_age_seconds``, and its system
  counters as ``exon_driver_<name>_total`` (``exon_driver_bytes_sent_total``, ...);
* per publication and image (``session``, ``stream``, ``channel``):
  ``exon_publication_position_bytes``, ``exon_image_lag_bytes``, ... (:data:`STREAM_METRICS`);
* per node (``node``, its address): its statistics (``exon_node_frames_received_total``,
  ``exon_node_drops_total{reason}``, ...: :data:`~exon.middleware.node_metrics.STATISTIC_METRICS`);
* per socket (``node``, ``tag``, ``type``): ``exon_socket_credits_available``,
  ``exon_socket_inbox_messages``, ``exon_socket_cookies_pending``, ``exon_socket_links``,
  ``exon_socket_drops_total{reason}``;
* per archive recording (``node``, ``recording``): :data:`~exon.archive.metrics.ARCHIVE_METRICS`;
* any other counter (client heartbeats, doorbells, channel status):
  ``exon_driver_counter{id, type, label}``.
"""

from __future__ import annotations

import errno
import functools
import glob
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exon import errors
from exon.archive.metrics import ARCHIVE_METRICS
from exon.middleware.node_metrics import SOCKET_METRICS, STATISTIC_METRICS, statistic_metric
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import SystemCounter
from exon.transport.aeron.settings import driver_dir_base
from exon.transport.aeron.stat import add_rates, snapshot

__all__ = ["STREAM_METRICS", "DriverCollector", "MetricsServer", "known_metrics",
           "serve_metrics"]

#: system counters that are a state, not a total
_GAUGE_SYSTEM = {SystemCounter.CONTROLLABLE_IDLE_STRATEGY}

#: per-stream figures of ``exon stat``'s links: (group, field) -> (name, kind, help, scale)
STREAM_METRICS: dict[tuple[str, str], tuple[str, str, str, float]] = {
    ("publications", "position"): ("exon_publication_position_bytes", "gauge",
                                   "bytes the publication has written (pub-pos)", 1.0),
    ("publications", "window"): ("exon_publication_window_bytes", "gauge",
                                 "bytes it may write before back pressure", 1.0),
    ("publications", "sent"): ("exon_publication_sent_bytes", "gauge",
                               "bytes the sender has sent (snd-pos, UDP)", 1.0),
    ("publications", "sender_window"): ("exon_publication_sender_window_bytes", "gauge",
                                        "bytes the receivers let the sender send", 1.0),
    ("publications", "back_pressure"): ("exon_publication_back_pressure_events_total",
                                        "counter", "sender back pressure events", 1.0),
    ("images", "received"): ("exon_image_received_bytes", "gauge",
                             "bytes the image has received (rcv-pos)", 1.0),
    ("images", "gap"): ("exon_image_gap_bytes", "gauge",
                        "bytes received beyond a gap, waiting for a retransmit", 1.0),
    ("images", "lag"): ("exon_image_lag_bytes", "gauge",
                        "bytes received the slowest subscriber has not consumed", 1.0),
    ("images", "subscribers"): ("exon_image_subscribers", "gauge",
                                "subscriptions reading the image", 1.0),
    ("images", "rtt_us"): ("exon_image_rtt_seconds", "gauge",
                           "last round trip the image measured", 1e-6),
}

_DRIVER_METRICS: dict[str, tuple[str, str]] = {
    "exon_driver_up": ("gauge", "1 while the driver's heartbeat is fresh, else 0"),
    "exon_driver_heartbeat_age_seconds": ("gauge", "age of the driver's heartbeat"),
    "exon_driver_start_time_seconds": ("gauge", "when the driver started (Unix time)"),
    "exon_driver_error_log_entries": ("gauge", "distinct errors in the driver's error log"),
    "exon_driver_counter": ("gauge", "any other counter of the driver (client heartbeats, "
                                     "doorbells, channel status), by id, type and label"),
}


def _system_metric(counter: SystemCounter) -> tuple[str, str]:
    base = "exon_driver_" + counter.name.lower()
    if counter in _GAUGE_SYSTEM:
        return base, "gauge"
    return base + "_total", "counter"


def known_metrics() -> dict[str, tuple[str, str]]:
    """Every metric name this exporter may serve: {name: (kind, help)} (a counter's name
    with its ``_total``)."""
    return dict(_known())


@functools.cache
def _known() -> dict[str, tuple[str, str]]:
    names: dict[str, tuple[str, str]] = dict(_DRIVER_METRICS)
    for counter in SystemCounter:
        name, kind = _system_metric(counter)
        names[name] = (kind, f"driver system counter: {counter.label}")
    for name, kind, text, _scale in STREAM_METRICS.values():
        names[name] = (kind, text)
    for statistic, (name, kind, labels) in STATISTIC_METRICS.items():
        what = "drops by reason" if "reason" in labels else statistic.replace("_", " ")
        names.setdefault(name, (kind, f"node statistic: {what}"))
    names["exon_node_statistic"] = ("gauge", "a node statistic this version does not name")
    for name, (kind, text) in SOCKET_METRICS.items():
        names[name] = (kind, f"per socket: {text}")
    for name, (kind, text) in ARCHIVE_METRICS.items():
        names[name] = (kind, f"per archive recording: {text}")
    return names


class _Families:
    """Metric families being filled for one scrape, by name."""

    def __init__(self) -> None:
        self._known = _known()  # read only
        self._families: dict[str, tuple[Metric, tuple[str, ...]]] = {}

    def add(self, name: str, kind: str, labels: dict[str, str], value: float) -> None:
        entry = self._families.get(name)
        if entry is None:
            keys = tuple(sorted(labels))
            text = self._known.get(name, (kind, name))[1]
            family: Metric
            if kind == "counter":
                family = CounterMetricFamily(name.removesuffix("_total"), text, labels=keys)
            else:
                family = GaugeMetricFamily(name, text, labels=keys)
            entry = self._families[name] = (family, keys)
        family, keys = entry
        try:
            values = [labels[k] for k in keys]
        except KeyError:  # a label an older writer did not set
            values = [labels.get(k, "") for k in keys]
        # a newer writer's extra label is dropped: the family keeps the known ones
        family.add_metric(values, value)  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[Metric]:
        return (family for family, _keys in self._families.values())


def _add_driver(out: _Families, snap: dict[str, Any]) -> None:
    """Every figure of one driver's sample (:func:`~exon.transport.aeron.stat.add_rates`)."""
    d = {"dir": snap["dir"]}
    out.add("exon_driver_up", "gauge", d, 1.0 if snap["driver_alive"] else 0.0)
    out.add("exon_driver_heartbeat_age_seconds", "gauge", d, snap["heartbeat_age_ms"] / 1000)
    out.add("exon_driver_start_time_seconds", "gauge", d, snap["start_timestamp_ms"] / 1000)
    out.add("exon_driver_error_log_entries", "gauge", d, float(len(snap["errors"])))
    for c in snap["counters"]:
        group = c["group"]
        if c["type_id"] == 0 and group != "other":
            name, kind = _system_metric(SystemCounter(c["id"]))
            out.add(name, kind, d, c["value"])
        elif group == "other":
            out.add("exon_driver_counter", "gauge",
                    {**d, "id": str(c["id"]), "type": c["type"], "label": c["label"]},
                    c["value"])
    for group in ("publications", "images"):
        for row in snap[group]:
            labels = {**d, "session": str(row["session_id"]), "stream": str(row["stream_id"]),
                      "channel": row["channel"]}
            for field, value in row.items():
                metric = STREAM_METRICS.get((group, field))
                if metric is not None and value is not None:
                    name, kind, _text, scale = metric
                    out.add(name, kind, labels, value * scale)
    for node in snap["nodes"]:
        for statistic, value in node["counters"].items():
            name, kind, extra = statistic_metric(statistic)
            out.add(name, kind, {**d, "node": node["address"], **extra}, value)
    for m in snap["metrics"]:
        out.add(m["name"], m["kind"], {**d, "node": m["address"], **m["labels"]}, m["value"])


def host_driver_dirs(base: str | None = None) -> list[str]:
    """The driver directories of this host: every ``exon-*`` directory under ``base``
    (default: ``/dev/shm``) that holds a ``cnc.dat``."""
    root = driver_dir_base() if base is None else base
    return sorted(os.path.dirname(p) for p in glob.glob(os.path.join(root, "exon-*",
                                                                      "cnc.dat")))


class DriverCollector(Collector):
    """A ``prometheus_client`` collector of every counter of ``directories`` (None: of
    every driver of the host, :func:`host_driver_dirs`), read at each scrape. A directory
    whose driver is gone (no ``cnc.dat``, or a heartbeat older than its timeout) serves
    nothing. Thread-safe (scrapes are serialized)."""

    def __init__(self, directories: Sequence[str] | None = None) -> None:
        self._directories = None if directories is None else list(directories)
        self._open: dict[str, tuple[int, CncFile]] = {}  # dir -> (inode of cnc.dat, CnC)
        self._lock = threading.Lock()

    def _cnc(self, directory: str) -> CncFile | None:
        path = os.path.join(directory, "cnc.dat")
        try:
            inode = os.stat(path).st_ino
        except OSError:
            inode = -1
        cached = self._open.get(directory)
        if cached is not None and cached[0] == inode:
            return cached[1]
        if cached is not None:
            cached[1].close()
            del self._open[directory]
        if inode < 0:
            return None
        try:
            cnc = CncFile.open(directory)
        except errors.ExonError:
            return None
        self._open[directory] = (inode, cnc)
        return cnc

    def collect(self) -> Iterable[Metric]:
        out = _Families()
        with self._lock:
            dirs = (host_driver_dirs() if self._directories is None
                    else list(self._directories))
            for gone in set(self._open) - set(dirs):
                self._open.pop(gone)[1].close()
            for directory in dirs:
                cnc = self._cnc(directory)
                if cnc is None:
                    continue
                try:
                    snap = add_rates(snapshot(cnc), None, None)
                except errors.ExonError:
                    continue
                if not snap["driver_alive"]:
                    # its nodes are gone with it; an explicit directory still says "down"
                    if self._directories is not None:
                        out.add("exon_driver_up", "gauge", {"dir": snap["dir"]}, 0.0)
                    continue
                _add_driver(out, snap)
        return list(out)

    def close(self) -> None:
        with self._lock:
            for _inode, cnc in self._open.values():
                cnc.close()
            self._open.clear()


class MetricsServer:
    """The ``/metrics`` HTTP server (``prometheus_client``'s, in a daemon thread) of a
    :class:`DriverCollector`; :meth:`close` stops it."""

    def __init__(self, host: str, port: int, collector: DriverCollector) -> None:
        self.collector = collector
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            reason = ("the port is in use" if exc.errno == errno.EADDRINUSE
                      else exc.strerror or str(exc))
            raise errors.ConfigurationError(
                f"cannot serve metrics on {host}:{port}: {reason}") from None
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2.0)
        self.collector.close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(address: str, directories: Sequence[str] | None = None) -> MetricsServer:
    """Serve ``/metrics`` on ``address`` (``HOST:PORT``; port 0 picks one) for the drivers
    of ``directories`` (None: every driver of the host). ConfigurationError when the
    address is bad or its port is in use."""
    from exon.core.address import split_address

    host, port = split_address(address, what="--serve")
    return MetricsServer(host, port, DriverCollector(directories))

