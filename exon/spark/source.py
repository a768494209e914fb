"""``format("exon")``: the data source, its batch and streaming readers.

Where each piece runs (see ``docs/spark.md``):

* ``ExonDataSource.schema()`` -- the driver, at ``load()``: checks the options and that the
  archive answers and has the recordings, so a bad option or address fails there.
* ``ExonStreamReader`` -- constructed on the driver in two processes and cloudpickled to the
  executors (so: only options in its state, no handle; a client is opened lazily and dropped
  when pickled). ``initialOffset`` / ``latestOffset`` / ``partitions`` / ``commit`` run in
  Spark's long-lived source runner process on the driver, which keeps one archive client.
* ``read(partition)`` -- the executors: replays ``[start, end)`` of one recording from the
  archive over exon (never a local path), as Arrow batches.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from exon.spark import clients
from exon.spark.decode import BatchBuilder, default_ddl
from exon.spark.options import (
    ExonOptionError,
    ReadOptions,
    parse_read_options,
    parse_write_options,
)
from exon.spark.plan import (
    DataLoss,
    DataLossError,
    admit,
    check_offset,
    ending_offset,
    plan_slices,
    records_available,
    skip_lost,
    starting_offset,
)

try:  # 4.2+: admission control through ReadLimit, Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )

    HAS_READ_LIMIT = True
except ImportError:  # 4.0 / 4.1: latestOffset() takes no argument
    HAS_READ_LIMIT = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Absent before 4.2: a plain base class."""


__all__ = ["ExonBatchReader", "ExonDataSource", "ExonPartition", "ExonStreamReader"]

#: rows per Arrow batch handed to Spark
_ROWS_PER_BATCH = 8192

log = logging.getLogger("exon.spark")


def _warn_lost(loss: DataLoss, where: str) -> None:
    log.warning("exon: recording %r: positions [%d, %d) were truncated from the archive "
                "before the query read them; skipped (failOnDataLoss=false, %s)",
                loss.recording, loss.start, loss.end, where)


class ExonPartition(InputPartition):
    """The records of one recording at positions ``[start, end)``: a Spark task's input."""

    def __init__(self, recording: str, start: int, end: int) -> None:
        super().__init__((recording, start, end))
        self.recording = recording
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"ExonPartition({self.recording!r}, {self.start}, {self.end})"


def _options(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(options).items()}


