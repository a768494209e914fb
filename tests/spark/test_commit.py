"""The stream reader's commit: the archive learns how far the query consumed, and with
truncate=true may drop whole segments every consumer is past."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql.types import StructType

from exon.archive import ArchiveClient
from exon.spark.source import ExonStreamReader
from tests.spark.helpers import ArchiveService, events, push_events

Fresh = Callable[[], str]
RAW = StructType.fromJson({"type": "struct", "fields": [
    {"name": "position", "type": "long", "nullable": True, "metadata": {}}]})


def test_commit_reports_progress_and_truncates_below_every_consumer(
        archive: ArchiveService, fresh: Fresh) -> None:
    name = fresh()
    push_events(archive.address, name, events(3000))  # ~380 KB: several 64 KiB segments
    with ArchiveClient(archive.address) as ac:
        positions = [r.position for r in ac.replay(name)]
        ac.commit(name, "slow-reader", positions[1000])
    reader = ExonStreamReader({"archive": archive.address, "recording": name,
                               "consumer": "q1", "truncate": "true"}, RAW)
    try:
        reader.commit({name: positions[2500]})
        with ArchiveClient(archive.address) as ac:
            info = ac.recording(name)
        assert info.consumers["q1"] == positions[2500]
        # whole segments below the slowest consumer went; nothing it still needs
        assert 0 < info.start_position <= positions[1000]
        assert info.start_position % (64 * 1024) == 0
    finally:
        reader.stop()
