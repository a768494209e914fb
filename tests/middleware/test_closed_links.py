"""What a closed link leaves behind in its node: nothing that piles up (issue #13). In the
soak, the node hosting the REP kept, for every REQ socket that had ever linked to it (8 new
tags every round), the peer's public form (about 300 B, until the cache reached 4,096
entries) and the link's ring in the REP's native receive queue (512 B to 8 KiB, until the
link table's 1,024 indexes came round again)."""

from __future__ import annotations

import gc
import time
import tracemalloc

CYCLES = 40
RING = 64 * 8  # the smallest ring of a link in a receive queue: 64 pointers


def _req_cycles(a, b, rep, cycles: int) -> None:
    """``cycles`` REQ sockets of ``a``, one after the other: link, two round trips (the
    second goes through the native receive queue), close; returns when ``b`` saw every
    link close."""
    for cycle in range(cycles):
        req = a.socket("req")
        req.link(f"{b.address}/3", timeout=5)
        for turn in range(2):
            req.send(b"ping %d %d" % (cycle, turn), timeout=5)
            got = rep.receive(timeout=5)
            assert got.peer.tag == req.tag  # the public peer: made through the cache
            rep.send(b"pong " + got.payload[5:], timeout=5)
            assert req.receive(timeout=5).payload == b"pong %d %d" % (cycle, turn)
        req.close(timeout=5)
    deadline = time.monotonic() + 5
    while b._core.established(3) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not b._core.established(3)


def test_links_that_closed_leave_no_peer_behind(make_node) -> None:
    a, b = make_node(), make_node()
    rep = b.socket("rep", tag=3)
    _req_cycles(a, b, rep, CYCLES)
    deadline = time.monotonic() + 5
    while len(b._peer_cache) > 1 and time.monotonic() < deadline:  # the last LinkClosed
        time.sleep(0.01)
    assert len(b._peer_cache) <= 1  # it was CYCLES: one per REQ socket ever linked
    # a peer still linked is still served, from the cache or made again
    req = a.socket("req")
    req.link(f"{b.address}/3", timeout=5)
    req.send(b"again", timeout=5)
    assert rep.receive(timeout=5).peer.tag == req.tag


def test_links_that_closed_give_their_receive_rings_back(make_node) -> None:
    """The rings are PyMem allocations of exon_fast.c, traced by tracemalloc at the poll
    that queued the first message (fastpath.py)."""
    a, b = make_node(), make_node()
    rep = b.socket("rep", tag=3)
    _req_cycles(a, b, rep, 3)  # the first rings, queues and caches exist
    gc.collect()
    tracemalloc.start(1)
    try:
        before = tracemalloc.take_snapshot()
        _req_cycles(a, b, rep, CYCLES)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    rings = [stat for stat in after.compare_to(before, "lineno")
             if stat.traceback[0].filename.endswith("fastpath.py")]
    grew = sum(stat.size_diff for stat in rings)
    assert grew < CYCLES * RING // 4, rings  # it was CYCLES * RING: one ring per link
