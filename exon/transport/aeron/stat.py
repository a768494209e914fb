"""``exon stat``: a driver's counters, live, like AeronStat.

:func:`run_stat` opens ``DIR/cnc.dat`` read-side and samples every allocated counter every
``interval`` seconds: totals, and rates per second since the previous sample. The view
groups them:

* the driver's system counters by what they tell (:data:`GROUPS`): traffic, loss and
  recovery, flow control, drops by cause, health -- :data:`SYSTEM_GROUPS`;
* **links**: one row per publication (position, rate, the room left before back pressure,
  the sender's window) and one per image (received, rate, gap, the subscribers' lag, round
  trip), assembled from the per-stream counters (``pub-pos``, ``pub-lmt``, ``snd-pos``,
  ``snd-lmt``, ``snd-bpe``, ``rcv-hwm``, ``rcv-pos``, ``sub-pos``, ``rcv-rtt``);
* **exon nodes**: the statistics of every exon node on this driver (links, frames, drops
  by cause, refusals, cookies), one counter per statistic that each node allocated through
  the driver (:class:`~.counters.NodeCounter`, type ids 2000..2099), grouped by node;
* **metrics** that nodes publish for what they host: per socket (credits, inbox, cookies,
  links, drops) and per archive recording (``exon.Node.add_metric``; type ids 2100, 2101),
  shown with their node;
* every other counter (clients, doorbells, channel status, and counters of types this
  version does not know, e.g. a newer exon's) under ``other``, with totals and rates.

On a terminal the view refreshes in place (rich's live display); piped, each sample is
printed in turn;
``as_json`` prints one JSON object per sample (:func:`sample`), for scripts. It stops after
``count`` samples, on Ctrl-C, or -- exit status 1, with one line on stderr -- when the
driver goes away (its ``cnc.dat`` removed or its heartbeat older than its timeout).
Reading the counters costs the driver nothing: they are plain memory the driver writes.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from exon import errors

from .cnc import CncFile, now_ms
from .counters import (
    METRIC_COUNTER_TYPE,
    METRIC_TYPES,
    NODE_COUNTER_TYPE_FIRST,
    NODE_COUNTER_TYPE_LAST,
    CounterType,
    NodeCounter,
    SystemCounter,
    parse_metric_label,
)

#: the groups of system counters, in the order ``exon stat`` shows them
GROUPS: tuple[str, ...] = ("traffic", "loss", "flow control", "drops", "health")

#: which group each system counter is shown in
SYSTEM_GROUPS: dict[SystemCounter, str] = {
    SystemCounter.BYTES_SENT: "traffic",
    SystemCounter.BYTES_RECEIVED: "traffic",
    SystemCounter.STATUS_MESSAGES_SENT: "traffic",
    SystemCounter.STATUS_MESSAGES_RECEIVED: "traffic",
    SystemCounter.HEARTBEATS_SENT: "traffic",
    SystemCounter.HEARTBEATS_RECEIVED: "traffic",
    SystemCounter.NAK_MESSAGES_SENT: "loss",
    SystemCounter.NAK_MESSAGES_RECEIVED: "loss",
    SystemCounter.RETRANSMITS_SENT: "loss",
    SystemCounter.LOSS_GAP_FILLS: "loss",
    SystemCounter.NAKS_SUPPRESSED: "loss",
    SystemCounter.FLOW_CONTROL_UNDER_RUNS: "flow control",
    SystemCounter.FLOW_CONTROL_OVER_RUNS: "flow control",
    SystemCounter.SENDER_FLOW_CONTROL_LIMITS: "flow control",
    SystemCounter.BACK_PRESSURE_EVENTS: "flow control",
    SystemCounter.INVALID_PACKETS: "drops",
    SystemCounter.SETUPS_DROPPED: "drops",
    SystemCounter.IMAGES_EVICTED: "drops",
    SystemCounter.SHORT_SENDS: "drops",
    SystemCounter.RECEIVER_PROXY_FAILS: "drops",
    SystemCounter.SENDER_PROXY_FAILS: "drops",
    SystemCounter.CONDUCTOR_PROXY_FAILS: "drops",
    SystemCounter.POSSIBLE_TTL_ASYMMETRY: "drops",
    SystemCounter.ERRORS: "health",
    SystemCounter.CLIENT_TIMEOUTS: "health",
    SystemCounter.FREE_FAILS: "health",
    SystemCounter.UNBLOCKED_PUBLICATIONS: "health",
    SystemCounter.UNBLOCKED_COMMANDS: "health",
    SystemCounter.CONTROLLABLE_IDLE_STRATEGY: "health",
    SystemCounter.DOORBELL_WAKES: "health",
    SystemCounter.UDP_GSO_FALLBACKS: "health",
}

_PUBLICATION_TYPES = {CounterType.PUBLISHER_POSITION, CounterType.PUBLISHER_LIMIT,
                      CounterType.SENDER_POSITION, CounterType.SENDER_LIMIT,
                      CounterType.SENDER_BPE}
_IMAGE_TYPES = {CounterType.RECEIVER_HWM, CounterType.RECEIVER_POSITION,
                CounterType.SUBSCRIBER_POSITION, CounterType.RECEIVER_RTT}

#: counters whose value is a time stamp, not a count: no rate
_NO_RATE = {int(CounterType.CLIENT_HEARTBEAT)}

#: the group of a per-stream counter type (anything else is "other")
TYPE_GROUPS: dict[int, str] = {
    **{int(t): "publications" for t in _PUBLICATION_TYPES},
    **{int(t): "images" for t in _IMAGE_TYPES},
}


#: the group of exon's node counters
NODE_GROUP = "exon"


def group_of(counter: dict[str, Any]) -> str:
    """The group ``exon stat`` shows a counter in (a :data:`GROUPS` name, "publications",
    "images", :data:`NODE_GROUP` or "other")."""
    type_id = counter["type_id"]
    if type_id == CounterType.SYSTEM:
        try:
            return SYSTEM_GROUPS[SystemCounter(counter["id"])]
        except ValueError:
            return "other"
    if NODE_COUNTER_TYPE_FIRST <= type_id <= NODE_COUNTER_TYPE_LAST or type_id in METRIC_TYPES:
        return NODE_GROUP
    return TYPE_GROUPS.get(type_id, "other")


@functools.lru_cache(maxsize=4096)  # a scrape parses every label, 10/s
def _parse_node_label(label: str) -> tuple[str, str]:
    """``"exon WHAT: node ID ADDRESS"`` -> (id, address); ("?", "") if it is not one."""
    _, sep, rest = label.partition(": node ")
    node_id, _, address = rest.partition(" ")
    return (node_id, address) if sep and node_id else ("?", "")


def nodes(counters: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """exon's node counters assembled per node: ``node_id``, ``address``, ``owner_id``
    (the node's Aeron client) and ``counters`` / ``rates``: {statistic: value / rate per
    second} named as :class:`~.counters.NodeCounter` (``links``, ``malformed_dropped``...;
    a type id this version does not know keeps its ``type-N`` name)."""
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for c in counters:
        if not NODE_COUNTER_TYPE_FIRST <= c["type_id"] <= NODE_COUNTER_TYPE_LAST:
            continue
        node_id, address = _parse_node_label(c["label"])
        node = found.setdefault((node_id, c["owner_id"]), {
            "node_id": node_id, "address": address, "owner_id": c["owner_id"],
            "counters": {}, "rates": {}})
        try:
            name = NodeCounter(c["type_id"]).name.lower()
        except ValueError:
            name = f"type-{c['type_id']}"
        node["counters"][name] = c["value"]
        node["rates"][name] = c.get("rate")
    return sorted(found.values(), key=lambda n: (n["address"], n["node_id"]))


@functools.lru_cache(maxsize=4096)
def _parse_metric_label(label: str) -> tuple[str, str, str, tuple[tuple[str, str], ...]] | None:
    parsed = parse_metric_label(label)
    if parsed is None:
        return None
    name, node_id, address, labels = parsed
    return name, node_id, address, tuple(labels.items())


def metrics(counters: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metrics nodes publish for what they host (sockets, archive recordings: counters
    of :data:`~.counters.METRIC_TYPES`): ``name``, ``kind`` ("gauge" or "counter"),
    ``node_id``, ``address``, ``labels`` ({name: value}), ``owner_id``, ``value`` and
    ``rate``."""
    found = []
    for c in counters:
        if c["type_id"] not in METRIC_TYPES:
            continue
        parsed = _parse_metric_label(c["label"])
        if parsed is None:
            continue
        name, node_id, address, pairs = parsed
        labels = dict(pairs)
        found.append({"name": name,
                      "kind": "counter" if c["type_id"] == METRIC_COUNTER_TYPE else "gauge",
                      "node_id": node_id, "address": address, "labels": labels,
                      "owner_id": c["owner_id"], "value": c["value"], "rate": c.get("rate")})
    return sorted(found, key=lambda m: (m["address"], m["name"], sorted(m["labels"].items())))


