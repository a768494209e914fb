"""The credit rules are written twice: ``exon.core.credits.CreditLedger`` (the core) and the
native link table (``exon_link_table.c``, the DATA fast path). This test drives both with the
same random operations and checks, after every one, that they agree on every shared counter,
on each verdict (fast or for the core), and on the FLOW frames the native side sends itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exon.core import frames as F
from exon.core.credits import _SHARED, CreditLedger
from exon.native import ffi, lib
from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import Publication

TERM = 64 * 1024
OUR_TAG, PEER_TAG = 7, 9
OUR_INC, PEER_INC = 1001, 2002
PEER_KEY = 0
MAX_SIZE = 256


class NativeLink:
    """One attached link in a native link table, its publication, and an image that reads
    what the link sends (so the FLOWs the table offers itself can be checked)."""

    def __init__(self, directory: Path, *, limit: int, capacity: int, batch: int) -> None:
        self.log = LogBuffer.create(directory / "parity.logbuffer", term_length=TERM)
        self.pub = Publication.standalone(self.log)
        self.image = Image.standalone(self.log)
        self.table = ffi.new("exon_link_table_t *")
        assert lib.exon_lt_init(self.table, 4, 2) == 0
        index = lib.exon_lt_reserve(self.table)
        assert index == 0
        rec = self.table.links[index]
        rec.limit = limit
        rec.capacity = capacity
        rec.advertised = capacity
        rec.batch = batch
        rec.source_tag = OUR_TAG
        rec.destination_tag = PEER_TAG
        rec.incarnation = OUR_INC
        rec.peer_incarnation = PEER_INC
        rec.peer_key = PEER_KEY
        rec.socket_slot = 0
        rec.max_out = MAX_SIZE
        rec.max_in = MAX_SIZE
        assert lib.exon_lt_activate(self.table, index, self.pub._pub) == 0
        self.record = rec
        self.keys = ffi.new("int32_t[1]", [PEER_KEY])
        self.timer_armed = False  # the model: a native FLOW timer is queued
        self.timers = False  # the table keeps FLOW timers (exon_lt_set_flow_delay)
        self.advertised_max = capacity  # the highest limit advertised so far

    def close(self) -> None:
        lib.exon_lt_detach(self.table, 0)
        lib.exon_lt_close(self.table)
        self.image.close()
        self.pub.close()
        self.log.close()

    def classify(self, frame: bytes) -> int:
        buf = ffi.new("uint8_t[]", frame)
        desc = ffi.new("exon_lt_desc_t[1]")
        desc[0].image = 0
        desc[0].offset = 0
        desc[0].length = len(frame)
        lib.exon_lt_classify(self.table, ffi.NULL, self.keys, buf, desc, 1)
        return int(desc[0].link)

    def sent_frames(self) -> list[F.Frame]:
        """Frames the link offered since the last call (the window then moves on)."""
        out = [F.decode_frame(m) for m in self.image.poll_messages(10_000)]
        self.pub.position_limit = self.image.position + TERM // 2
        return out


def counters(record: Any) -> dict[str, int]:
    return {name: int(getattr(record, name)) for name in _SHARED}


OPS = st.one_of(
    st.tuples(st.just("send"), st.integers(0, MAX_SIZE + 8)),
    st.tuples(st.just("flow"), st.integers(0, 300), st.integers(0, 300)),
    st.tuples(st.just("data"), st.integers(0, MAX_SIZE + 8)),
    st.tuples(st.just("stale_data"), st.integers(0, 8)),
    st.tuples(st.just("deliver"), st.integers(0, 40)),
    st.tuples(st.just("hold"), st.booleans()),
    st.tuples(st.just("timer"), st.booleans()),
    st.tuples(st.just("expire"), st.just(0)),
    # the core resizes the receive window (the node's memory budget): it may shrink below
    # what was advertised, and a FLOW then never moves the limit back
    st.tuples(st.just("window"), st.integers(1, 64), st.integers(1, 16)),
)


@pytest.fixture
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity")


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(0, 40), capacity=st.integers(1, 64), batch=st.integers(1, 16),
       native_timers=st.booleans(), ops=st.lists(OPS, max_size=120))
def test_ledger_and_link_table_agree(workdir: Path, limit: int, capacity: int, batch: int,
                                     native_timers: bool, ops: list[tuple[Any, ...]]) -> None:
    """``native_timers``: the table keeps the FLOW timers (a Node's default), else the core
    arms them (the table answers DELIVER_FIRST)."""
    directory = workdir / f"run-{len(list(workdir.iterdir()))}"
    directory.mkdir()
    native = NativeLink(directory, limit=limit, capacity=capacity, batch=batch)
    if native_timers:
        lib.exon_lt_set_flow_delay(native.table, 5_000_000)
    native.timers = native_timers
    ledger = CreditLedger(limit=limit, capacity=capacity, batch=batch)
    try:
        for op in ops:
            step(native, ledger, op)
            assert counters(native.record) == {n: getattr(ledger, n) for n in _SHARED}, op
    finally:
        native.close()


def step(native: NativeLink, ledger: CreditLedger, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "send":
        size = op[1]
        rc = lib.exon_lt_send(native.table, 0, -1, b"x" * size, size)
        if ledger.credit <= 0:
            assert rc == lib.EXON_LT_NO_CREDIT
        elif size > MAX_SIZE:
            assert rc == lib.EXON_LT_TOO_LARGE
        else:
            assert rc == 0
            ledger.spend()
            [frame] = native.sent_frames()
            assert (frame.type, frame.source_tag, frame.destination_tag, frame.incarnation) == (
                F.FrameType.DATA, OUR_TAG, PEER_TAG, OUR_INC)
            assert len(frame.payload) == size
        return
    if kind == "flow":
        delivered, limit = op[1], op[2]
        verdict = native.classify(F.encode_flow(PEER_TAG, OUR_TAG, PEER_INC, delivered, limit))
        if ledger.hold_flow or delivered > limit:
            assert verdict == -1  # the core decides; nothing moved natively
            return
        _newly, before = ledger.apply_flow(delivered, limit)
        gave_credit = before <= 0 and ledger.credit > 0
        assert verdict == (lib.EXON_LT_FLOW_CREDIT - 0 if gave_credit else lib.EXON_LT_FLOW_DONE)
        return
    if kind == "data":
        size = op[1]
        verdict = native.classify(F.encode_data(PEER_TAG, OUR_TAG, PEER_INC, b"y" * size))
        if size > MAX_SIZE:
            assert verdict == -1  # oversize: the core refuses it
            return
        accepted = ledger.accept_data()
        assert verdict == (0 if accepted else -1)
        return
    if kind == "stale_data":
        verdict = native.classify(F.encode_data(PEER_TAG, OUR_TAG, PEER_INC + 1, b"z" * op[1]))
        assert verdict == -1  # an old incarnation never counts
        return
    if kind == "deliver":
        count = op[1]
        rc = lib.exon_lt_deliver_many(native.table, 0, count)
        if count > ledger.received - ledger.delivered:
            assert rc == lib.EXON_E_STATE
            with pytest.raises(ValueError):
                ledger.deliver(count)
            return
        ledger.deliver(count)
        if count == 0:
            assert rc == lib.EXON_LT_DELIVER_NONE
        elif ledger.flow_due:
            assert rc == lib.EXON_LT_DELIVER_NONE  # the table offered the FLOW itself
            delivered, limit = ledger.make_flow()
            [frame] = native.sent_frames()
            assert frame.type == F.FrameType.FLOW
            assert (frame.source_tag, frame.destination_tag, frame.incarnation) == (
                OUR_TAG, PEER_TAG, OUR_INC)
            assert F.decode_frame(F.encode_flow(OUR_TAG, PEER_TAG, OUR_INC, delivered, limit)) \
                == frame
            assert limit >= native.advertised_max  # a limit never moves back
            native.advertised_max = limit
        else:
            timers = native.timers
            if ledger.flow_timer:
                assert rc == lib.EXON_LT_DELIVER_NONE  # the core's timer is armed
            elif timers:
                assert rc == lib.EXON_LT_DELIVER_NONE  # the table armed its own
                native.timer_armed = True
            else:
                assert rc == lib.EXON_LT_DELIVER_FIRST
            assert native.sent_frames() == []
        return
    if kind == "expire":  # every native FLOW timer expires: a FLOW iff one is pending
        sent = lib.exon_lt_flush_flows(native.table, 1 << 62)
        armed, native.timer_armed = native.timer_armed, False
        if armed and ledger.flow_pending:
            assert sent == 1
            delivered, limit = ledger.make_flow()
            [frame] = native.sent_frames()
            assert (frame.type, frame.delivered, frame.limit) == (F.FrameType.FLOW, delivered,
                                                                  limit)
            assert limit >= native.advertised_max
            native.advertised_max = limit
        else:
            assert sent == 0
            assert native.sent_frames() == []
        assert lib.exon_lt_next_flow_ns(native.table) == -1
        return
    if kind == "hold":
        value = int(op[1])
        ledger.hold_flow = value
        native.record.hold_flow = value
        return
    if kind == "window":
        capacity, batch = op[1], op[2]
        ledger.capacity, ledger.batch = capacity, batch
        native.record.capacity, native.record.batch = capacity, batch
        return
    if kind == "timer":
        value = int(op[1])
        ledger.flow_timer = value
        native.record.flow_timer = value
        return
    raise AssertionError(kind)


def test_parity_harness_detects_a_drifted_rule(workdir: Path) -> None:
    """The harness is not vacuous: a native record whose limit moved on its own (a drifted
    rule) fails the comparison."""
    native = NativeLink(workdir, limit=1, capacity=4, batch=2)
    ledger = CreditLedger(limit=1, capacity=4, batch=2)
    try:
        step(native, ledger, ("send", 3))
        assert counters(native.record) == {n: getattr(ledger, n) for n in _SHARED}
        native.record.limit += 1
        with pytest.raises(AssertionError):
            step(native, ledger, ("send", 3))
    finally:
        native.close()


def test_a_shrunk_window_never_moves_the_limit_back(workdir: Path) -> None:
    """The memory budget shrinks a window below what was advertised: both sides then send
    FLOWs that report deliveries but keep the old limit, until deliveries pass it."""
    native = NativeLink(workdir, limit=0, capacity=10, batch=2)
    ledger = CreditLedger(limit=0, capacity=10, batch=2)
    try:
        for op in [("data", 4), ("data", 4), ("window", 1, 2), ("deliver", 2)]:
            step(native, ledger, op)  # the FLOW (2, 10): the limit stays at 10
            assert counters(native.record) == {n: getattr(ledger, n) for n in _SHARED}
        assert ledger.advertised == native.record.advertised == 10
        for _ in range(8):
            step(native, ledger, ("data", 4))
        step(native, ledger, ("deliver", 8))  # delivered 10: the FLOW (10, 11)
        assert counters(native.record) == {n: getattr(ledger, n) for n in _SHARED}
        assert ledger.advertised == native.record.advertised == 11
    finally:
        native.close()
