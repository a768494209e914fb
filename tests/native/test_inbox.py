"""A socket's inbox (``exon_fast_inbox.c``: ``RecvQueue``) against a pure-Python reference
model of its fair queue, with both kinds of item mixed: messages the fast path queued for
an attached link (counted on the link table when popped) and the core's messages (counted
through ``on_core``). Hypothesis drives both with the same operations; after each, they
must agree on what comes out, in which order, and on what was counted where -- every
message exactly once, on the link while its link is attached, through the core after.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exon.native import fast_recv_queue, ffi, lib
from exon.sockets.messages import Message
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import Publication

TERM = 64 * 1024
PEERS = 20  # beyond the 16 lanes a queue starts with: it grows
LINKS = 24


class FairQueueModel:
    """The reference: a FIFO per lane, and a line of the lanes that have something, in the
    order they got their first item; a pop takes the head lane's oldest item and puts the
    lane back at the tail if it has more."""

    def __init__(self) -> None:
        self.lanes: dict[Any, deque[Any]] = {}
        self.ready: deque[Any] = deque()

    def push(self, lane: Any, item: Any) -> None:
        q = self.lanes.setdefault(lane, deque())
        if not q:
            self.ready.append(lane)
        q.append(item)

    def pop(self) -> tuple[Any, Any]:
        lane = self.ready.popleft()
        q = self.lanes[lane]
        item = q.popleft()
        if q:
            self.ready.append(lane)
        return lane, item

    def __len__(self) -> int:
        return sum(len(q) for q in self.lanes.values())


@dataclass
class Item:
    """One message as the model sees it: its payload, its link incarnation, and how its
    delivery is counted while it is queued (``link`` >= 0: on that link; -1: through the
    core)."""

    payload: bytes
    link: int
    incarnation: int


@dataclass
class Peer:
    key: str
    link: int  # its link index in the table
    incarnation: int = 1
    attached: bool = False
    lane: int | None = None  # the queue's lane, once opened
    items: deque[Item] = field(default_factory=deque)


class Harness:
    """A link table with LINKS live links (so that deliveries count), one RecvQueue over it,
    and the model beside it."""

    def __init__(self, directory: Path) -> None:
        self.log = LogBuffer.create(directory / "inbox.logbuffer", term_length=TERM)
        self.pub = Publication.standalone(self.log)
        self.table = ffi.new("exon_link_table_t *")
        assert lib.exon_lt_init(self.table, LINKS, 1) == 0
        for k in range(LINKS):
            index = lib.exon_lt_reserve(self.table)
            assert index == k
            rec = self.table.links[index]
            rec.limit = 1 << 30
            rec.batch = 1 << 30  # no FLOW falls due: deliveries only count
            rec.source_tag = 7
            rec.destination_tag = 100 + k
            rec.incarnation = 1
            rec.peer_incarnation = 2
            rec.socket_slot = 0
            rec.peer_key = 0
            rec.max_out = rec.max_in = 256
            assert lib.exon_lt_activate(self.table, index, self.pub._pub) == 0
        self.due: list[int] = []
        #: held batches not confirmed yet: (the queue's bookkeeping, the items)
        self.held: deque[tuple[list[Any], list[tuple[Peer, Item]]]] = deque()
        self.core: Counter[tuple[str, int]] = Counter()
        self.queue = fast_recv_queue(self.table, self.due.append, self._on_core, Message,
                                     LINKS)
        assert self.queue is not None
        self.model = FairQueueModel()
        self.peers = [Peer(key=f"peer-{i}", link=i) for i in range(PEERS)]
        self.serial = 0
        #: what the model says must have been counted so far
        self.want_links: Counter[int] = Counter()
        self.want_core: Counter[tuple[str, int]] = Counter()

    def _on_core(self, key: str, incarnation: int, count: int) -> None:
        assert count >= 1
        self.core[(key, incarnation)] += count

    def close(self) -> None:
        self.queue = None
        for k in range(LINKS):
            lib.exon_lt_detach(self.table, k)
        lib.exon_lt_close(self.table)
        self.pub.close()
        self.log.close()

    def delivered(self) -> Counter[int]:
        return Counter({k: int(self.table.links[k].delivered) for k in range(LINKS)
                        if self.table.links[k].delivered})

    def lane(self, peer: Peer) -> int:
        if peer.lane is None:
            peer.lane = self.queue.open_lane(f"public-{peer.key}", peer.key)
        return peer.lane

    # ---- operations ------------------------------------------------------------------

    def push(self, who: int, fast: bool) -> None:
        peer = self.peers[who]
        lane = self.lane(peer)
        self.serial += 1
        payload = b"%s:%d" % (peer.key.encode(), self.serial)
        if fast and peer.attached:  # as poll_batch queues a DATA it counted as received
            self.table.links[peer.link].received += 1
            self.queue.push(lane, payload, -1)
            item = Item(payload, peer.link, peer.incarnation)
        else:
            self.queue.push(lane, payload, peer.incarnation)
            item = Item(payload, -1, peer.incarnation)
        peer.items.append(item)
        self.model.push(who, item)

    def attach(self, who: int) -> None:
        peer = self.peers[who]
        if not peer.attached:
            self.queue.attach(peer.link, self.lane(peer))
            self.table.links[peer.link].incarnation = peer.incarnation  # as FastLinks does
            peer.attached = True

    def detach(self, who: int) -> None:
        peer = self.peers[who]
        if peer.attached:
            self.queue.detach(peer.link, peer.incarnation)
            self.table.links[peer.link].incarnation = 0  # that link is gone
            for item in peer.items:  # what it queued is the core's to count from now on
                item.link = -1
            peer.attached = False
            peer.incarnation += 1

    def close_idle_lanes(self) -> None:
        for peer in self.peers:
            if peer.lane is None:
                continue
            idle = not peer.items and not peer.attached
            assert self.queue.idle(peer.lane) is idle
            if idle:
                self.queue.close_lane(peer.lane)
                peer.lane = None

    def _expect(self, n: int) -> list[tuple[Peer, Item]]:
        out = []
        for _ in range(min(n, len(self.model))):
            who, item = self.model.pop()
            peer = self.peers[who]
            assert peer.items.popleft() is item
            out.append((peer, item))
        return out

    def _counted(self, expected: list[tuple[Peer, Item]]) -> None:
        for peer, item in expected:
            if item.link >= 0:
                self.want_links[item.link] += 1
            else:
                self.want_core[(peer.key, item.incarnation)] += 1

    def pop_one(self) -> None:
        expected = self._expect(1)
        msg = self.queue()
        if not expected:
            assert msg is None
            return
        peer, item = expected[0]
        assert type(msg) is Message
        assert tuple(msg) == (item.payload, f"public-{peer.key}")
        self._counted(expected)

    def take(self, n: int) -> None:
        expected = self._expect(n)
        got = self.queue.take(n)
        assert [tuple(m) for m in got] == [(i.payload, f"public-{p.key}") for p, i in expected]
        self._counted(expected)

    def hold(self, n: int) -> None:
        expected = self._expect(n)
        buffer, offsets, runs, entries = self.queue.hold_buffer(n)
        ends = memoryview(offsets).cast("Q").tolist()
        assert len(ends) == len(expected) + 1
        assert ends[0] == 0
        assert ends[-1] == len(buffer)
        payloads = [buffer[a:b] for a, b in pairwise(ends)]
        assert payloads == [i.payload for _p, i in expected]
        assert [peer for peer, count in runs for _ in range(count)] == [
            f"public-{p.key}" for p, _i in expected]
        assert all(a != b for (a, _), (b, _) in pairwise(runs))
        held: Counter[tuple[str, int, int]] = Counter()
        for key, link, incarnation, count in entries:
            assert count >= 1
            held[(key, link, incarnation)] += count
        want: Counter[tuple[str, int, int]] = Counter()
        for peer, item in expected:
            want[(peer.key, item.link, item.incarnation)] += 1
        assert held == want
        self.held.append((entries, expected))  # nothing counted until confirm()

    def confirm(self) -> None:
        """Count the oldest held batch, as PullSocket.confirm does: each message on its
        link if that link is still attached as the same incarnation, else by the core."""
        if not self.held:
            return
        entries, expected = self.held.popleft()
        self.queue.count(entries)
        for peer, item in expected:
            if item.link >= 0 and peer.attached and peer.incarnation == item.incarnation:
                self.want_links[item.link] += 1
            else:
                self.want_core[(peer.key, item.incarnation)] += 1

    def check(self) -> None:
        assert len(self.queue) == len(self.model)
        assert self.queue.queued_bytes() == sum(
            len(i.payload) for p in self.peers for i in p.items)
        assert self.delivered() == self.want_links
        assert self.core == self.want_core
        assert set(self.due) <= set(self.want_links)  # on_due: only for links counted on


# (kind, peer, fast, n): pushes most often, to mostly a few peers (so that pushes,
# attaches and detaches meet), sometimes to any of them
KINDS = ["push"] * 10 + ["attach"] * 3 + ["detach", "pop", "take", "hold", "confirm",
                                           "sweep", "raw"]
WHO = st.sampled_from([0, 1, 2, 3] * 4 + list(range(PEERS)))
OPS = st.tuples(st.sampled_from(KINDS), WHO,
                st.booleans(), st.integers(1, 12))


@pytest.fixture
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inbox")


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=40, max_size=200))
def test_the_inbox_pops_as_the_reference_model_and_counts_each_message_once(
        workdir: Path, ops: list[tuple[str, int, bool, int]]) -> None:
    directory = workdir / f"run-{len(list(workdir.iterdir()))}"
    directory.mkdir()
    h = Harness(directory)
    try:
        for kind, who, fast, n in ops:
            if kind == "push":
                h.push(who, fast)
            elif kind == "attach":
                h.attach(who)
            elif kind == "detach":
                h.detach(who)
            elif kind == "pop":
                h.pop_one()
            elif kind == "take":
                h.take(n)
            elif kind == "hold":
                h.hold(n)
            elif kind == "confirm":
                h.confirm()
            elif kind == "raw":  # from now on the fast path's payloads queue raw (as for a
                h.queue.raw = 1  # PULL that took a held batch): nothing else may change
            else:
                h.close_idle_lanes()
            h.check()
        h.take(1 << 20)  # whatever is left comes out, each counted once
        while h.held:
            h.confirm()
        h.check()
        assert len(h.queue) == 0
    finally:
        h.close()


@pytest.mark.parametrize("raw", [False, True])
def test_round_robin_over_peers_whichever_way_their_messages_came(workdir: Path,
                                                                  raw: bool) -> None:
    """Three peers, one on the fast path, one on the core's, one mixing both: the queue
    takes one of each in turn, and each peer's messages in the order they came."""
    (workdir / f"raw-{raw}").mkdir()
    h = Harness(workdir / f"raw-{raw}")
    h.queue.raw = int(raw)
    try:
        h.attach(0)
        h.attach(2)
        for _ in range(4):
            h.push(0, True)
            h.push(1, False)
        for fast in (True, False, True, False):
            h.push(2, fast)
        assert h.queue.raw_count == (6 if raw else 0)  # the fast ones, without an object
        got = [(m.peer, m.payload) for m in h.queue.take(100)]
        assert h.queue.raw_count == 0
        assert [peer for peer, _ in got] == ["public-peer-0", "public-peer-1",
                                             "public-peer-2"] * 4
        for who in ("peer-0", "peer-1", "peer-2"):
            serials = [int(p.split(b":")[1]) for peer, p in got if peer == f"public-{who}"]
            assert serials == sorted(serials)
        assert h.delivered() == Counter({0: 4, 2: 2})
        assert h.core == Counter({("peer-1", 1): 4, ("peer-2", 1): 2})
    finally:
        h.close()