def snapshot(cnc: CncFile, *, now: int | None = None) -> dict[str, Any]:
    """Every counter and error of ``cnc`` now, as plain data (no rates)."""
    stamp = now_ms() if now is None else now
    age = cnc.driver_heartbeat_age_ms(stamp)
    return {
        "dir": str(cnc.path.parent),
        "cnc_version": cnc.cnc_version,
        "pid": cnc.pid,
        "start_timestamp_ms": cnc.start_timestamp_ms,
        "timestamp_ms": stamp,
        "heartbeat_age_ms": age,
        "driver_alive": age <= cnc.driver_timeout_ms,
        "counters": [
            {
                "id": c.id,
                "type_id": c.type_id,
                "type": c.type_name,
                "label": c.label,
                "value": c.value,
                "registration_id": c.registration_id,
                "owner_id": c.owner_id,
            }
            for c in cnc.counters().snapshot()
        ],
        "errors": [
            {
                "count": e.observation_count,
                "first_timestamp_ms": e.first_timestamp_ms,
                "last_timestamp_ms": e.last_timestamp_ms,
                "text": e.text,
            }
            for e in cnc.errors()
        ],
    }


def _identity(counter: dict[str, Any]) -> tuple[int, int, int]:
    # a freed id may be reused by another counter: a rate only across the same one
    return counter["id"], counter["type_id"], counter["registration_id"]


