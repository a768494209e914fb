"""``df.writeStream.format("exon")``: rows out to a PULL socket, or into a recording.

Two modes (``docs/spark.md``):

* ``peer=HOST:PORT/TAG`` -- each task PUSHes its rows to that PULL socket, in chunks
  (``send_many``, one cookie per chunk), and returns only once every cookie came back (the
  receiving application took every row). A lost cookie fails the task, Spark re-runs the
  batch and its rows go out again: **at-least-once**; a receiver that must not see a row
  twice de-duplicates.
* ``archive=HOST:PORT, recording=NAME`` -- each task sends its rows, in chunks
  (``KeyedWriter.send_many``), through the archive's keyed ingest with the key (query id,
  partition, batch id, sequence in the partition). The archive records a row only if that
  (query, partition) has not recorded (batch, seq) or a later one, and a task returns once
  its rows are durable. A batch that Spark re-runs after a failure (same query id from the
  checkpoint, same input from a replayable source, same partitioning) produces the same
  keys, so nothing is recorded twice: **exactly-once** into
  the recording, for deterministic queries.

A row's payload is its ``payload`` column (binary, or a string as UTF-8) when it has one,
else the whole row as a msgpack map (timestamps as ISO-8601 UTC strings, dates as ISO
dates, decimals as strings), which ``format("exon").option("format", "msgpack")`` reads
back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgpack
from pyspark.sql.datasource import WriterCommitMessage

from exon.errors import ExonError
from exon.spark import clients
from exon.spark.options import WriteOptions

try:  # 4.1+: rows arrive as Arrow batches (no Row object per row)
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _WriterBase
except ImportError:  # pragma: no cover - pyspark 4.0
    # assignment: mypy sees the 4.1+ class above; this is its 4.0 stand-in
    from pyspark.sql.datasource import (  # type: ignore[assignment]
        DataSourceStreamWriter as _WriterBase,
    )

__all__ = ["ExonCommitMessage", "ExonStreamWriter", "SinkError"]

_BATCH_ID = "streaming.sql.batchId"
_QUERY_ID = "sql.streaming.queryId"


class SinkError(ExonError):
    """A task could not get confirmation for its rows (the batch fails; Spark retries it)."""


@dataclass
class ExonCommitMessage(WriterCommitMessage):
    """What one task wrote: its partition and how many rows (confirmed)."""

    partition: int
    rows: int


def _msgpack_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:  # a Row's timestamp: local time, as pyspark makes it
            value = value.astimezone()
        return value.astimezone(dt.timezone.utc).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    raise TypeError(f"exon: cannot encode {type(value).__name__} as msgpack")


def _pack_row(row: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb(row, default=_msgpack_default, use_bin_type=True)
    return packed


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def payloads(batches: Iterable[Any], columns: list[str]) -> Iterator[bytes]:
    """The payload of every row of ``batches`` (Arrow RecordBatches, or pyspark Rows)."""
    use_payload = "payload" in columns
    for item in batches:
        if hasattr(item, "num_rows"):  # a pyarrow.RecordBatch
            if use_payload:
                yield from map(_as_bytes, item.column(item.schema.get_field_index("payload"))
                               .to_pylist())
            else:
                yield from map(_pack_row, item.to_pylist())
        elif use_payload:  # a Row (pyspark 4.0)
            yield _as_bytes(item["payload"])
        else:
            yield _pack_row(item.asDict(recursive=True))


def _task_keys(opts: WriteOptions) -> tuple[str, int, int]:
    """(query id, batch id, partition) of the running task, from Spark's task context."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise SinkError("exon: the sink's write() runs inside a Spark task")
    batch = context.getLocalProperty(_BATCH_ID)
    query = opts.query or context.getLocalProperty(_QUERY_ID)
    if batch is None or query is None:
        raise SinkError("exon: the archive sink needs a streaming query (no batch id or "
                        "query id in the task's properties)")
    return query, int(batch), context.partitionId()


#: rows per ``send_many`` (both modes): one native call per run of credit, one cookie
PUSH_CHUNK = 4096


