"""A socket's links go through the Linking it owns (exon.sockets.linking), wired to the
socket's own state: its tag, its wakeup, whether it is closed."""

from __future__ import annotations

import pytest

import exon
from exon.sockets.linking import Linking, peer_id


def test_the_public_methods_and_alink_share_the_sockets_linking(make_node) -> None:  # type: ignore[no-untyped-def]
    a, b = make_node(), make_node()
    pull = a.socket("pull")
    push = b.socket("push")
    linking = push._linking
    assert isinstance(linking, Linking)
    assert push._refusals is linking.refusals  # the socket's handlers fill the linking's
    push.link(f"{a.address}/{pull.tag}", timeout=5.0)
    pull.wait_for_links(1, timeout=5.0)
    assert [str(p) for p in push.peers] == [f"{a.address}/{pull.tag}"]
    assert linking.peers() == push.peers
    assert list(push.windows()) == push.peers
    push.unlink(f"{a.address}/{pull.tag}", timeout=5.0)
    assert push.peers == []
    push.close()
    assert linking.peers() == []  # it sees the socket closed
    with pytest.raises(exon.ClosedError):
        push.link(f"{a.address}/{pull.tag}", timeout=0.5)


def test_peer_id_parses_an_address() -> None:
    pid = peer_id("127.0.0.1:4000/7")
    assert (pid.address, pid.tag) == ("127.0.0.1:4000", 7)
    with pytest.raises(exon.ExonError):
        peer_id("no tag")
