"""A node's metrics, named as Prometheus names them: its statistics, and per socket what
an operator watches (credits, inbox, cookies, links, drops).

Two readers get the same figures under the same names:

* ``Node.metrics()`` (:func:`metric_samples`), in the node's process, for applications that
  export them their own way;
* ``exon stat --serve`` (:mod:`exon.ops.metrics`), in another process, through the driver's
  CnC: the node statistics are its node counters (:mod:`.node_counters`), and the socket
  figures are counters that :class:`SocketMetrics` allocates per socket and the node
  refreshes with its node counters (a plain store each, every ``PUBLISH_INTERVAL``).

:class:`NodeMetric` is one labelled series in the CnC (``Node.add_metric``): what the
archive service publishes per recording, and what an application may publish for itself.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from exon import errors
from exon.transport.aeron import Aeron, ClientCounter
from exon.transport.aeron.counters import METRIC_COUNTER_TYPE, METRIC_GAUGE_TYPE, metric_label

__all__ = ["SOCKET_METRICS", "STATISTIC_METRICS", "MetricKind", "NodeMetric", "SocketMetrics",
           "metric_samples", "socket_figures", "statistic_metric"]

log = logging.getLogger("exon.node")

MetricKind = Literal["gauge", "counter"]

#: a Prometheus metric name of exon's (``_total`` exactly when it is a counter)
_NAME = re.compile(r"exon_[a-z][a-z0-9_]*")

#: each node statistic (``Node.statistics()``, the node counters) as a metric: (name,
#: kind, labels). The drops are one counter by reason.
STATISTIC_METRICS: dict[str, tuple[str, MetricKind, dict[str, str]]] = {
    "links": ("exon_node_links", "gauge", {}),
    "frames_received": ("exon_node_frames_received_total", "counter", {}),
    "frames_sent": ("exon_node_frames_sent_total", "counter", {}),
    "ignored": ("exon_node_frames_ignored_total", "counter", {}),
    "malformed_dropped": ("exon_node_drops_total", "counter", {"reason": "malformed"}),
    "stale_dropped": ("exon_node_drops_total", "counter", {"reason": "stale"}),
    "credit_violations": ("exon_node_drops_total", "counter", {"reason": "credit_violation"}),
    "oversize_dropped": ("exon_node_drops_total", "counter", {"reason": "oversize"}),
    "relinks_refused": ("exon_node_drops_total", "counter", {"reason": "relink_refused"}),
    "frames_dropped": ("exon_node_drops_total", "counter", {"reason": "unreachable_peer"}),
    "fragments_dropped": ("exon_node_drops_total", "counter", {"reason": "fragment"}),
    "unopened_dropped": ("exon_node_drops_total", "counter", {"reason": "unopened"}),
    "tokens_rejected": ("exon_node_drops_total", "counter", {"reason": "token_rejected"}),
    "unvalidated_dropped": ("exon_node_drops_total", "counter", {"reason": "unvalidated"}),
    "amplification_held": ("exon_node_amplification_held_frames_total", "counter", {}),
    "amplification_held_bytes": ("exon_node_amplification_held_bytes_total", "counter", {}),
    "not_found_sent": ("exon_node_socket_not_found_sent_total", "counter", {}),
    "not_linked_sent": ("exon_node_socket_not_linked_sent_total", "counter", {}),
    "refusals_sent": ("exon_node_refusals_sent_total", "counter", {}),
    "refusals_received": ("exon_node_refusals_received_total", "counter", {}),
    "retries": ("exon_node_link_retries_total", "counter", {}),
    "links_established": ("exon_node_links_established_total", "counter", {}),
    "links_closed": ("exon_node_links_closed_total", "counter", {}),
    "links_resent": ("exon_node_links_resent_total", "counter", {}),
    "cookies_returned": ("exon_node_cookies_returned_total", "counter", {}),
    "cookies_lost": ("exon_node_cookies_lost_total", "counter", {}),
    "connects_failed": ("exon_node_connects_failed_total", "counter", {}),
}

SOCKET_CREDITS = "exon_socket_credits_available"
SOCKET_INBOX = "exon_socket_inbox_messages"
SOCKET_COOKIES = "exon_socket_cookies_pending"
SOCKET_LINKS = "exon_socket_links"
SOCKET_DROPS = "exon_socket_drops_total"

#: the per-socket metrics: name -> (kind, what it is)
SOCKET_METRICS: dict[str, tuple[MetricKind, str]] = {
    SOCKET_CREDITS: ("gauge", "messages the socket may send now: the credits left on its "
                              "established links, summed"),
    SOCKET_INBOX: ("gauge", "messages received and not yet taken by the application"),
    SOCKET_COOKIES: ("gauge", "messages sent whose cookie has not come back yet"),
    SOCKET_LINKS: ("gauge", "established links"),
    SOCKET_DROPS: ("counter", "messages the socket dropped, by reason"),
}


def statistic_metric(statistic: str) -> tuple[str, MetricKind, dict[str, str]]:
    """The metric of a node statistic; one this version does not name (a newer node's
    counter, ``type-N``) is ``exon_node_statistic{statistic=...}``, a gauge."""
    known = STATISTIC_METRICS.get(statistic)
    if known is not None:
        return known
    return "exon_node_statistic", "gauge", {"statistic": statistic.replace("-", "_")}


def check_metric_name(name: str, kind: str) -> None:
    """ConfigurationError unless ``name`` is an exon metric name fit for ``kind``."""
    if kind not in ("gauge", "counter"):
        raise errors.ConfigurationError(f"metric {name}: kind {kind!r} is gauge or counter")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise errors.ConfigurationError(
            f"metric name {name!r}: want exon_ then lower-case letters, digits and '_'")
    if (kind == "counter") != name.endswith("_total"):
        raise errors.ConfigurationError(
            f"metric {name}: a counter's name ends with _total, and only a counter's")


class NodeMetric:
    """One labelled series in the driver's CnC: ``set(value)`` is a plain store (no call
    into the driver), :meth:`close` frees it (the driver frees it anyway with the node's
    Aeron client). Not thread-safe for writers: one thread (or one lock) sets it."""

    __slots__ = ("_counter", "kind", "labels", "name")

    def __init__(self, aeron: Aeron, name: str, kind: MetricKind, *, node_id: str,
                 address: str, labels: Mapping[str, str]) -> None:
        check_metric_name(name, kind)
        self.name = name
        self.kind = kind
        self.labels = {k: str(v) for k, v in labels.items()}
        type_id = METRIC_COUNTER_TYPE if kind == "counter" else METRIC_GAUGE_TYPE
        label = metric_label(name, node_id, address, self.labels)
        self._counter: ClientCounter | None = aeron.add_counter(
            type_id, label, key=uuid.UUID(hex=node_id).bytes)

    def set(self, value: int) -> None:
        """Store ``value`` (an int64); nothing once closed."""
        counter = self._counter
        if counter is not None:
            counter.set(int(value))

    @property
    def value(self) -> int:
        """The value stored (0 once closed)."""
        counter = self._counter
        return 0 if counter is None or counter.is_closed else counter.value

    def close(self) -> None:
        """Have the driver free the counter now. Idempotent."""
        counter, self._counter = self._counter, None
        if counter is not None:
            try:
                counter.close()
            except errors.ExonError:
                pass

    def detach(self) -> None:
        """Stop writing; the driver frees the counter with the node's Aeron client."""
        counter, self._counter = self._counter, None
        if counter is not None:
            counter._detach()

    def __repr__(self) -> str:
        return f"<NodeMetric {self.name} {self.labels}>"