def push_rows(node: Any, peer: str, rows: Iterable[bytes], *, timeout: float,
              clock: Callable[[], float] = time.monotonic, chunk: int = PUSH_CHUNK) -> int:
    """PUSH every payload of ``rows`` to ``peer``; return once the PULL's application took
    every one (count). Rows go in chunks of ``chunk`` through ``send_many``, each chunk
    with one cookie that comes back only when every row of the chunk was taken. A lost
    cookie or the timeout raises :class:`SinkError`."""
    from exon.sockets.messages import CookieLost

    deadline = clock() + timeout
    push = node.socket("push")
    try:
        try:
            push.link(peer, timeout=timeout)
        except ExonError as exc:
            raise SinkError(f"exon: cannot link to the PULL at {peer} (option 'peer'): "
                            f"{type(exc).__name__}: {exc}") from exc
        sent = chunks = confirmed = 0
        it = iter(rows)
        while True:
            batch = list(itertools.islice(it, chunk))
            if not batch:
                break
            # the cookie: the chunk's first row (rows [sent, sent + len(batch)))
            push.send_many(batch, cookie=(sent, len(batch)),
                           timeout=max(0.0, deadline - clock()))
            sent += len(batch)
            chunks += 1
        while confirmed < chunks:
            left = deadline - clock()
            if left <= 0:
                raise SinkError(f"exon: {chunks - confirmed} of {chunks} chunks ({sent} rows) "
                                f"sent to {peer} were not confirmed within {timeout:g} s "
                                "(option 'timeout')")
            try:
                item = push.receive(timeout=left)
            except ExonError as exc:
                raise SinkError(f"exon: waiting for the cookies of {peer}: "
                                f"{type(exc).__name__}: {exc}") from exc
            if isinstance(item, CookieLost):
                first, count = item.value
                raise SinkError(f"exon: rows {first}..{first + count - 1} of this task may "
                                f"not have reached {peer} (link broken); the batch fails and "
                                "Spark sends it again")
            confirmed += 1
        return sent
    finally:
        try:
            push.close(timeout=1.0)
        except ExonError:
            pass


def record_rows(client: Any, recording: str, query: str, batch: int, partition: int,
                rows: Iterable[bytes], *, timeout: float) -> int:
    """Send ``rows`` through the archive's keyed ingest; return once they are durable."""
    writer = client.keyed_writer(recording, query)
    try:
        seq = 0
        it = iter(rows)
        while chunk := list(itertools.islice(it, PUSH_CHUNK)):
            # one send_many (one native call per run of credit, one cookie) per chunk
            writer.send_many(batch, partition, seq, chunk)
            seq += len(chunk)
        writer.flush(timeout)
        return seq
    finally:
        writer.close()


class ExonStreamWriter(_WriterBase):
    """The sink of ``df.writeStream.format("exon")`` (picklable: options and column names)."""

    def __init__(self, options: WriteOptions, schema: Any) -> None:
        self.opts = options
        self.columns = [f.name for f in schema.fields]
        if "payload" in self.columns:
            kind = type(schema["payload"].dataType).__name__
            if kind not in ("BinaryType", "StringType"):
                raise ValueError("exon: the sink sends column 'payload' as the message; it "
                                 f"must be binary or string, not {kind}")

    def write(self, iterator: Iterator[Any]) -> ExonCommitMessage:
        rows = payloads(iterator, self.columns)
        opts = self.opts
        if opts.peer is not None:
            from pyspark import TaskContext

            context = TaskContext.get()
            partition = context.partitionId() if context is not None else 0
            node = clients.process_node(opts.peer.rsplit("/", 1)[0])
            count = push_rows(node, opts.peer, rows, timeout=opts.timeout)
            return ExonCommitMessage(partition, count)
        assert opts.archive is not None
        assert opts.recording is not None
        query, batch, partition = _task_keys(opts)
        try:
            client = clients.shared_client(opts.archive, opts.timeout)
            count = record_rows(client, opts.recording, query, batch, partition, rows,
                                timeout=opts.timeout)
        except ExonError as exc:
            clients.drop_client(opts.archive)
            from exon.archive import ArchiveError

            if isinstance(exc, ArchiveError):
                raise
            raise clients.archive_error(opts.archive, exc) from exc
        return ExonCommitMessage(partition, count)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Nothing left to do: every task returned only once its rows were confirmed."""

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Rows already confirmed stay; the re-run batch repeats them (peer mode) or is
        de-duplicated by the archive (archive mode)."""
