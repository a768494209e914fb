"""A node forgets the public form of a peer whose link closed (issue #13: in the soak, the
node hosting the REP kept one entry for each REQ socket that ever linked to it, 8 new tags
every round, until its cache reached 4,096 entries, about 1.2 MB)."""

from __future__ import annotations

import time

CYCLES = 40


def test_links_that_closed_leave_no_peer_behind(make_node) -> None:
    a, b = make_node(), make_node()
    rep = b.socket("rep", tag=3)
    for cycle in range(CYCLES):
        req = a.socket("req")
        req.link(f"{b.address}/3", timeout=5)
        req.send(b"ping %d" % cycle, timeout=5)
        got = rep.receive(timeout=5)
        assert got.peer.tag == req.tag  # the public peer: made through the cache
        rep.send(b"pong %d" % cycle, timeout=5)
        assert req.receive(timeout=5).payload == b"pong %d" % cycle
        req.close(timeout=5)
    deadline = time.monotonic() + 5
    while len(b._peer_cache) > 1 and time.monotonic() < deadline:  # the last LinkClosed
        time.sleep(0.01)
    assert len(b._peer_cache) <= 1  # it was CYCLES: one per REQ socket ever linked
    # a peer still linked is still served, from the cache or made again
    req = a.socket("req")
    req.link(f"{b.address}/3", timeout=5)
    req.send(b"again", timeout=5)
    assert rep.receive(timeout=5).peer.tag == req.tag
