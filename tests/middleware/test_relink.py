"""A forged LINK does not break an established link (issue #13), over real nodes.

The attack: a LINK carrying an established PUSH's tag, a new incarnation and the PUSH's
reply address, sent on the attacker's own stream (its own Aeron publication, whose HELLO
claims the PUSH's address too). It used to make the PULL drop the link while the PUSH went
on sending into the void (1,024 sends "ok" and discarded). Now the link goes on; and a
peer node that really restarted still links again.
"""

from __future__ import annotations

import signal
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
