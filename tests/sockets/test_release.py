"""A closed socket is freed: nothing the node or the native fast path keeps refers to it.

Found by the chaos soak (tests/chaos/soak.py): every REQ socket opened and closed stayed
alive with its native receive queue, about 40 KiB of heap each, because the queue (a C
object the cycle collector cannot see into: no tp_traverse) held the socket's bound
``_on_due`` while the socket held the queue. close() now drops the queue.
"""

from __future__ import annotations

import gc
import weakref

import pytest

import exon
import exon.sockets  # registers every socket type

KINDS = sorted(exon.Socket._types)


@pytest.mark.parametrize("kind", KINDS)
def test_a_closed_socket_is_freed(make_node, kind: str) -> None:
    node = make_node()
    sock = node.socket(kind)
    ref = weakref.ref(sock)
    sock.close(timeout=2)
    del sock
    gc.collect()
    assert ref() is None


def test_a_closed_linked_socket_is_freed_after_traffic(make_node) -> None:
    server, client = make_node(), make_node()
    rep = server.socket("rep")
    refs = []
    for round_ in range(3):
        req = client.socket("req")
        req.link(f"{server.address}/{rep.tag}", timeout=5)
        for n in range(5):
            req.send(b"%d %d" % (round_, n), timeout=5)
            request = rep.receive(timeout=5)
            rep.send(request.payload, timeout=5)
            assert req.receive(timeout=5).payload == b"%d %d" % (round_, n)
        refs.append(weakref.ref(req))
        req.close(timeout=5)
        del req
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert isinstance(rep, exon.Socket)  # the REP is still open and alive
