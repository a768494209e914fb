"""A forged LINK does not break an established link (issue #13), over real nodes.

The attack: a LINK carrying an established PUSH's tag, a new incarnation and the PUSH's
reply address, sent on the attacker's own stream (its own Aeron publication, whose HELLO
claims the PUSH's address too). It used to make the PULL drop the link while the PUSH went
on sending into the void (1,024 sends "ok" and discarded). Now the link goes on; and a
peer node that really restarted still links again.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

import exon
from exon.core.frames import LinkMetadata, encode_link
from exon.core.policy import SharedSecretPolicy
from exon.middleware.node_transport import encode_hello
from exon.transport.aeron import Aeron
from tests.sockets.helpers import kill, python_process, read_line


def _forge(driver_dir: str, target: exon.Node, claimed: str, src_tag: int, dst_tag: int,
           incarnations: range) -> int:
    """LINKs from the attacker's own publication; how many went out."""
    sent = 0
    with Aeron.connect(driver_dir) as aeron:
        pub = aeron.add_exclusive_publication("aeron:ipc", target._transport.stream_id)
        deadline = time.monotonic() + 5
        while pub.offer(encode_hello(claimed)) < 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        for inc in incarnations:
            for node_id in ("copied-or-made-up", "another"):
                meta = LinkMetadata(socket_type="push", credits=1024,
                                    max_message_size=1 << 20, node_id=node_id,
                                    reply_address=claimed, nonce=b"x" * 16)
                while (pub.offer(encode_link(src_tag, dst_tag, inc, meta)) < 0
                       and time.monotonic() < deadline):
                    time.sleep(0.001)
                sent += 1
        time.sleep(0.2)  # let the target read them before the image goes
        pub.close()
    return sent


def _policies(kind: str | None) -> tuple[object, object]:
    if kind == "secret":
        return SharedSecretPolicy(b"s3cret"), SharedSecretPolicy(b"s3cret")
    if kind == "encrypted":
        server, client = exon.Keypair.generate(), exon.Keypair.generate()
        return (exon.EncryptedPolicy(server, trusted=[client.public]),
                exon.EncryptedPolicy(client, peer_key=server.public))
    return None, None


@pytest.mark.parametrize("kind", [None, "secret", "encrypted"])
def test_a_forged_link_does_not_break_the_stream(make_node, driver, kind) -> None:
    """With SharedSecretPolicy too: the link used to break before the secret was checked;
    and with EncryptedPolicy (issue 28)."""
    pull_policy, push_policy = _policies(kind)
    a, b = make_node(), make_node()
    pull = a.socket("pull", tag=2, policy=pull_policy)
    push = b.socket("push", policy=push_policy)
    push.link(f"{a.address}/2", timeout=5)
    for i in range(100):
        push.send(b"before %d" % i, timeout=5)
    got = [pull.receive(timeout=5).payload for _ in range(100)]
    inc = b._core._sockets[push.tag].links[exon.core.PeerId(a.address, 2)].incarnation
    forged = _forge(driver.dir, a, b.address, push.tag, 2, range(inc + 1, inc + 4))
    assert forged == 6
    deadline = time.monotonic() + 5
    while a.statistics().relinks_refused < forged and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.statistics().relinks_refused == forged
    # the real PUSH's stream keeps flowing: well past the 1,024 sends that used to vanish
    for batch in range(6):  # (credit is 1,024 per link: receive as we go)
        for i in range(batch * 500, batch * 500 + 500):
            push.send(b"after %d" % i, timeout=5)
        got += [pull.receive(timeout=5).payload for _ in range(500)]
    assert got == [b"before %d" % i for i in range(100)] + [b"after %d" % i for i in range(3000)]
    assert len(push.peers) == 1
    assert len(pull.peers) == 1


PUSHER = """
import sys, time
import exon
node = exon.Node(sys.argv[2], driver_dir=sys.argv[1])
push = node.socket("push", tag=9)
push.link(sys.argv[3], timeout=15)
push.send(sys.argv[4].encode(), timeout=5)
print(node.address, flush=True)
time.sleep(60)
"""


def test_a_peer_node_that_restarted_links_again(make_node, driver) -> None:
    a = make_node()
    pull = a.socket("pull", tag=2)
    first = python_process(PUSHER, driver.dir, "127.0.0.1:0", f"{a.address}/2", "first life")
    second = None
    try:
        address = read_line(first)
        assert pull.receive(timeout=10).payload == b"first life"
        kill(first, signal.SIGKILL)  # no UNLINK, its stream dies with it
        # a new process at the same address, same tag, a new incarnation
        second = python_process(PUSHER, driver.dir, address, f"{a.address}/2", "second life")
        assert read_line(second) == address
        message = pull.receive(timeout=10)
        assert message.payload == b"second life"
        assert len(pull.peers) == 1
    finally:
        kill(first)
        if second is not None:
            kill(second)


REQUESTER = """
import sys, time, exon
node = exon.Node(endpoint=sys.argv[1], driver="embedded")
req = node.socket("req")
req.link(sys.argv[2], timeout=20)
req.send(sys.argv[3].encode(), timeout=20)
print(node.address, req.receive(timeout=20).payload.decode(), flush=True)
time.sleep(60)
"""


def test_a_peer_killed_and_restarted_over_udp_relinks_before_its_old_stream_times_out(
) -> None:
    """kill -9 of a REQ's node, restarted at the same HOST:PORT: its LINK comes on a new
    stream while the REP's node still holds the old one (until image_liveness_timeout, 30 s
    here). The old stream has been quiet (a live sender heartbeats every 100 ms), so it is
    replaced at once and the new REQ links (2.7); it used to be refused until the old image
    timed out (10 s by default: 11 s measured from the restart on loopback)."""
    rep_node = exon.Node(endpoint="127.0.0.1:0", driver="embedded",
                         driver_options={"image_liveness_timeout_ns": 30_000_000_000})
    rep = rep_node.socket("rep")
    target = f"{rep_node.address}/{rep.tag}"
    served: list[bytes] = []

    def serve() -> None:
        deadline = time.monotonic() + 60
        while len(served) < 2 and time.monotonic() < deadline:
            try:
                msg = rep.receive(timeout=0.5)
                served.append(msg.payload)
                rep.send(b"re " + msg.payload, timeout=5)
            except (exon.Timeout, exon.BrokenLink):
                continue

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    first = python_process(REQUESTER, "127.0.0.1:0", target, "first life")
    second = None
    try:
        address, answer = read_line(first).split(" ", 1)
        assert answer == "re first life"
        kill(first, signal.SIGKILL)  # no UNLINK: the REP's link and image stay
        restarted = time.monotonic()
        second = python_process(REQUESTER, address, target, "second life")
        line = read_line(second, timeout=25)
        took = time.monotonic() - restarted
        print(f"\nrelinked and answered {took:.2f} s after the restart; old streams retired "
              f"as quiet: {rep_node.streams_retired}")
        assert line == f"{address} re second life"
        assert rep_node.streams_retired >= 1
        assert took < 20  # the old image (30 s) was still there: it did not time out
    finally:
        kill(first)
        if second is not None:
            kill(second)
        server.join(10)
        rep_node.close()