def socket_figures(core: Any, tag: int, sock: Any) -> list[tuple[str, dict[str, str], int]]:
    """What socket ``tag`` holds now (the node's lock held), as (metric, labels beyond the
    socket's, value): the :data:`SOCKET_METRICS`."""
    if not core.has_socket(tag):
        return []
    established = core.established(tag)
    figures: list[tuple[str, dict[str, str], int]] = [
        (SOCKET_CREDITS, {}, sum(core.credits(tag, p) for p in established)),
        (SOCKET_INBOX, {}, sock._queued()),
        (SOCKET_COOKIES, {}, sum(core.pending_cookies(tag, p) for p in core.links(tag))),
        (SOCKET_LINKS, {}, len(established)),
    ]
    figures += [(SOCKET_DROPS, {"reason": reason}, n)
                for reason, n in sock._drop_counts().items()]
    return figures


class SocketMetrics:
    """The CnC series of one socket (:data:`SOCKET_METRICS`, one drops series per reason
    the socket counts), labelled with its node, tag and type. Allocated when the socket
    opens (a driver round trip each, about 0.1 ms), freed when it closes; when the driver
    has no counter left the socket goes without them (said once in the log)."""

    def __init__(self, aeron: Aeron, *, node_id: str, address: str, tag: int,
                 socket_type: str, drop_reasons: Iterable[str]) -> None:
        self._series: dict[tuple[str, str], NodeMetric] = {}
        base = {"tag": str(tag), "type": socket_type}
        wanted = [(name, "") for name in SOCKET_METRICS if name != SOCKET_DROPS]
        wanted += [(SOCKET_DROPS, reason) for reason in drop_reasons]
        try:
            for name, reason in wanted:
                labels = dict(base, reason=reason) if reason else base
                self._series[name, reason] = NodeMetric(
                    aeron, name, SOCKET_METRICS[name][0], node_id=node_id, address=address,
                    labels=labels)
        except errors.ExonError as exc:
            log.warning("socket %s of node %s runs without its metrics: %s", tag, address, exc)
            self.release()
        self._last: dict[tuple[str, str], int] = {}

    def publish(self, figures: Iterable[tuple[str, dict[str, str], int]]) -> None:
        """Store every figure that changed."""
        last = self._last
        for name, labels, value in figures:
            key = (name, labels.get("reason", ""))
            series = self._series.get(key)
            if series is not None and last.get(key) != value:
                series.set(value)
                last[key] = value

    def release(self) -> None:
        """Have the driver free every series now."""
        series, self._series = self._series, {}
        for metric in series.values():
            metric.close()

    def __len__(self) -> int:
        return len(self._series)


def metric_samples(statistics: Mapping[str, int], address: str,
                   sockets: Iterable[tuple[int, str, list[tuple[str, dict[str, str], int]]]],
                   ) -> dict[str, list[dict[str, Any]]]:
    """``Node.metrics()``: {metric name: [{"labels": {...}, "value": n}, ...]} from the
    node's ``statistics`` ({statistic: value}, ``links`` derived if absent) and its
    ``sockets`` ((tag, type, :func:`socket_figures`) each). Every series has the label
    ``node`` (the node's address); a socket's also ``tag`` and ``type``."""
    values = dict(statistics)
    values.setdefault("links", values.get("links_established", 0) - values.get("links_closed", 0))
    out: dict[str, list[dict[str, Any]]] = {}
    for statistic, value in values.items():
        name, _kind, labels = statistic_metric(statistic)
        out.setdefault(name, []).append({"labels": {"node": address, **labels},
                                         "value": value})
    for tag, socket_type, figures in sockets:
        for name, labels, value in figures:
            out.setdefault(name, []).append({
                "labels": {"node": address, "tag": str(tag), "type": socket_type, **labels},
                "value": value})
    return out
