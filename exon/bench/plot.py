"""``exon bench plot RESULTS.jsonl -o OUT.png``: exon beside its peer, per case.

Reads the JSON lines the ``exon bench`` commands print (``case``, ``unit``, ``exon``,
``peer``, ``peer_name``, ``ratio``, ``higher_is_better``, and optionally ``variant``: the
settings of that run, which make it a case of its own; save them with
``exon bench sockets > results.jsonl``) and draws one panel per unit (throughputs and
latencies have different scales): for every case a bar for exon and one for its peer, side
by side, the ratio written beside them (> 1: exon better). A case that appears several
times (repeated runs) is drawn at its median with a line from its lowest to its highest
figure. The format follows the output's extension (``.png``, ``.svg``, ``.pdf``).

Needs matplotlib: ``pip install 'exon[plot]'``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from exon.errors import ConfigurationError

__all__ = ["PlotExtraMissing", "load_results", "plot_results"]

#: units whose figures are better when lower (used when a line has no higher_is_better)
_LOWER_IS_BETTER_UNITS = {"us", "ms", "s", "ns"}
_FORMATS = (".png", ".svg", ".pdf")


class PlotExtraMissing(ConfigurationError):
    """matplotlib is not installed: ``pip install 'exon[plot]'``."""


@dataclass
class Case:
    """Every figure read for one case."""

    name: str
    unit: str
    higher_is_better: bool
    peer_name: str | None = None
    exon: list[float] = field(default_factory=list)
    peer: list[float] = field(default_factory=list)


def load_results(lines: Iterable[str], *, source: str = "results") -> list[Case]:
    """The cases of bench JSON lines, in the order they first appear. Blank lines are
    skipped; a line that is not a JSON object with ``case``, ``unit`` and a numeric (or
    null) ``exon`` raises :class:`exon.ConfigurationError` naming the line."""
    cases: dict[str, Case] = {}
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        where = f"{source}, line {number}"
        try:
            line = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"{where}: not JSON ({exc})") from None
        if not isinstance(line, dict) or not isinstance(line.get("case"), str) \
                or not isinstance(line.get("unit"), str):
            raise ConfigurationError(f"{where}: not a bench result (want an object with "
                                     "'case', 'unit', 'exon' and 'peer')")
        figures = {}
        for key in ("exon", "peer"):
            value = line.get(key)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise ConfigurationError(f"{where}: {key!r} is {value!r}, not a number")
            figures[key] = value
        name = line["case"]
        if isinstance(line.get("variant"), str):  # runs of one case under other settings
            name = f"{name} [{line['variant']}]"
        higher = line.get("higher_is_better")
        if not isinstance(higher, bool):
            higher = line["unit"] not in _LOWER_IS_BETTER_UNITS
        case = cases.get(name)
        if case is None:
            case = cases[name] = Case(name, line["unit"], higher)
        elif case.unit != line["unit"]:
            raise ConfigurationError(f"{where}: case {name!r} in {line['unit']!r}, "
                                     f"earlier in {case.unit!r}")
        if figures["exon"] is not None:
            case.exon.append(float(figures["exon"]))
        if figures["peer"] is not None:
            case.peer.append(float(figures["peer"]))
            case.peer_name = case.peer_name or line.get("peer_name")
    if not cases:
        raise ConfigurationError(f"{source}: no bench results in it")
    return list(cases.values())


def _pyplot_free_figure(**kwargs: Any) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotExtraMissing(f"plotting needs the plot extra (pip install 'exon[plot]'): "
                               f"{exc}") from None
    return Figure(**kwargs)


def _spread(values: list[float]) -> tuple[float, float, float]:
    mid = statistics.median(values)
    return mid, mid - min(values), max(values) - mid


def plot_results(cases: list[Case], output: str | os.PathLike[str], *,
                 title: str | None = None, dpi: int = 100) -> str:
    """Draw ``cases`` into ``output`` (format from its extension); returns the path."""
    path = os.fspath(output)
    if os.path.splitext(path)[1].lower() not in _FORMATS:
        raise ConfigurationError(f"{path}: the plot's format comes from its extension, one "
                                 f"of {', '.join(_FORMATS)}")
    units: dict[str, list[Case]] = {}
    for case in cases:
        if case.exon or case.peer:
            units.setdefault(case.unit, []).append(case)
    if not units:
        raise ConfigurationError("no case has a figure to draw")
    rows = sum(len(c) for c in units.values())
    figure = _pyplot_free_figure(figsize=(10, 1.2 + 0.55 * rows + 0.9 * len(units)), dpi=dpi,
                                 layout="constrained")
    axes = figure.subplots(len(units), 1, squeeze=False,
                           height_ratios=[len(c) + 1 for c in units.values()])[:, 0]
    height = 0.38
    for ax, (unit, group) in zip(axes, units.items(), strict=True):
        better = "higher" if group[0].higher_is_better else "lower"
        labels = []
        named: set[str] = set()
        for i, case in enumerate(group):
            y = len(group) - 1 - i
            labels.append((y, case.name))
            for offset, values, color, name in (
                    (height / 2, case.exon, "tab:blue", "exon"),
                    (-height / 2, case.peer, "tab:gray", case.peer_name or "peer")):
                if not values:
                    continue
                mid, low, high = _spread(values)
                ax.barh(y + offset, mid, height, color=color,
                        xerr=[[low], [high]] if len(values) > 1 else None,
                        label=None if name in named else name)
                named.add(name)
            if case.exon and case.peer:
                e, p = statistics.median(case.exon), statistics.median(case.peer)
                ratio = (e / p if case.higher_is_better else p / e) if e > 0 and p > 0 else None
                if ratio is not None:
                    ax.annotate(f"x{ratio:.2f}", (max(e, p), y), xytext=(4, 0),
                                textcoords="offset points", va="center", fontsize=8)
        ax.set_yticks([y for y, _ in labels], [name for _, name in labels], fontsize=8)
        figures = [v for c in group for v in c.exon + c.peer if v > 0]
        if figures and max(figures) / min(figures) > 100:
            ax.set_xscale("log")  # figures of several orders of magnitude in one panel
        ax.set_xlabel(f"{unit} ({better} is better)")
        ax.grid(axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    figure.suptitle(title or "exon beside its peer (ratio > 1: exon better)", fontsize=10)
    figure.savefig(path)
    return path