def add_rates(current: dict[str, Any], previous: dict[str, Any] | None,
              elapsed_s: float | None) -> dict[str, Any]:
    """``current`` with ``elapsed_s`` (seconds since ``previous``), and on every counter
    its ``group`` and ``rate``: its change per second since ``previous`` (None for the
    first sample and for a counter that was not there then). Adds the ``publications``
    and ``images`` derived from the per-stream counters (see :func:`links`) and the exon
    ``nodes`` (see :func:`nodes`)."""
    before: dict[tuple[int, int, int], int] = {}
    if previous is not None and elapsed_s:
        before = {_identity(c): c["value"] for c in previous["counters"]}
    for c in current["counters"]:
        c["group"] = group_of(c)
        old = None if c["type_id"] in _NO_RATE else before.get(_identity(c))
        c["rate"] = None if old is None or not elapsed_s else (c["value"] - old) / elapsed_s
    current["elapsed_s"] = elapsed_s if previous is not None else None
    current.update(links(current["counters"]))
    current["nodes"] = nodes(current["counters"])
    current["metrics"] = metrics(current["counters"])
    return current


@functools.lru_cache(maxsize=4096)  # a scrape parses every label, 10/s
def _parse_stream_label(label: str) -> tuple[int, int, str] | None:
    """``"pub-pos: REG SESSION STREAM CHANNEL"`` -> (session, stream, channel)."""
    _, sep, rest = label.partition(": ")
    parts = rest.split(" ", 3)
    if not sep or len(parts) < 4:
        return None
    try:
        return int(parts[1]), int(parts[2]), parts[3]
    except ValueError:
        return None


