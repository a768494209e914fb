"""One JSON line per benchmark case: ``case``, ``exon``, ``peer``, ``ratio`` (> 1: exon better)."""

from __future__ import annotations

import json
import math
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: fields every line gets while :func:`extra_fields` is in force (e.g. ``hog``)
_EXTRA: dict[str, Any] = {}


def ratio(exon: float, peer: float, *, higher_is_better: bool) -> float | None:
    """exon relative to its peer, oriented so that > 1 always means exon is better."""
    if not (math.isfinite(exon) and math.isfinite(peer)) or exon <= 0 or peer <= 0:
        return None
    return exon / peer if higher_is_better else peer / exon


def emit(
    case: str,
    *,
    exon: float | None,
    peer: float | None,
    peer_name: str,
    unit: str,
    higher_is_better: bool,
    **extra: Any,
) -> dict[str, Any]:
    """Print one JSON line for ``case`` and return it."""
    line: dict[str, Any] = {
        "case": case,
        "unit": unit,
        "exon": None if exon is None else round(exon, 3),
        "peer": None if peer is None else round(peer, 3),
        "peer_name": peer_name,
        "higher_is_better": higher_is_better,
        "ratio": None
        if exon is None or peer is None
        else _round(ratio(exon, peer, higher_is_better=higher_is_better)),
        "host": platform.node(),
        "python": platform.python_version(),
    }
    line.update(_EXTRA)
    line.update(extra)
    print(json.dumps(line), flush=True)
    sys.stdout.flush()
    return line


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@contextmanager
def extra_fields(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every line emitted inside the block."""
    before = dict(_EXTRA)
    _EXTRA.update(fields)
    try:
        yield
    finally:
        _EXTRA.clear()
        _EXTRA.update(before)
