"""A Python data source that does no work, for ``exon bench spark``: the ceiling.

``format("bench-ceiling")`` streams the bench's three columns (``key, value, sent_ns``) from
one ready Arrow batch that each Python worker builds once and hands out again and again:
no I/O, no decoding. What a query reads from it per second is what Spark itself takes from
any Python data source on the machine (its Python worker, the Arrow transfer to the JVM,
the rows into Parquet) -- the most format("exon") could reach there.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

__all__ = ["CeilingSource"]

_ROWS_PER_BATCH = 8192  # as exon's reader hands them to Spark


def _batch() -> Any:
    """This worker's ready batch (built on first use). Its ``sent_ns`` are a clock's: about
    a microsecond apart with jitter, as the bench's events are (Parquet stores them in as
    many bytes); :func:`_stamped` moves them on for each row range."""
    import random

    import pyarrow as pa

    cached = getattr(sys.modules[__name__], "_cached", None)
    if cached is None:
        rng, base, n = random.Random(7), time.time_ns(), _ROWS_PER_BATCH
        cached = pa.RecordBatch.from_arrays(
            [pa.array([f"k{i % 8}" for i in range(n)], pa.string()),
             pa.array([i % 1000 for i in range(n)], pa.int64()),
             pa.array([base + 1000 * i + rng.randrange(1000) for i in range(n)], pa.int64())],
            names=["key", "value", "sent_ns"])
        sys.modules[__name__]._cached = cached  # type: ignore[attr-defined]
    return cached


def _stamped(batch: Any, first_row: int, n: int) -> Any:
    """``n`` rows of ``batch`` whose ``sent_ns`` go on from row ``first_row`` (one vector
    add: every row of a run gets its own stamp)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    part = batch.slice(0, n)
    sent = pc.add(part.column(2), pa.scalar(1000 * first_row, pa.int64()))
    return pa.RecordBatch.from_arrays([part.column(0), part.column(1), sent],
                                      schema=batch.schema)


class _Reader(DataSourceStreamReader):
    """Offsets ``{"n": rows}``; ``rows`` and ``per_trigger`` from the options; two
    partitions per batch (the two cores)."""

    def __init__(self, options: dict[str, str]) -> None:
        lowered = {str(k).lower(): v for k, v in options.items()}  # Spark's keys: any case
        self.rows = int(lowered["rows"])
        self.per_trigger = int(lowered["pertrigger"])
        self._next = 0

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    # pyspark 4.2+ passes (start, limit), 4.0/4.1 nothing: take either
    def latestOffset(self, start: dict[str, int] | None = None,
                     limit: Any = None) -> dict[str, int]:
        begin = self._next if start is None else int(start["n"])
        return {"n": min(begin + self.per_trigger, self.rows)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        a, b = int(start["n"]), int(end["n"])
        self._next = b
        mid = (a + b) // 2
        return [InputPartition((a, mid)), InputPartition((mid, b))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        a, b = partition.value
        batch = _batch()
        row = a
        while row < b:
            n = min(b - row, batch.num_rows)
            yield _stamped(batch, row, n)
            row += n


class CeilingSource(DataSource):
    """``spark.dataSource.register(CeilingSource)``; ``format("bench-ceiling")`` with
    options ``rows`` and ``perTrigger``."""

    @classmethod
    def name(cls) -> str:
        return "bench-ceiling"

    def schema(self) -> str:
        return "key string, value long, sent_ns long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _Reader(dict(self.options))
