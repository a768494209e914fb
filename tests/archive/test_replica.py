"""Replication between two archive services in one process, on loopback (docs/protocol.md
3.7): a replica catching up and following, min-insync holding cookies, promotion and
epochs, a stale primary cutting its tail, and bad setups."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

import exon
from exon.archive import Archive, ArchiveService
from exon.archive.client import ArchiveClient
from exon.archive.errors import RecordingNotFound
from exon.archive.segments import segment_bases, segment_path

SEGMENT = 64 * 1024


def wait_until(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


@pytest.fixture
def node() -> Iterator[exon.Node]:
    n = exon.Node(endpoint="127.0.0.1:0")
    yield n
    n.close()


def producer(node: exon.Node, service: ArchiveService, tag: int = 10) -> exon.Socket:
    push = node.socket("push")
    push.link(f"{service.address}/{tag}", timeout=5.0)
    return push


def send(push: exon.Socket, first: int, count: int, size: int = 200) -> None:
    for i in range(first, first + count):
        push.send(i.to_bytes(4, "little") * (size // 4), cookie=i)


def cookies(push: exon.Socket, want: int, timeout: float = 10.0) -> int:
    """How many cookies came back (at most ``want``) within ``timeout`` s."""
    got = 0
    deadline = time.monotonic() + timeout
    while got < want and time.monotonic() < deadline:
        try:
            item = push.receive(timeout=max(0.01, deadline - time.monotonic()))
        except exon.Timeout:
            break
        assert not isinstance(item, exon.CookieLost)
        got += 1
    return got


def files_of(directory: str, rid: int) -> dict[int, bytes]:
    out = {}
    for base in segment_bases(directory, rid):
        with open(segment_path(directory, rid, base), "rb") as f:
            out[base] = f.read()
    return out


def same_bytes(a: ArchiveService, b: ArchiveService, rid: int = 1) -> bool:
    stop = a.archive.stop_position(rid)
    try:
        if b.archive.stop_position(rid) != stop:
            return False
    except RecordingNotFound:
        return False
    return files_of(a.archive.directory, rid) == files_of(b.archive.directory, rid)


def test_a_replica_catches_up_then_follows_byte_for_byte(tmp_path, node) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10},
                        segment_length=SEGMENT) as primary:
        push = producer(node, primary)
        send(push, 0, 800)  # more than a segment: the replica copies the PAD too
        assert cookies(push, 800) == 800
        with ArchiveClient(primary.address, node=node) as client:
            client.commit("orders", "spark-1", primary.archive.stop_position("orders"))
        with ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica:
            wait_until(lambda: same_bytes(primary, replica))
            assert len(segment_bases(replica.archive.directory, 1)) >= 2
            send(push, 800, 300)  # live
            assert cookies(push, 300) == 300
            wait_until(lambda: same_bytes(primary, replica))
            assert replica.archive.entry("orders").consumers == {
                "spark-1": primary.archive.entry("orders").consumers["spark-1"]}
            assert replica.archive.entry("orders").ingest_tag == 10
            wait_until(lambda: replica.follower is not None
                       and replica.follower.state == "following")
            status = primary.replication_status()
            assert status["members"][0]["member"] == replica.address
            assert status["members"][0]["in_sync"]
            # a replica refuses writes: no ingest socket, no commit
            with ArchiveClient(replica.address, node=node) as rc, \
                    pytest.raises(exon.archive.ArchiveError, match="replica"):
                rc.commit("orders", "spark-1", 0)
        send(push, 1100, 100)  # while the replica is down (min-insync 1: confirmed)
        assert cookies(push, 100) == 100
        with ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica:
            wait_until(lambda: same_bytes(primary, replica))  # caught up from where it was


def test_keyed_dedup_marks_are_replicated(tmp_path, node) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10},
                        segment_length=SEGMENT) as primary, \
            ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica, \
            ArchiveClient(primary.address, node=node) as client:
        with client.keyed_writer("orders", "q1") as w:
            for seq in range(20):
                w.send(batch=3, partition=0, seq=seq, payload=b"row%d" % seq)
            w.flush()
        wait_until(lambda: same_bytes(primary, replica))
        assert replica.archive.writer("orders").dedup == {("q1", 0): (3, 19)}
        assert replica.archive.entry("orders").keyed


def test_min_insync_two_holds_cookies_until_a_replica_has_them(tmp_path, node) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10}, segment_length=SEGMENT,
                        min_insync=2, replica_timeout=1.0) as primary:
        push = producer(node, primary)
        send(push, 0, 50)
        assert cookies(push, 50, timeout=1.0) == 0  # on the primary's disk only: held
        assert primary.archive.stop_position("orders") > 0
        replica = ArchiveService(str(tmp_path / "r"), replica_of=primary.address).start()
        try:
            assert cookies(push, 50) == 50
            assert replica.archive.stop_position("orders") >= \
                primary.insync.confirmed(1) > 0
        finally:
            replica.close()
        # the replica is gone: it leaves the set, and nothing more is confirmed
        wait_until(lambda: primary.insync.in_sync() == [])
        assert primary.insync.left_count >= 1
        send(push, 50, 50)
        assert cookies(push, 50, timeout=1.5) == 0
        confirmed = primary.insync.confirmed(1)
        assert confirmed < primary.archive.stop_position("orders")
        with ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica:
            assert cookies(push, 50) == 50  # it came back: released
            assert same_bytes(primary, replica) or \
                replica.archive.stop_position("orders") >= primary.insync.confirmed(1)
        assert any("left the in-sync set" in e for e in primary.events)


def test_promotion_epochs_and_a_stale_primary_cuts_its_tail(tmp_path, node) -> None:
    pdir, rdir = str(tmp_path / "p"), str(tmp_path / "r")
    primary = ArchiveService(pdir, ingest={"orders": 10}, segment_length=SEGMENT).start()
    try:
        push = producer(node, primary)
        send(push, 0, 100)
        assert cookies(push, 100) == 100
        with ArchiveService(rdir, replica_of=primary.address) as replica:
            wait_until(lambda: same_bytes(primary, replica))
        copied = primary.archive.stop_position("orders")
        send(push, 100, 40)  # the replica is down: only the primary has these
        assert cookies(push, 40) == 40
        tail_end = primary.archive.stop_position("orders")
        assert tail_end > copied
    finally:
        primary.close()  # the primary dies
    push.close(timeout=0)
    replica = ArchiveService(rdir, replica_of=primary.address).start()
    try:
        epoch = replica.promote()  # the operator promotes the replica
        assert epoch == 2
        assert replica.role == "primary"
        assert Archive(rdir).catalog.epochs[-1] == [2, {"1": copied}]
        push = producer(node, replica)
        send(push, 1000, 30)
        assert cookies(push, 30) == 30
        # the old primary comes back as a replica of the new one: it cuts [copied,
        # tail_end), which the new primary never had, then follows
        with ArchiveService(pdir, replica_of=replica.address) as old:
            wait_until(lambda: same_bytes(replica, old))
            assert old.archive.catalog.epoch == 2
            assert any(f"cut the tail [{copied}, {tail_end})" in e for e in old.events)
        payloads = [r.payload[:4] for r in Archive(pdir).replay("orders")]
        assert [int.from_bytes(p, "little") for p in payloads] == [
            *range(100), *range(1000, 1030)]
    finally:
        replica.close()


def test_promotion_fences_a_running_old_primary(tmp_path, node) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10},
                        segment_length=SEGMENT) as primary, \
            ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica:
        push = producer(node, primary)
        send(push, 0, 20)
        assert cookies(push, 20) == 20
        wait_until(lambda: same_bytes(primary, replica))
        with ArchiveClient(replica.address, node=node) as client:
            assert client._request("promote")["epoch"] == 2
        # the old primary refuses writes (its ingest closed) and follows the new one
        wait_until(lambda: primary.role == "replica")
        assert primary.primary == replica.address
        assert primary.ingest == {}
        assert writes_refused(push)
        push2 = producer(node, replica)
        send(push2, 20, 10)
        assert cookies(push2, 10) == 10
        wait_until(lambda: same_bytes(replica, primary))
        wait_until(lambda: primary.archive.catalog.epoch == 2)


def writes_refused(push: exon.Socket) -> bool:
    """Whether sends to a closed ingest stop (within about 10 s)."""
    try:
        for _ in range(10):
            push.send(b"late", timeout=1.0)
            time.sleep(0.1)
    except (exon.BrokenLink, exon.ClosedError, exon.Timeout):
        return True
    return False


def test_a_replica_of_itself_is_refused(tmp_path) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10}) as primary, \
            pytest.raises(exon.ConfigurationError, match="own address"):
            ArchiveService(str(tmp_path / "r"), endpoint=primary.address,
                           replica_of=primary.address)
    service = ArchiveService(str(tmp_path / "x"), replica_of="127.0.0.1:1").start()
    try:
        # pointed at itself past the address check (as through another name of the host):
        # its own service tells it so (the instance token), and it stops asking
        assert service.follower is not None
        service.follower.primary = service.address
        wait_until(lambda: service.follower is not None
                   and service.follower.state.startswith("refused"))
        assert "itself" in service.follower.state
    finally:
        service.close()


def test_a_replica_of_the_wrong_primary_is_refused_and_keeps_its_data(tmp_path, node) -> None:
    with ArchiveService(str(tmp_path / "a"), ingest={"orders": 10}) as a:
        push = producer(node, a)
        send(push, 0, 10)
        assert cookies(push, 10) == 10
    with ArchiveService(str(tmp_path / "b"), ingest={"orders": 10}) as b:
        push = producer(node, b)
        send(push, 0, 5)
        assert cookies(push, 5) == 5
        with ArchiveService(str(tmp_path / "a"), replica_of=b.address) as replica:
            wait_until(lambda: replica.follower is not None
                       and replica.follower.state.startswith("refused"))
            assert "wrong primary" in replica.follower.state
            assert replica.archive.stop_position("orders") > b.archive.stop_position("orders")
    assert len(list(Archive(str(tmp_path / "a")).replay("orders"))) == 10


def test_split_brain_the_older_epoch_refuses_writes(tmp_path, node) -> None:
    # r was promoted (epoch 2) while p, of epoch 1, was cut off; r is then pointed at p
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10}) as p:
        r = ArchiveService(str(tmp_path / "r"), replica_of=p.address).start()
        wait_until(lambda: r.follower is not None and r.follower.state != "connecting")
    try:
        assert r.promote() == 2  # p is down: it is not fenced
    finally:
        r.close()
    p = ArchiveService(str(tmp_path / "p"), ingest={"orders": 10}).start()
    try:
        assert p.archive.catalog.epoch == 1
        with ArchiveService(str(tmp_path / "r"), replica_of=p.address) as r:
            wait_until(lambda: r.follower is not None and r.follower.state.startswith("refused"))
            assert "split brain" in r.follower.state
        assert p.role == "fenced"
        assert p.ingest == {}
        assert any("split brain" in e for e in p.events)
    finally:
        p.close()


def test_a_client_of_several_members_reads_from_one_that_answers_and_writes_at_the_primary(
        tmp_path, node) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10},
                        segment_length=SEGMENT) as primary, \
            ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica:
        push = producer(node, primary)
        send(push, 0, 300)
        assert cookies(push, 300) == 300
        wait_until(lambda: same_bytes(primary, replica))
        # a member that is down first, then the replica, then the primary
        members = f"127.0.0.1:1,{replica.address},{primary.address}"
        with ArchiveClient(members, node=node, timeout=1.0) as client:
            assert len(list(client.replay("orders"))) == 300
            assert client.address == replica.address  # read from the replica
            client.commit("orders", "c", 0)  # a write: at the primary
            assert client.address == primary.address
            with client.keyed_writer("orders", "q") as w:
                w.send(batch=0, partition=0, seq=0, payload=b"k")
                w.flush()
        wait_until(lambda: same_bytes(primary, replica))
        assert replica.archive.entry("orders").consumers == {"c": 0}


def test_a_replay_moves_to_another_member_when_its_member_dies(tmp_path, node) -> None:
    primary = ArchiveService(str(tmp_path / "p"), ingest={"orders": 10},
                             segment_length=SEGMENT).start()
    replica = ArchiveService(str(tmp_path / "r"), replica_of=primary.address).start()
    try:
        push = producer(node, primary)
        send(push, 0, 2000)
        assert cookies(push, 2000) == 2000
        wait_until(lambda: same_bytes(primary, replica))
        with ArchiveClient(f"{primary.address},{replica.address}", node=node,
                           timeout=1.0) as client:
            seen = []
            for i, rec in enumerate(client.replay("orders")):
                seen.append(int.from_bytes(rec.payload[:4], "little"))
                if i == 10:
                    primary.close()  # the member serving the replay dies mid-stream
            assert seen == list(range(2000))  # each record once, in order
            assert client.address == replica.address
    finally:
        replica.close()
        primary.close()


def test_a_replica_whose_disk_fills_leaves_the_in_sync_set(tmp_path, node,
                                                           monkeypatch) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10}, segment_length=SEGMENT,
                        min_insync=2, replica_timeout=1.0) as primary, \
            ArchiveService(str(tmp_path / "r"), replica_of=primary.address) as replica:
        push = producer(node, primary)
        send(push, 0, 20)
        assert cookies(push, 20) == 20
        writer = replica.archive.writer("orders")

        def full(position: int, data: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(writer, "_write", full)
        send(push, 20, 20)
        wait_until(lambda: primary.insync.in_sync() == [])
        assert cookies(push, 20, timeout=0.5) == 0  # never confirmed with fewer
        assert any("left the in-sync set" in e for e in primary.events)
        assert writer.failed is not None
        assert "errno 28" in writer.failed
        assert len(list(primary.archive.replay("orders"))) == 40


@pytest.mark.slow
def test_a_replica_killed_mid_copy_catches_up_after_restart(tmp_path, node) -> None:
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10},
                        segment_length=1 << 20) as primary:
        push = producer(node, primary)
        send(push, 0, 20_000, size=1000)  # about 20 MB
        assert cookies(push, 20_000, timeout=60) == 20_000
        rdir = str(tmp_path / "r")
        proc = subprocess.Popen([sys.executable, "-m", "exon.cli", "archive", "serve", "--dir",
                                 rdir, "--replica-of", primary.address],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            def copied() -> int:
                return sum(os.path.getsize(os.path.join(rdir, f)) for f in os.listdir(rdir)
                           if f.endswith(".rec")) if os.path.isdir(rdir) else 0
            wait_until(lambda: copied() > 2 << 20, timeout=60)
        finally:
            proc.send_signal(signal.SIGKILL)  # mid-copy
            proc.wait(10)
            assert proc.stdout is not None
            proc.stdout.close()
        assert copied() < primary.archive.stop_position("orders")
        with ArchiveService(rdir, replica_of=primary.address) as replica:
            wait_until(lambda: same_bytes(primary, replica), timeout=60)
