"""The native link table finds a received frame's link through a hash, and round-robins a
socket's sends over that socket's own ring of links (so neither walks the whole table).
A model (a dict and per-socket lists) is driven with random activations and detaches; the
table must find exactly the model's links and send to the socket's links in turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exon.core import frames as F
from exon.native import ffi, lib
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import Publication

CAPACITY = 16
SOCKETS = 3
KEYS = st.tuples(st.integers(0, 2), st.integers(1, 4), st.integers(1, 4))  # peer, ours, theirs
OPS = st.lists(st.one_of(
    st.tuples(st.just("activate"), st.integers(0, SOCKETS - 1), KEYS),
    st.tuples(st.just("detach"), st.integers(0, CAPACITY - 1)),
    st.tuples(st.just("send"), st.integers(0, SOCKETS - 1)),
    st.tuples(st.just("lookup"), KEYS),
), max_size=80)


def classify(table: Any, key: int, ours: int, theirs: int) -> int:
    frame = F.encode_data(theirs, ours, 0, b"p")
    buf = ffi.new("uint8_t[]", frame)
    keys = ffi.new("int32_t[1]", [key])
    desc = ffi.new("exon_lt_desc_t[1]")
    desc[0].length = len(frame)
    lib.exon_lt_classify(table, ffi.NULL, keys, buf, desc, 1)
    return int(desc[0].link)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_index_and_rings_follow_the_model(tmp_path_factory: Any,
                                          ops: list[tuple[Any, ...]]) -> None:
    directory: Path = tmp_path_factory.mktemp("index")
    log = LogBuffer.create(directory / "x.logbuffer", term_length=64 * 1024)
    pub = Publication.standalone(log, limit=1 << 40)
    table = ffi.new("exon_link_table_t *")
    assert lib.exon_lt_init(table, CAPACITY, SOCKETS) == 0
    live: dict[tuple[int, int, int], int] = {}  # keys -> link
    rings: list[list[int]] = [[] for _ in range(SOCKETS)]
    try:
        for op in ops:
            if op[0] == "activate":
                slot, (key, ours, theirs) = op[1], op[2]
                index = lib.exon_lt_reserve(table)
                if index < 0:
                    assert len(live) == CAPACITY
                    continue
                rec = table.links[index]
                rec.socket_slot, rec.peer_key = slot, key
                rec.source_tag, rec.destination_tag = ours, theirs
                rec.limit = rec.advertised = 1 << 40
                rec.max_out = rec.max_in = 64
                rc = lib.exon_lt_activate(table, index, pub._pub)
                if (key, ours, theirs) in live:
                    assert rc == lib.EXON_E_STATE  # a duplicate stays off the table
                    lib.exon_lt_detach(table, index)
                    continue
                assert rc == 0
                live[(key, ours, theirs)] = index
                rings[slot].append(index)
            elif op[0] == "detach":
                index = op[1]
                owner = next((k for k, v in live.items() if v == index), None)
                lib.exon_lt_detach(table, index)
                if owner is not None:
                    del live[owner]
                    for ring in rings:
                        if index in ring:
                            ring.remove(index)
            elif op[0] == "send":
                slot = op[1]
                rc = lib.exon_lt_send(table, slot, -1, b"m", 1)
                ring = rings[slot]
                if not ring:
                    assert rc == lib.EXON_LT_NO_CREDIT
                    continue
                assert rc in ring
                assert table.links[rc].socket_slot == slot
            else:
                key, ours, theirs = op[1]
                assert classify(table, key, ours, theirs) == live.get((key, ours, theirs), -1)
        for (key, ours, theirs), index in live.items():
            assert classify(table, key, ours, theirs) == index
        for slot, ring in enumerate(rings):  # any full turn visits each link exactly once
            for _ in range(len(ring) // 2 + 1):
                lib.exon_lt_send(table, slot, -1, b"m", 1)
            seen = [int(lib.exon_lt_send(table, slot, -1, b"m", 1)) for _ in ring]
            assert sorted(seen) == sorted(ring)
    finally:
        lib.exon_lt_close(table)
        pub.close()
        log.close()
