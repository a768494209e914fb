"""The archive service's metrics, per recording, as series of its node
(``exon.Node.add_metric``): ``exon stat --serve`` serves them with every other counter of
the driver, and ``Node.metrics()`` of an application does not see them (they are the
service's).

:class:`RecordingMetrics` allocates the series of each recording as it first sees it and
refreshes their values every :data:`REFRESH` seconds from the service's metrics thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from exon import errors
from exon.archive.archive import Archive

__all__ = ["ARCHIVE_METRICS", "REFRESH", "RecordingMetrics"]

log = logging.getLogger("exon.archive")

REFRESH = 0.5  #: seconds between two refreshes of the values

STOP_POSITION = "exon_archive_recording_stop_position_bytes"
START_POSITION = "exon_archive_recording_start_position_bytes"
BYTES = "exon_archive_recording_bytes"
REPLAYS = "exon_archive_recording_replays"
FAILED = "exon_archive_recording_failed"
CONSUMER_LAG = "exon_archive_consumer_lag_bytes"

#: name -> (kind, what it is); labels: ``recording`` (its name), and ``consumer`` for the lag
ARCHIVE_METRICS: dict[str, tuple[str, str]] = {
    STOP_POSITION: ("gauge", "end of the recording's durable records (a stream position)"),
    START_POSITION: ("gauge", "first position the recording still holds (after truncation)"),
    BYTES: ("gauge", "bytes the recording holds: stop position - start position"),
    REPLAYS: ("gauge", "replays of the recording running now"),
    FAILED: ("gauge", "1 when the recording stopped writing (its disk refused), else 0"),
    CONSUMER_LAG: ("gauge", "bytes between a consumer's committed position and the stop "
                            "position (the consumer's name URL-quoted)"),
}


class RecordingMetrics:
    """The series of every recording of ``archive`` on ``node``; ``replays()`` returns
    {recording id: replays running}."""

    def __init__(self, node: Any, archive: Archive,
                 replays: Callable[[], dict[int, int]]) -> None:
        self._node = node
        self._archive = archive
        self._replays = replays
        self._series: dict[tuple[str, str, str], Any] = {}
        self._failed = False

    def _series_of(self, name: str, recording: str, consumer: str = "") -> Any:
        key = (name, recording, consumer)
        series = self._series.get(key)
        if series is None and not self._failed:
            labels = {"recording": recording}
            if consumer:
                labels["consumer"] = consumer
            try:
                series = self._series[key] = self._node.add_metric(name, "gauge", **labels)
            except errors.ExonError as exc:  # no counter left: say it once, go without
                log.warning("the archive runs without some of its metrics: %s", exc)
                self._failed = True
        return series

    def refresh(self) -> None:
        """Read every recording now and store its figures; the series of a recording or
        a consumer that went are freed."""
        replays = self._replays()
        seen: set[tuple[str, str, str]] = set()
        for info in self._archive.recordings():
            figures = {
                STOP_POSITION: info.stop_position,
                START_POSITION: info.start_position,
                BYTES: info.stop_position - info.start_position,
                REPLAYS: replays.get(info.id, 0),
                FAILED: 0 if info.state == "ok" else 1,
            }
            for name, value in figures.items():
                seen.add((name, info.name, ""))
                series = self._series_of(name, info.name)
                if series is not None:
                    series.set(value)
            for name, position in info.consumers.items():
                consumer = quote(name, safe="")  # a label value has no space, no '='
                seen.add((CONSUMER_LAG, info.name, consumer))
                series = self._series_of(CONSUMER_LAG, info.name, consumer)
                if series is not None:
                    series.set(max(0, info.stop_position - position))
        for key in [k for k in self._series if k not in seen]:
            self._series.pop(key).close()

    def close(self) -> None:
        """Free every series."""
        series, self._series = self._series, {}
        for metric in series.values():
            metric.close()
