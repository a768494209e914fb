"""Nodes with their own embedded drivers talk over UDP on loopback."""

from __future__ import annotations

import signal
import threading
import time

import pytest

import exon
from tests.sockets.helpers import kill, python_process, read_line, udp_nodes_with

pytestmark = pytest.mark.net

SMALL = {
    "ipc_term_buffer_length": 1024 * 1024,
    "term_buffer_length": 1024 * 1024,
    "image_liveness_timeout_ns": 1_000_000_000,
}


@pytest.fixture
def udp_nodes():
    yield from udp_nodes_with(SMALL)


def test_req_rep_over_udp(udp_nodes) -> None:
    a, b = udp_nodes(), udp_nodes()
    rep = a.socket("rep", tag=1)
    req = b.socket("req")
    req.link(f"{a.address}/1", timeout=10)
    for n in range(20):
        req.send(b"q%d" % n, cookie=n, timeout=5)
        m = rep.receive(timeout=5)
        rep.send(m.payload.upper())
        assert req.receive(timeout=5) == exon.Cookie(n)
        assert req.receive(timeout=5).payload == b"Q%d" % n


def test_push_pull_over_udp_threads_exactly_once(udp_nodes) -> None:
    a, b = udp_nodes(), udp_nodes()
    pull = b.socket("pull", tag=1)
    push = a.socket("push")
    push.link(f"{b.address}/1", timeout=10)
    got: list[bytes] = []

    def consume() -> None:
        for _ in range(4 * 300):
            got.append(pull.receive(timeout=10).payload)

    t = threading.Thread(target=consume)
    t.start()
    senders = [threading.Thread(target=lambda i=i: [push.send(b"%d:%d" % (i, n), timeout=10)
                                                    for n in range(300)]) for i in range(4)]
    for s in senders:
        s.start()
    for s in senders:
        s.join(30)
    push.close(timeout=10)
    t.join(30)
    assert sorted(got) == sorted(b"%d:%d" % (i, n) for i in range(4) for n in range(300))


def test_incompatible_refused_over_udp(udp_nodes) -> None:
    a, b = udp_nodes(), udp_nodes()
    a.socket("pull", tag=1)
    with pytest.raises(exon.LinkRefused):
        b.socket("rep").link(f"{a.address}/1", timeout=10)


REP_THAT_NEVER_ANSWERS = """
import json, sys, time
import exon
node = exon.Node("127.0.0.1:0", driver_options=json.loads(sys.argv[1]))
rep = node.socket("rep", tag=5)
print(node.address, flush=True)
time.sleep(60)
"""


def test_peer_node_killed_over_udp_breaks_the_link(udp_nodes) -> None:
    import json

    proc = python_process(REP_THAT_NEVER_ANSWERS, json.dumps(SMALL))
    try:
        address = read_line(proc)
        req = udp_nodes().socket("req")
        req.link(f"{address}/5", timeout=10)
        req.send(b"hello?", timeout=5)
        kill(proc, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(exon.BrokenLink):
            req.receive(timeout=15)
        assert time.monotonic() - started < 15
    finally:
        kill(proc)
        import glob
        import shutil

        for leftover in glob.glob(f"/dev/shm/exon-node-{proc.pid}-*"):  # its driver's dir
            shutil.rmtree(leftover, ignore_errors=True)



# The REQ's publication to the killed node reports NOT_CONNECTED once no status message
# came for publication_connection_timeout (0.3 s here), while the node still holds the
# killed node's image (liveness 4 s here): a send then breaks the link inside its own
# call. The REQ used to record its request after that LinkClosed, and receive waited its
# whole timeout instead of raising BrokenLink.
QUICK_UNCONNECTED = dict(SMALL, image_liveness_timeout_ns=4_000_000_000,
                         publication_connection_timeout_ns=300_000_000)


@pytest.fixture
def unconnected_nodes():
    yield from udp_nodes_with(QUICK_UNCONNECTED)


def test_req_whose_link_breaks_inside_the_send_gets_brokenlink(unconnected_nodes) -> None:
    import glob
    import json
    import shutil

    proc = python_process(REP_THAT_NEVER_ANSWERS, json.dumps(SMALL))
    try:
        address = read_line(proc)
        req = unconnected_nodes().socket("req")
        req.link(f"{address}/5", timeout=10)
        kill(proc, signal.SIGKILL)
        time.sleep(1.0)  # > publication_connection_timeout, < image liveness
        assert req.peers, "the link broke before the send: the test needs it standing"
        req.send(b"hello?", timeout=5)
        started = time.monotonic()
        with pytest.raises(exon.BrokenLink, match="pending request"):
            req.receive(timeout=8)
        assert time.monotonic() - started < 3  # not the timeout, nor the image liveness
        with pytest.raises(exon.Timeout):  # the REQ is usable again: send, not receive
            req.send(b"again", timeout=0.2)
    finally:
        kill(proc)
        for leftover in glob.glob(f"/dev/shm/exon-node-{proc.pid}-*"):  # its driver's dir
            shutil.rmtree(leftover, ignore_errors=True)