def links(counters: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Publications and images assembled from the per-stream counters.

    A publication (one per registration id): ``position`` (pub-pos) and its ``rate``
    (bytes/s), ``window`` (pub-lmt - pub-pos: bytes it may write before back pressure),
    for UDP also ``sent`` (snd-pos), ``sender_window`` (snd-lmt - snd-pos) and
    ``back_pressure`` (snd-bpe). An image (one per session and stream): ``received``
    (rcv-pos; for IPC the publication's position) and its ``rate``, ``gap`` (rcv-hwm -
    rcv-pos: bytes waiting for a retransmit), ``lag`` (received - the slowest sub-pos:
    bytes the subscribers have not consumed) and ``rtt_us``."""
    pubs: dict[int, dict[str, Any]] = {}
    images: dict[tuple[int, int], dict[str, Any]] = {}
    subs: dict[tuple[int, int], list[int]] = {}
    for c in counters:
        type_id = c["type_id"]
        if type_id not in TYPE_GROUPS:
            continue
        parsed = _parse_stream_label(c["label"])
        if parsed is None:
            continue
        session, stream, channel = parsed
        value, rate = c["value"], c.get("rate")
        if type_id in _PUBLICATION_TYPES:
            pub = pubs.setdefault(c["registration_id"], {
                "registration_id": c["registration_id"], "session_id": session,
                "stream_id": stream, "channel": channel})
            if type_id == CounterType.PUBLISHER_POSITION:
                pub["position"], pub["rate"] = value, rate
            elif type_id == CounterType.PUBLISHER_LIMIT:
                pub["_limit"] = value
            elif type_id == CounterType.SENDER_POSITION:
                pub["sent"] = value
            elif type_id == CounterType.SENDER_LIMIT:
                pub["_sender_limit"] = value
            else:
                pub["back_pressure"] = value
            continue
        key = (session, stream)
        if type_id == CounterType.SUBSCRIBER_POSITION:
            subs.setdefault(key, []).append(value)
            continue
        image = images.setdefault(key, {"session_id": session, "stream_id": stream,
                                        "channel": channel})
        if type_id == CounterType.RECEIVER_POSITION:
            image["received"], image["rate"] = value, rate
        elif type_id == CounterType.RECEIVER_HWM:
            image["_hwm"] = value
        else:
            image["rtt_us"] = value / 1000
    for pub in pubs.values():
        if "position" in pub and "_limit" in pub:
            pub["window"] = pub["_limit"] - pub["position"]
        if "sent" in pub and "_sender_limit" in pub:
            pub["sender_window"] = pub["_sender_limit"] - pub["sent"]
        pub.pop("_limit", None)
        pub.pop("_sender_limit", None)
    by_stream = {(p["session_id"], p["stream_id"]): p for p in pubs.values()}
    for key, positions in subs.items():
        if key not in images:  # IPC: the publication's log is the image
            owner = by_stream.get(key)
            if owner is None or "position" not in owner:
                continue
            images[key] = {"session_id": key[0], "stream_id": key[1],
                           "channel": owner["channel"], "received": owner["position"],
                           "rate": owner.get("rate")}
        image = images[key]
        image["subscribers"] = len(positions)
        if "received" in image:
            image["lag"] = image["received"] - min(positions)
    for image in images.values():
        hwm = image.pop("_hwm", None)
        if hwm is not None and "received" in image:
            image["gap"] = hwm - image["received"]
    return {"publications": sorted(pubs.values(), key=lambda p: p["registration_id"]),
            "images": sorted(images.values(), key=lambda i: (i["stream_id"], i["session_id"]))}


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}/s"


def _n(value: Any) -> str:
    return "" if value is None else f"{value:,}"


def _table(title: str, header: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    """A titled table of plain text, columns as wide as their widest cell."""
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [title, line(header), *(line(r) for r in rows), ""]


def render_text(snap: dict[str, Any]) -> str:
    """The view of one sample (with rates) as plain text: what a pipe gets, and what the
    live view shows (plain strings: rich's table layout cost ~50 ms of CPU per sample
    here, a price a watcher should not pay every refresh)."""
    when = time.strftime("%H:%M:%S", time.localtime(snap["timestamp_ms"] / 1000))
    state = "alive" if snap["driver_alive"] else "NOT RESPONDING"
    lines = [f"{when} - exon stat (CnC v{snap['cnc_version']}), pid {snap['pid']}, "
             f"heartbeat age {snap['heartbeat_age_ms']} ms ({state})",
             f"dir {snap['dir']}", ""]
    counters = snap["counters"]

    def counter_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
        return [[str(c["id"]), c["label"], _n(c["value"]), _rate(c.get("rate"))] for c in rows]

    for group in GROUPS:
        rows = [c for c in counters if c.get("group", group_of(c)) == group]
        if rows:
            lines += _table(group, ["id", "counter", "total", "rate"], counter_rows(rows),
                            {1})
    if snap.get("publications"):
        lines += _table("links: publications",
                        ["session", "stream", "channel", "position", "rate", "window", "sent",
                         "snd window", "snd bpe"],
                        [[str(p["session_id"]), str(p["stream_id"]), p["channel"],
                          _n(p.get("position")), _rate(p.get("rate")), _n(p.get("window")),
                          _n(p.get("sent")), _n(p.get("sender_window")),
                          _n(p.get("back_pressure"))] for p in snap["publications"]], {2})
    if snap.get("images"):
        lines += _table("links: images",
                        ["session", "stream", "channel", "received", "rate", "gap", "lag",
                         "subs", "rtt us"],
                        [[str(i["session_id"]), str(i["stream_id"]), i["channel"],
                          _n(i.get("received")), _rate(i.get("rate")), _n(i.get("gap")),
                          _n(i.get("lag")), _n(i.get("subscribers")),
                          "" if i.get("rtt_us") is None else f"{i['rtt_us']:,.1f}"]
                         for i in snap["images"]], {2})
    exon = [c for c in counters if c.get("group", group_of(c)) == NODE_GROUP]
    if exon:
        rows = []
        for c in sorted(exon, key=lambda c: (_parse_node_label(c["label"]), c["type_id"])):
            node_id, address = _parse_node_label(c["label"])
            what = c["label"].partition(": node ")[0].removeprefix("exon ")
            rows.append([f"{node_id[:8]} {address}", what, _n(c["value"]),
                         _rate(c.get("rate"))])
        lines += _table("exon nodes", ["node", "counter", "total", "rate"], rows, {0, 1})
    other = [c for c in counters if c.get("group", group_of(c)) == "other"]
    if other:
        lines += _table("other", ["id", "counter", "total", "rate"], counter_rows(other), {1})
    if snap["errors"]:
        lines.append(f"{len(snap['errors'])} distinct error(s):")
        lines += [f"  x{e['count']} {e['text']}" for e in snap["errors"]]
    return "\n".join(lines).rstrip("\n") + "\n"


def render(snap: dict[str, Any]) -> Any:
    """The view of one sample for rich's live display (a refreshing terminal)."""
    from rich.text import Text

    return Text(render_text(snap), no_wrap=True, overflow="ellipsis")


def _gone(cnc: CncFile, snap: dict[str, Any]) -> str | None:
    """Why the driver is gone, or None while it lives."""
    if not os.path.exists(cnc.path):
        return f"the driver of {snap['dir']} is gone ({cnc.path.name} was removed)"
    if not snap["driver_alive"]:
        return (f"the driver of {snap['dir']} stopped answering (heartbeat "
                f"{snap['heartbeat_age_ms']} ms old)")
    return None


def run_stat(
    directory: str | os.PathLike[str],
    once: bool = False,
    as_json: bool = False,
    interval: float = 1.0,
    *,
    count: int | None = None,
    out: TextIO | None = None,
    max_refreshes: int | None = None,
) -> int:
    """Show the counters of the driver in ``directory``; returns the exit status.

    Samples every ``interval`` seconds until ``count`` samples (``once``: one), Ctrl-C
    (status 0), or the driver going away (status 1, the reason on stderr). A missing or
    invalid CnC prints the reason to stderr and returns 1. ``max_refreshes`` is an older
    name of ``count``."""
    stream = sys.stdout if out is None else out
    limit = 1 if once else (count if count is not None else max_refreshes)
    if limit is not None and limit < 1:
        raise errors.ConfigurationError("count must be >= 1")
    if not interval > 0:
        raise errors.ConfigurationError("the watch interval must be > 0 seconds")
    try:
        cnc = CncFile.open(directory)
    except errors.CncError as exc:
        print(f"exon stat: {exc}", file=sys.stderr)
        return 1
    live: Any = None
    samples = 0
    previous: dict[str, Any] | None = None
    previous_t = 0.0
    try:
        with cnc:
            if not as_json and limit != 1 and stream.isatty():
                from rich.console import Console
                from rich.live import Live

                live = Live(console=Console(file=stream), auto_refresh=False,
                            redirect_stdout=False, redirect_stderr=False)
                live.start()
            next_at = time.monotonic()
            while True:
                t = time.monotonic()
                snap = add_rates(snapshot(cnc), previous, t - previous_t if previous else None)
                previous, previous_t = snap, t
                if as_json:
                    stream.write(json.dumps(snap) + "\n")
                elif live is not None:
                    live.update(render(snap), refresh=True)
                else:
                    stream.write(render_text(snap) + ("\n" if limit != 1 else ""))
                stream.flush()
                samples += 1
                if limit is not None and samples >= limit:
                    return 0
                reason = _gone(cnc, snap)
                if reason is not None:
                    if live is not None:
                        live.stop()
                        live = None
                    print(f"exon stat: {reason}", file=sys.stderr)
                    return 1
                next_at = max(next_at + interval, time.monotonic())
                time.sleep(max(0.0, next_at - time.monotonic()))
    except KeyboardInterrupt:
        return 0
    finally:
        if live is not None:
            live.stop()