def test_a_detached_links_messages_stay_in_place_and_the_core_counts_them(
        workdir: Path) -> None:
    h = Harness(workdir)
    try:
        h.attach(0)
        h.push(0, True)
        h.push(0, False)
        h.push(1, False)
        h.push(0, True)
        h.detach(0)  # incarnation 1 ends: its two fast messages are the core's now
        h.attach(0)  # the peer's next link, incarnation 2, in the same lane
        h.push(0, True)
        payloads = [bytes(m[0]) for m in h.queue.take(100)]
        assert payloads == [b"peer-0:1", b"peer-1:3", b"peer-0:2", b"peer-0:4", b"peer-0:5"]
        assert h.core == Counter({("peer-0", 1): 3, ("peer-1", 1): 1})
        assert h.delivered() == Counter({0: 1})
    finally:
        h.close()


def test_a_held_batch_counts_on_its_link_only_while_that_link_lives(workdir: Path) -> None:
    h = Harness(workdir)
    try:
        h.attach(0)
        h.attach(1)
        for _ in range(2):
            h.push(0, True)
            h.push(1, True)
        h.hold(100)
        h.detach(0)  # peer 0's link ends (incarnation 1), and a new one takes the index
        h.attach(0)
        h.confirm()
        assert h.delivered() == Counter({1: 2})  # peer 1's link lives: counted there
        assert h.core == Counter({("peer-0", 1): 2})  # peer 0's: the core's (it ignores them)
        h.check()
    finally:
        h.close()


def test_bad_calls_raise_and_change_nothing(workdir: Path) -> None:
    h = Harness(workdir)
    try:
        q = h.queue
        lane = q.open_lane("p", "p")
        with pytest.raises(ValueError, match="incarnation"):
            q.push(lane, b"x", -1)  # a fast item on a lane with no link
        with pytest.raises(IndexError):
            q.push(lane + 1, b"x", 1)  # no such lane
        with pytest.raises(TypeError):
            q.push(lane, "text", 1)
        with pytest.raises(IndexError):
            q.attach(LINKS, lane)
        q.attach(3, lane)
        with pytest.raises(RuntimeError):
            q.attach(4, lane)  # one link per lane
        q.push(lane, b"x", 1)
        with pytest.raises(RuntimeError):
            q.close_lane(lane)  # not idle
        with pytest.raises(ValueError, match="max_messages"):
            q.take(0)
        with pytest.raises(ValueError, match="incarnation"):
            q.count([("p", 3, -1, 1)])
        with pytest.raises(TypeError):
            q.count(5)
        assert h.delivered() == Counter()
        assert len(q) == 1
        assert q.queued_bytes() == 1
    finally:
        h.close()
