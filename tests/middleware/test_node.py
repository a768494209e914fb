"""The Node over real processes: a SIGKILLed peer node, the CLI, registry and HELLO."""

from __future__ import annotations

import os
import signal
import time

import pytest

import exon
from exon.middleware.node_transport import decode_hello, encode_hello, registry_path
from tests.sockets.helpers import (
    exon_cli,
    kill,
    python_process,
    read_line,
    rest_of_output,
    run_cli,
)

REP_THAT_NEVER_ANSWERS = """
import sys, time
import exon
node = exon.Node("127.0.0.1:0", driver_dir=sys.argv[1])
rep = node.socket("rep", tag=5)
print(node.address, flush=True)
time.sleep(60)
"""


def test_peer_node_killed_mid_request_breaks_the_link(make_node, driver) -> None:
    proc = python_process(REP_THAT_NEVER_ANSWERS, driver.dir)
    try:
        address = read_line(proc)
        node = make_node()
        req = node.socket("req")
        req.link(f"{address}/5", timeout=5)
        req.send(b"are you there", cookie="c1", timeout=5)
        kill(proc, signal.SIGKILL)
        started = time.monotonic()
        item = req.receive(timeout=10)  # the cookie first: never confirmed
        assert item == exon.CookieLost("c1")
        with pytest.raises(exon.BrokenLink):
            req.receive(timeout=10)
        assert time.monotonic() - started < 10
        assert req.peers == []
        # the REQ is not wedged: the next call is send() again (no REP: it times out)
        with pytest.raises(exon.Timeout):
            req.send(b"again", timeout=0.2)
    finally:
        kill(proc)


def test_cli_node_echo_and_request(driver) -> None:
    node = exon_cli("node", "--endpoint", "127.0.0.1:0", "--echo", "7", "--sink", "8",
                    "--driver-dir", driver.dir)
    try:
        address = read_line(node)
        assert read_line(node) == f"echo {address}/7"
        assert read_line(node) == f"sink {address}/8"
        out = run_cli("request", f"{address}/7", "hello", "--driver-dir", driver.dir)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "hello"
        out = run_cli("push", f"{address}/8", "x", "--count", "5", "--driver-dir",
                     driver.dir)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "sent 5"
        node.send_signal(signal.SIGTERM)
        rest = rest_of_output(node, timeout=20)
        assert node.returncode == 0
        assert "sink 8 received 5" in rest
    finally:
        kill(node)


def test_cli_request_to_missing_socket_fails_cleanly(driver) -> None:
    with exon.Node(driver_dir=driver.dir) as node:
        out = run_cli("request", f"{node.address}/42", "x", "--timeout", "0.5",
                     "--driver-dir", driver.dir)
    assert out.returncode == 1
    assert "SocketNotFound" in out.stderr


def test_registry_entry_lives_with_the_node(driver) -> None:
    node = exon.Node("127.0.0.1:0", driver_dir=driver.dir)
    path = registry_path(driver.dir, node.address)
    assert os.path.exists(path)
    with pytest.raises(exon.ConfigurationError):
        exon.Node(node.address, driver_dir=driver.dir)  # the address is taken
    node.close()
    assert not os.path.exists(path)


def test_hello_round_trip_and_garbage() -> None:
    assert decode_hello(encode_hello("127.0.0.1:4000")) == "127.0.0.1:4000"
    assert decode_hello(b"\x01\x00") is None
    assert decode_hello(b"\x01\x00\x01\x03\x00\x00\x00\x00abc") is None  # sockets protocol


def test_bad_endpoints_and_peers_are_configuration_errors(make_node) -> None:
    with pytest.raises(exon.ConfigurationError):
        exon.Node("no-port")
    node = make_node()
    req = node.socket("req")
    for bad in ("127.0.0.1:5", "127.0.0.1:x/1", "127.0.0.1:5/-1", "127.0.0.1:5/4294967296"):
        with pytest.raises(exon.ConfigurationError):
            req.link(bad, timeout=0.1)
    with pytest.raises(exon.ConfigurationError):
        exon.Socket(type="pair", node=node)
    with pytest.raises(exon.ConfigurationError):
        node.socket("rep", tag=req.tag)  # tag taken


