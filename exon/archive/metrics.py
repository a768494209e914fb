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
_ALL = 2**63 - 1  #: count every record

STOP_POSITION = "exon_archive_recording_stop_position_bytes"
START_POSITION = "exon_archive_recording_start_position_bytes"
BYTES = "exon_archive_recording_bytes"
REPLAYS = "exon_archive_recording_replays"
FAILED = "exon_archive_recording_failed"
CONSUMER_LAG = "exon_archive_consumer_lag_bytes"
CONSUMER_LAG_RECORDS = "exon_archive_consumer_lag_records"

#: name -> (kind, what it is); labels: ``recording`` (its name), and ``consumer`` for the lag
ARCHIVE_METRICS: dict[str, tuple[str, str]] = {
    STOP_POSITION: ("gauge", "end of the recording's durable records (a stream position)"),
    START_POSITION: ("gauge", "first position the recording still holds (after truncation)"),
    BYTES: ("gauge", "bytes the recording holds: stop position - start position"),
    REPLAYS: ("gauge", "replays of the recording running now"),
    FAILED: ("gauge", "1 when the recording stopped writing (its disk refused), else 0"),
    CONSUMER_LAG: ("gauge", "bytes between a consumer's committed position and the stop "
                            "position (the consumer's name URL-quoted)"),
    CONSUMER_LAG_RECORDS: ("gauge", "records between a consumer's committed position and "
                                    "the stop position (a Spark query: its option "
                                    "consumer)"),
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
        #: (recording id, consumer) -> (its position, the stop, records between): the
        #: next count reads only the records that came or went since
        self._lag: dict[tuple[int, str], tuple[int, int, int]] = {}

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
        infos = self._archive.recordings()
        for info in infos:
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
                records = self._records_behind(info, name, position)
                if records is not None:
                    seen.add((CONSUMER_LAG_RECORDS, info.name, consumer))
                    series = self._series_of(CONSUMER_LAG_RECORDS, info.name, consumer)
                    if series is not None:
                        series.set(records)
        for key in [k for k in self._series if k not in seen]:
            self._series.pop(key).close()
        live = {(info.id, name) for info in infos for name in info.consumers}
        for gone in [k for k in self._lag if k not in live]:
            del self._lag[gone]

    def _records_behind(self, info: Any, consumer: str, position: int) -> int | None:
        """Records from ``position`` to the stop position, counted incrementally:
        ``n(p', s') = n(p, s) + n(s, s') - n(p, p')`` when neither end went back and ``p``
        is still held; else counted afresh. None when the archive no longer holds the
        position (truncated past it) or the count failed."""
        key = (info.id, consumer)
        stop, start = int(info.stop_position), int(info.start_position)
        if not start <= position <= stop:
            self._lag.pop(key, None)
            return None
        old = self._lag.get(key)
        try:
            if old is not None and old[:2] == (position, stop):
                return old[2]
            if old is not None and start <= old[0] <= position and old[1] <= stop:
                records = (old[2] + self._archive.count(info.id, old[1], stop, _ALL)
                           - self._archive.count(info.id, old[0], position, _ALL))
            else:
                records = self._archive.count(info.id, position, stop, _ALL)
        except errors.ExonError as exc:  # the position is not a record boundary, ...
            log.debug("consumer %r of %r: no lag in records: %s", consumer, info.name, exc)
            self._lag.pop(key, None)
            return None
        self._lag[key] = (position, stop, records)
        return records

    def close(self) -> None:
        """Free every series."""
        series, self._series = self._series, {}
        for metric in series.values():
            metric.close()
