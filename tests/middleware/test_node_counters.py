"""A node's statistics as exon counters in its driver's CnC (issue #13): allocated through
the driver (ADD_COUNTER), refreshed by the node's poll loop, freed when the node closes and
reclaimed when its process dies."""

from __future__ import annotations

import dataclasses
import logging
import signal
import uuid
from collections.abc import Iterator

import pytest

import exon
from exon.core.socket_core import CoreStatistics
from exon.middleware.node_counters import PUBLISH_INTERVAL
from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron.cnc import CncFile
from exon.transport.aeron.counters import (
    NODE_COUNTER_TYPE_FIRST,
    NODE_COUNTER_TYPE_LAST,
    STATE_ALLOCATED,
    STATE_RECLAIMED,
    Counter,
    NodeCounter,
)
from tests.sockets.helpers import DRIVER
from tests.transport.aeron.driver_fixtures import (
    kill,
    python_process,
    read_line,
    unique_dir,
    wait_until,
)


def node_counters(cnc: CncFile, node: exon.Node | None = None) -> dict[NodeCounter, Counter]:
    """The exon counters in ``cnc`` (of ``node`` only, when given), by kind."""
    found = {}
    for c in cnc.counters().snapshot():
        if NODE_COUNTER_TYPE_FIRST <= c.type_id <= NODE_COUNTER_TYPE_LAST and (
                node is None or f"node {node.node_id} " in c.label):
            found[NodeCounter(c.type_id)] = c
    return found


@pytest.fixture
def cnc(driver: MediaDriver) -> Iterator[CncFile]:
    with CncFile.open(driver.dir) as f:
        yield f


def test_every_statistic_has_a_counter_with_a_fixed_type_id() -> None:
    names = {f.name.upper() for f in dataclasses.fields(CoreStatistics)}
    assert names | {"LINKS", "FRAMES_DROPPED", "CONNECTS_FAILED", "FRAGMENTS_DROPPED"} == set(
        NodeCounter.__members__)
    assert all(NODE_COUNTER_TYPE_FIRST <= k <= NODE_COUNTER_TYPE_LAST for k in NodeCounter)
    assert NodeCounter.LINKS == 2000
    assert NodeCounter.MALFORMED_DROPPED == 2003
    assert NodeCounter.MALFORMED_DROPPED.label("ab", "h:1") == "exon drops malformed: node ab h:1"


def test_a_node_registers_one_counter_per_statistic(make_node, cnc: CncFile) -> None:
    node = make_node()
    found = node_counters(cnc, node)
    assert set(found) == set(NodeCounter)
    reader = cnc.counters()
    for kind, c in found.items():
        assert c.label == kind.label(node.node_id, node.address)
        assert c.owner_id == node._aeron.client_id
        assert reader.key(c.id)[:16] == uuid.UUID(hex=node.node_id).bytes
    assert found[NodeCounter.LINKS].value == 0


def test_counters_follow_the_statistics_a_malformed_frame_raises_the_drop(
        make_node, cnc: CncFile) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=1)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=5)
    push.send(b"hello", timeout=5)
    assert pull.receive(timeout=5).payload == b"hello"
    reader = cnc.counters()
    ids = {kind: c.id for kind, c in node_counters(cnc, b).items()}
    # refreshed by b's own poll loop (nobody calls statistics())
    assert wait_until(lambda: reader.value(ids[NodeCounter.LINKS]) == 1, 5.0)
    assert reader.value(ids[NodeCounter.LINKS_ESTABLISHED]) == 1
    assert reader.value(ids[NodeCounter.MALFORMED_DROPPED]) == 0
    with a._lock:  # a garbage exon frame on the established stream a -> b
        a._send_frames([(b.address, b"\x00 not an exon frame")])
    assert wait_until(lambda: reader.value(ids[NodeCounter.MALFORMED_DROPPED]) == 1,
                      5.0 + PUBLISH_INTERVAL)
    stats = b.statistics()
    assert stats.malformed_dropped == 1
    assert reader.value(ids[NodeCounter.FRAMES_RECEIVED]) == stats.frames_received
    # the stream still works, and closing the link shows in the counters
    push.send(b"after", timeout=5)
    assert pull.receive(timeout=5).payload == b"after"
    push.close(timeout=5)
    assert wait_until(lambda: reader.value(ids[NodeCounter.LINKS]) == 0, 5.0)
    assert reader.value(ids[NodeCounter.LINKS_CLOSED]) == 1


def test_counters_are_freed_when_the_node_closes(driver: MediaDriver, cnc: CncFile) -> None:
    node = exon.Node("127.0.0.1:0", driver_dir=driver.dir)
    ids = [c.id for c in node_counters(cnc, node).values()]
    assert len(ids) == len(NodeCounter)
    node.close()
    reader = cnc.counters()
    assert wait_until(lambda: all(reader.state(i) == STATE_RECLAIMED for i in ids), 5.0)
    assert node_counters(cnc) == {}


NODE_THAT_DIES = """
import sys, time
import exon
node = exon.Node("127.0.0.1:0", driver_dir=sys.argv[1])
print(node.node_id, flush=True)
time.sleep(60)
"""


def test_counters_of_a_killed_node_are_reclaimed_by_the_driver() -> None:
    directory = unique_dir("nc")
    settings = dict(DRIVER, client_liveness_timeout_ns=500_000_000, dir_delete_on_shutdown=True)
    with MediaDriver.launch(dir=directory, **settings), CncFile.open(directory) as cnc:
        proc = python_process(NODE_THAT_DIES, directory)
        try:
            node_id = read_line(proc, 30)
            reader = cnc.counters()
            ids = [c.id for c in cnc.counters().snapshot() if f"node {node_id} " in c.label]
            assert len(ids) == len(NodeCounter)
            assert all(reader.state(i) == STATE_ALLOCATED for i in ids)
            kill(proc, signal.SIGKILL)
            assert wait_until(lambda: all(reader.state(i) == STATE_RECLAIMED for i in ids), 10.0)
        finally:
            kill(proc)


def test_a_driver_without_room_for_the_counters_still_runs_the_node(
        caplog: pytest.LogCaptureFixture) -> None:
    directory = unique_dir("nc")
    settings = dict(DRIVER, counters_values_buffer_length=64 * 1024, dir_delete_on_shutdown=True)
    with MediaDriver.launch(dir=directory, **settings), Aeron.connect(directory) as hog, \
            CncFile.open(directory) as cnc:
        reader = cnc.counters()
        free = reader.max_counters - len(list(reader.ids()))
        # leave room for what the node needs to run (its client heartbeat, its doorbell),
        # not for its exon counters
        hogs = [hog.add_counter(2100, "hog") for _ in range(free - 5)]
        with caplog.at_level(logging.WARNING, logger="exon.node"), \
                exon.Node("127.0.0.1:0", driver_dir=directory, udp=False) as node:
            assert "runs without its exon stat counters" in caplog.text
            assert node_counters(cnc, node) == {}  # the few it got were given back
            pull = node.socket("pull", tag=1)
            push = node.socket("push")
            push.link(f"{node.address}/1", timeout=5)
            push.send(b"still works", timeout=5)
            assert pull.receive(timeout=5).payload == b"still works"
            assert node.statistics().links_established == 2
        assert len(hogs) > 400