def test_one_doorbell_wakes_a_node_for_ipc_and_udp_images() -> None:
    """A node's IPC and UDP subscriptions share one reader doorbell: its single futex wait
    is woken by data on either (a UDP image rings the same word an IPC publisher rings)."""
    from exon.native import lib

    with exon.Node("127.0.0.1:0") as node, exon.Node("127.0.0.1:0") as other:
        subs = node._transport.subscriptions
        assert len(subs) == 2
        assert subs[0].doorbell_counter_id == subs[1].doorbell_counter_id
        pull = node.socket("pull", tag=1)
        push = other.socket("push")  # another driver: this link goes over UDP
        push.link(f"{node.address}/1", timeout=5)
        before = lib.exon_doorbell_read(node._transport._doorbell)
        push.send(b"over udp")
        assert pull.receive(timeout=5).payload == b"over udp"
        assert node._transport.udp_enabled
        assert lib.exon_doorbell_read(node._transport._doorbell) != before


def test_a_back_pressured_frame_goes_out_without_inbound_traffic(make_node) -> None:
    """A FLOW refused once by back pressure waits in the node's backlog; it must go out on
    the node's own polling, since its peer (waiting for that FLOW) sends nothing more."""
    from exon.transport.aeron import BACK_PRESSURED

    sender, receiver = make_node(), make_node()
    pull = receiver.socket("pull", tag=7)
    push = sender.socket("push")
    push.link(f"{receiver.address}/7", timeout=5)
    transport = receiver._transport
    real_offer = transport.offer
    refused: list[bytes] = []

    def offer_refusing_once(pub, data):  # type: ignore[no-untyped-def]
        if not refused:
            refused.append(bytes(data))
            return BACK_PRESSURED
        return real_offer(pub, data)

    transport.offer = offer_refusing_once
    for i in range(3):
        push.send(b"m%d" % i, cookie=i, timeout=5)
    assert [pull.receive(timeout=5).payload for _ in range(3)] == [b"m0", b"m1", b"m2"]
    # the batched FLOW (3 < batch) is sent by the core's timer, refused once, retried
    got = [push.receive(timeout=5) for _ in range(3)]
    assert refused, "the FLOW was never refused: the test did not exercise the backlog"
    assert got == [exon.Cookie(0), exon.Cookie(1), exon.Cookie(2)]
    assert not receiver._connections.backlog


def test_an_endpoint_host_this_machine_lacks_is_a_configuration_error() -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: binding fails, nothing is sent
    with pytest.raises(exon.ConfigurationError, match=r"192\.0\.2\.1"):
        exon.Node(endpoint="192.0.2.1:0", driver="embedded")


ECHO_ON_EMBEDDED_DRIVER = """
import sys
import exon
with exon.Node("127.0.0.1:0", driver="embedded") as node:
    rep = node.socket("rep", tag=7)
    print(node.address, flush=True)
    for _ in range(2):
        rep.send(rep.receive(timeout=60).payload, timeout=60)
"""


def test_a_node_on_its_embedded_driver_stopped_for_seconds_keeps_its_links() -> None:
    """A process starved of CPU (here stopped, SIGSTOP, for 4 s) comes back with its links:
    its own embedded driver does not declare it dead when both resume (client liveness is
    Aeron's 10 s, not the 2 s it used to be for embedded drivers)."""
    proc = python_process(ECHO_ON_EMBEDDED_DRIVER)
    try:
        address = read_line(proc)
        with exon.Node("127.0.0.1:0", driver="embedded") as node:
            req = node.socket("req")
            req.link(f"{address}/7", timeout=10)
            req.send(b"before", timeout=5)
            assert req.receive(timeout=10).payload == b"before"
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                time.sleep(4)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            req.send(b"after", timeout=5)
            assert req.receive(timeout=10).payload == b"after"
        assert proc.wait(10) == 0
    finally:
        kill(proc)
