"""The archive service's metrics per recording (issue #31): stop position, bytes,
replays running and consumers' lag, as series of its node in the driver's CnC."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import exon
from exon.archive.client import ArchiveClient
from exon.archive.service import ArchiveService
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.stat import add_rates, snapshot
from tests.sockets import helpers
from tests.transport.aeron.driver_fixtures import wait_until

driver = helpers.driver  # the fixtures of tests/sockets
make_node = helpers.make_node


def series(directory: str) -> dict[tuple[str, str, str], int]:
    """(name, recording, consumer) -> value of the archive series in the CnC."""
    with CncFile.open(directory) as cnc:
        snap = add_rates(snapshot(cnc), None, None)
    return {(m["name"], m["labels"].get("recording", ""), m["labels"].get("consumer", "")):
            m["value"] for m in snap["metrics"] if m["name"].startswith("exon_archive_")}


def test_recording_metrics_follow_the_archive(make_node: Callable[..., exon.Node],
                                              driver: Any, tmp_path: Any) -> None:
    service = ArchiveService(str(tmp_path / "arch"), ingest={"orders": 10},
                             node=make_node()).start()
    client_node = make_node()
    try:
        push = client_node.socket("push")
        push.link(f"{service.address}/10")
        for i in range(40):
            push.send(b"record %d" % i)
        push.close(timeout=10)
        stop = service.archive.stop_position("orders")
        assert stop > 0
        assert wait_until(lambda: series(driver.dir).get(
            ("exon_archive_recording_stop_position_bytes", "orders", "")) == stop, timeout=10)
        found = series(driver.dir)
        assert found[("exon_archive_recording_bytes", "orders", "")] == stop
        assert found[("exon_archive_recording_replays", "orders", "")] == 0
        assert found[("exon_archive_recording_failed", "orders", "")] == 0
        client = ArchiveClient(service.address, node=client_node)
        half = client.boundaries("orders", 0, None, 20)[1]
        client.commit("orders", "billing job", half)
        key = ("exon_archive_consumer_lag_bytes", "orders", "billing%20job")
        assert wait_until(lambda: series(driver.dir).get(key) == stop - half, timeout=10)
        records = ("exon_archive_consumer_lag_records", "orders", "billing%20job")
        assert wait_until(lambda: series(driver.dir).get(records) == 20, timeout=10)
        for i in range(5):  # counted on from the last count: 5 more, 10 fewer
            push = client_node.socket("push")
            push.link(f"{service.address}/10")
            push.send(b"more %d" % i)
            push.close(timeout=10)
        client.commit("orders", "billing job", client.boundaries("orders", 0, None, 30)[1])
        assert wait_until(lambda: series(driver.dir).get(records) == 15, timeout=10)
        replay = client.replay_batches("orders", follow=True)
        next(replay)  # the replay runs now
        assert wait_until(lambda: series(driver.dir).get(
            ("exon_archive_recording_replays", "orders", "")) == 1, timeout=10)
        replay.close()
        assert wait_until(lambda: series(driver.dir).get(
            ("exon_archive_recording_replays", "orders", "")) == 0, timeout=10)
    finally:
        service.close()
    assert wait_until(lambda: not series(driver.dir), timeout=10), "freed with the service"
