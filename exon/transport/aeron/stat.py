"""``exon stat``: print a driver's counters like AeronStat.

:func:`run_stat` opens ``DIR/cnc.dat`` read-side and prints every allocated counter with
its id, value, type and label, refreshing every ``interval`` seconds until interrupted,
or once; ``as_json`` prints one JSON object per refresh (with ``once``: a single snapshot).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TextIO

from exon import errors

from .cnc import CncFile, now_ms

CLEAR_SCREEN = "\x1b[H\x1b[2J"


def snapshot(cnc: CncFile, *, now: int | None = None) -> dict[str, Any]:
    """Everything ``exon stat`` shows, as plain data (what ``--json`` prints)."""
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


def render_text(snap: dict[str, Any]) -> str:
    """The AeronStat-like table for one snapshot."""
    when = time.strftime("%H:%M:%S", time.localtime(snap["timestamp_ms"] / 1000))
    state = "alive" if snap["driver_alive"] else "NOT RESPONDING"
    lines = [
        f"{when} - exon stat (CnC v{snap['cnc_version']}), pid {snap['pid']}, "
        f"heartbeat age {snap['heartbeat_age_ms']} ms ({state})",
        f"dir {snap['dir']}",
        "=" * 80,
    ]
    for c in snap["counters"]:
        lines.append(f"{c['id']:3d}: {c['value']:>20,} - {c['label']}")
    if snap["errors"]:
        lines.append("-" * 80)
        lines.append(f"{len(snap['errors'])} distinct error(s):")
        for e in snap["errors"]:
            lines.append(f"  x{e['count']} {e['text']}")
    return "\n".join(lines) + "\n"


def run_stat(
    directory: str | os.PathLike[str],
    once: bool = False,
    as_json: bool = False,
    interval: float = 1.0,
    *,
    out: TextIO | None = None,
    max_refreshes: int | None = None,
) -> int:
    """Print the counters of the driver in ``directory``; returns the exit code.

    Refreshes every ``interval`` seconds until Ctrl-C (or ``max_refreshes``), unless
    ``once``. A missing or invalid CnC prints the reason to stderr and returns 1.
    """
    stream = sys.stdout if out is None else out
    try:
        cnc = CncFile.open(directory)
    except errors.CncError as exc:
        print(f"exon stat: {exc}", file=sys.stderr)
        return 1
    refreshes = 0
    try:
        with cnc:
            while True:
                snap = snapshot(cnc)
                if as_json:
                    stream.write(json.dumps(snap) + "\n")
                else:
                    if not once and stream.isatty():
                        stream.write(CLEAR_SCREEN)
                    stream.write(render_text(snap))
                stream.flush()
                refreshes += 1
                if once or (max_refreshes is not None and refreshes >= max_refreshes):
                    return 0
                time.sleep(max(interval, 0.01))
    except KeyboardInterrupt:
        return 0
