"""The reader and writer travel to executors by cloudpickle: options only, no handle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark import cloudpickle
from pyspark.sql.types import StructType

from exon.spark.options import parse_write_options
from exon.spark.sink import ExonStreamWriter
from exon.spark.source import ExonBatchReader, ExonPartition, ExonStreamReader
from tests.spark.helpers import ArchiveService, events, push_events

Fresh = Callable[[], str]
RAW = StructType.fromJson({"type": "struct", "fields": [
    {"name": "position", "type": "long", "nullable": True, "metadata": {}},
    {"name": "payload", "type": "binary", "nullable": True, "metadata": {}},
]})


def test_a_stream_reader_that_talked_to_the_archive_pickles_without_its_client(
        archive: ArchiveService, fresh: Fresh) -> None:
    name = fresh()
    push_events(archive.address, name, events(10))
    reader = ExonStreamReader({"archive": archive.address, "recording": name}, RAW)
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        parts = reader.partitions(start, end)
        assert reader._client is not None  # the driver side keeps one open
        data = cloudpickle.dumps(reader)
        assert len(data) < 20_000
        copy = pickle_loads(data)
        assert copy._client is None
        assert copy.opts == reader.opts
        # the copy reads on its own (as an executor would), from its partition alone
        rows = [row for batch in copy.read(cloudpickle.loads(cloudpickle.dumps(parts[0])))
                for row in batch.to_pylist()]
        assert [bytes(r["payload"]) for r in rows] == events(10)
    finally:
        reader.stop()
    assert reader._client is None


def pickle_loads(data: bytes) -> Any:
    import pickle

    return pickle.loads(data)


def test_batch_reader_and_partition_pickle() -> None:
    reader = ExonBatchReader({"archive": "127.0.0.1:1", "recording": "r"}, RAW)
    copy = pickle_loads(cloudpickle.dumps(reader))
    assert copy.opts == reader.opts
    part = pickle_loads(cloudpickle.dumps(ExonPartition("r", 64, 128)))
    assert (part.recording, part.start, part.end) == ("r", 64, 128)


@pytest.mark.parametrize("options", [{"peer": "127.0.0.1:5/6"},
                                     {"archive": "127.0.0.1:5", "recording": "r"}])
def test_writer_pickles(options: dict[str, str]) -> None:
    writer = ExonStreamWriter(parse_write_options(options), RAW)
    copy = pickle_loads(cloudpickle.dumps(writer))
    assert copy.opts == writer.opts
    assert copy.columns == ["position", "payload"]
    assert not [k for k, v in vars(copy).items() if hasattr(v, "close")]