def _arrow_schema(schema: Any) -> Any:
    """The Arrow schema Spark's runner checks a returned batch against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema)  # pragma: no cover - older pyspark


def _check_archive(opts: ReadOptions) -> None:
    """The archive answers and has every recording (RecordingNotFound names a missing one)."""
    from exon.archive import ArchiveError

    try:
        client = clients.open_client(opts.archive, opts.timeout)
    except Exception as exc:
        raise clients.archive_error(opts.archive, exc) from exc
    try:
        for name in opts.recordings:
            try:
                client.recording(name)
            except ArchiveError:
                raise
            except Exception as exc:
                raise clients.archive_error(opts.archive, exc) from exc
    finally:
        client.close()


def read_slice(opts: ReadOptions, schema: Any, partition: Any) -> Iterator[Any]:
    """Replay one partition's range as Arrow batches of ``schema`` (executor side).

    A range the archive truncated after it was planned (before or while it is read) is a
    :class:`DataLossError`, or with ``failOnDataLoss=false`` a warning in the executor's
    log and the rest of the range."""
    from exon.archive import ReplayRangeError

    if not isinstance(partition, ExonPartition):
        return  # Spark's placeholder partition of an empty batch read
    builder = BatchBuilder(schema, opts.format, _arrow_schema(schema))
    pending: list[Any] = []
    start, last = partition.start, -1
    while start < partition.end:
        try:
            for records in clients.replay_range(
                    opts.archive, partition.recording, start, partition.end,
                    timeout=opts.timeout, replay_timeout=opts.replay_timeout):
                last = records[-1][0]
                pending.extend(records)
                if len(pending) >= _ROWS_PER_BATCH:
                    yield builder.build(partition.recording, pending)
                    pending = []
            break
        except ReplayRangeError:
            lost_from = start if last < 0 else last + 1
            first = _start_position(opts, partition.recording)
            if first <= lost_from:
                raise  # not a truncation: the range itself is wrong
            loss = DataLoss(partition.recording, lost_from, min(first, partition.end))
            if opts.fail_on_data_loss:
                raise DataLossError(loss.recording, loss.start, loss.end) from None
            _warn_lost(loss, f"task of [{partition.start}, {partition.end})")
            start = loss.end
    if pending:
        yield builder.build(partition.recording, pending)


def _start_position(opts: ReadOptions, recording: str) -> int:
    client = clients.shared_client(opts.archive, opts.timeout)
    return int(client.recording(recording).start_position)


class _Reader:
    """What both readers share: options, schema and a lazily opened driver-side client."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.opts = parse_read_options(options)
        self.schema = schema
        BatchBuilder(schema, self.opts.format, _arrow_schema(schema))  # reject a bad schema now
        self._client: Any = None
        #: failOnDataLoss=false: the truncated ranges skipped (each warned about once) ...
        self.lost: list[DataLoss] = []
        #: ... and the bytes of the recordings they spanned
        self.lost_bytes = 0

    def _skip_lost(self, start: Mapping[str, int], end: Mapping[str, int],
                   firsts: Mapping[str, int] | None = None) -> dict[str, int]:
        """``start`` past what the archive truncated: DataLossError, or (failOnDataLoss
        false) a warning and the counters ``lost`` / ``lost_bytes``, once per range."""
        moved, lost = skip_lost(_ClientView(self), start, end,
                                fail=self.opts.fail_on_data_loss, firsts=firsts)
        for loss in lost:
            if loss not in self.lost:
                self.lost.append(loss)
                self.lost_bytes += loss.end - loss.start
                _warn_lost(loss, f"{len(self.lost)} range(s), {self.lost_bytes} bytes so far")
        return moved

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None  # a handle never travels to the executors
        return state

    def _archive(self) -> Any:
        if self._client is None:
            try:
                self._client = clients.open_client(self.opts.archive, self.opts.timeout)
            except Exception as exc:
                raise clients.archive_error(self.opts.archive, exc) from exc
        return self._client

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A control request; a client that failed is closed and replaced next time."""
        from exon.archive import ArchiveError

        client = self._archive()
        try:
            return getattr(client, method)(*args, **kwargs)
        except ArchiveError:
            raise
        except Exception as exc:
            self._close_client()
            raise clients.archive_error(self.opts.archive, exc) from exc

    def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:
                pass


class _ClientView:
    """The archive methods ``plan`` needs, through ``_Reader._call``."""

    def __init__(self, reader: _Reader) -> None:
        self._reader = reader

    def recording(self, name: str) -> Any:
        return self._reader._call("recording", name)

    def stop_position(self, name: str) -> int:
        return int(self._reader._call("stop_position", name))

    def advance(self, name: str, start: int, max_records: int) -> int:
        return int(self._reader._call("advance", name, start, max_records))

    def boundaries(self, name: str, start: int, end: int, max_records: int) -> list[int]:
        return list(self._reader._call("boundaries", name, start, end, max_records))

    def count(self, name: str, start: int, end: int | None, max_records: int) -> int:
        return int(self._reader._call("count", name, start, end, max_records=max_records))

    def position_at(self, name: str, timestamp: int) -> int:
        return int(self._reader._call("position_at", name, timestamp))


class ExonBatchReader(_Reader, DataSourceReader):
    """``spark.read.format("exon")``: a recording, or ``[startingPosition, endingPosition)``."""

    def partitions(self) -> list[InputPartition]:
        view = _ClientView(self)
        try:
            start = starting_offset(view, self.opts.recordings, self.opts.starting,
                                    self.opts.starting_at)
            end = ending_offset(view, self.opts.recordings, self.opts.ending,
                                self.opts.ending_at)
            for name in self.opts.recordings:
                if end[name] < start[name]:
                    raise ValueError(f"exon: the end {end[name]} of {name!r} is before its "
                                     f"start {start[name]} (options startingPosition / "
                                     "startingTimestamp, endingPosition / endingTimestamp)")
            start = self._skip_lost(start, end)
            slices = plan_slices(view, start, end, self.opts.max_records_per_partition,
                                 self.opts.min_partitions)
        finally:
            self._close_client()
        return [ExonPartition(s.recording, s.start, s.end) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_slice(self.opts, self.schema, partition)


class ExonStreamReader(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("exon")``: offsets are ``{recording: archive position}``."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        super().__init__(options, schema)
        for name, given in (("endingPosition", self.opts.ending != "latest"),
                            ("endingTimestamp", self.opts.ending_at is not None)):
            if given:  # as Kafka: a stream has no end
                raise ExonOptionError(name, "applies to batch reads (spark.read) only; a "
                                      "streaming query reads on as the recording grows")
        self._last_end: dict[str, int] | None = None  # 0-arg latestOffset: where we are
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow: where to stop
        self._stop: dict[str, int] | None = None  # the stop positions latestOffset last saw
        #: minRecordsPerTrigger: when a trigger was last let through (the delay's clock)
        self._last_batch_at: float | None = None
        self._clock = time.monotonic

    def initialOffset(self) -> dict[str, int]:
        return starting_offset(_ClientView(self), self.opts.recordings, self.opts.starting,
                               self.opts.starting_at)

    def _latest(self, start: Mapping[str, Any] | None, max_records: int | None,
                min_records: int | None = None) -> dict[str, int]:
        view = _ClientView(self)
        # one request per recording gives both ends: the stop, and the start (data loss)
        infos = {name: view.recording(name) for name in self.opts.recordings}
        stop = {name: int(info.stop_position) for name, info in infos.items()}
        self._stop = dict(stop)
        if self._target is not None:
            stop = {name: min(stop[name], self._target[name]) for name in stop}
        if start is None:
            if max_records is not None or min_records is not None:
                start = self._last_end  # 0-arg form: from where we are, once known
            if start is None:
                return stop
        begin = self._skip_lost(check_offset(start, self.opts.recordings, what="start"), stop,
                                {name: int(info.start_position) for name, info in infos.items()})
        # Trigger.AvailableNow passes the default limit too: holding its last records back
        # for more that may never come would only delay its end (ReadMinRows' caveat)
        if min_records is not None and self._target is None \
                and self._held_back(view, begin, stop, min_records):
            return dict(begin)
        return admit(view, begin, stop, max_records)

    def _held_back(self, view: _ClientView, begin: Mapping[str, int],
                   stop: Mapping[str, int], min_records: int) -> bool:
        """minRecordsPerTrigger, as Kafka's: a trigger is held back while fewer records
        than that are there and less than maxTriggerDelay passed since the last trigger
        that was not (the query's first never is); one that is not restarts the delay."""
        now = self._clock()
        if self._last_batch_at is not None \
                and now - self._last_batch_at < self.opts.max_trigger_delay \
                and records_available(view, begin, stop, min_records) < min_records:
            return True
        self._last_batch_at = now
        return False

    def reportLatestOffset(self) -> dict[str, int] | None:
        """What Spark shows as the source's ``latestOffset`` in the query's progress: the
        archive's stop positions that latestOffset saw (compare with ``endOffset``)."""
        return None if self._stop is None else dict(self._stop)

    if HAS_READ_LIMIT:

        def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
            """The end of the next micro-batch: the durable stop positions, capped by
            ``limit`` (``ReadMaxRows`` from ``maxRecordsPerTrigger``; ``ReadMinRows`` from
            ``minRecordsPerTrigger``, with ``maxRecordsPerTrigger`` as its cap)."""
            if isinstance(limit, ReadMaxRows):
                return self._latest(start, limit.max_rows)
            if isinstance(limit, ReadMinRows):
                return self._latest(start, self.opts.max_records_per_trigger, limit.min_rows)
            return self._latest(start, None)

        def getDefaultReadLimit(self) -> ReadLimit:
            if self.opts.min_records_per_trigger is not None:
                return ReadMinRows(self.opts.min_records_per_trigger)
            if self.opts.max_records_per_trigger is None:
                return ReadAllAvailable()
            return ReadMaxRows(self.opts.max_records_per_trigger)

    else:  # pragma: no cover - pyspark 4.0 / 4.1

        # misc: mypy checks both branches and sees two signatures; this one is the
        # 0-argument form of pyspark < 4.2 (the installed 4.2+ base takes start, limit).
        def latestOffset(self) -> dict[str, int]:  # type: ignore[misc]
            """The end of the next micro-batch (capped by ``maxRecordsPerTrigger``, held
            back by ``minRecordsPerTrigger``, from the end this runner last planned or
            committed)."""
            return self._latest(None, self.opts.max_records_per_trigger,
                                self.opts.min_records_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        view = _ClientView(self)
        self._target = {name: view.stop_position(name) for name in self.opts.recordings}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin = check_offset(start, self.opts.recordings, what="start")
        stop = check_offset(end, self.opts.recordings, what="end")
        self._last_end = stop
        begin = self._skip_lost(begin, stop)
        slices = plan_slices(_ClientView(self), begin, stop,
                             self.opts.max_records_per_partition, self.opts.min_partitions)
        return [ExonPartition(s.recording, s.start, s.end) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_slice(self.opts, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed everything before ``end``: tell the archive (``consumer``)."""
        stop = check_offset(end, self.opts.recordings, what="commit")
        self._last_end = stop
        for name, position in stop.items():
            self._call("commit", name, self.opts.consumer, position,
                       truncate=self.opts.truncate)

    def stop(self) -> None:
        self._close_client()


class ExonDataSource(DataSource):
    """``format("exon")``: read recordings of an exon archive, write to exon.

    ``spark.dataSource.register(ExonDataSource)``, then ``spark.readStream.format("exon")``
    (options: ``archive``, ``recording``, ...), ``spark.read.format("exon")`` or
    ``df.writeStream.format("exon")`` (``peer``, or ``archive`` and ``recording``).
    See ``docs/spark.md`` for every option."""

    @classmethod
    def name(cls) -> str:
        return "exon"

    def schema(self) -> str:
        opts = parse_read_options(self.options)
        _check_archive(opts)
        return default_ddl(opts.format, opts.schema, multiple=opts.multiple)

    def reader(self, schema: Any) -> DataSourceReader:
        return ExonBatchReader(_options(self.options), schema)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return ExonStreamReader(_options(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from exon.spark.sink import ExonStreamWriter

        return ExonStreamWriter(parse_write_options(self.options), schema)
