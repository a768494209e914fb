"""More acceptance cases: late links, unlink under a pending request, policies, close."""

from __future__ import annotations

import threading
import time

import pytest

import exon
from exon.core import SharedSecretPolicy


def test_send_before_any_link_completes_once_a_pull_links(make_node) -> None:
    a, b = make_node(), make_node()
    push = a.socket("push", tag=1)
    pull = b.socket("pull", tag=2)
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(push.send(b"early", timeout=10)))
    t.start()
    time.sleep(0.1)
    assert not done  # blocked: no link yet
    pull.link(f"{a.address}/1")  # the PULL initiates this time
    assert pull.receive(timeout=5).payload == b"early"
    t.join(5)
    assert done == [None]


def test_rep_unlinking_wakes_the_waiting_req(make_node) -> None:
    a, b = make_node(), make_node()
    rep = a.socket("rep", tag=1)
    req = b.socket("req", tag=2)
    req.link(f"{a.address}/1")
    req.send(b"question")
    assert rep.receive(timeout=5).payload == b"question"
    outcome: list[object] = []

    def wait_reply() -> None:
        try:
            outcome.append(req.receive(timeout=10))
        except exon.ExonError as exc:
            outcome.append(exc)

    t = threading.Thread(target=wait_reply)
    t.start()
    rep.unlink(f"{b.address}/2", timeout=5)
    t.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], exon.BrokenLink)
    with pytest.raises(exon.Timeout):
        req.send(b"no REP left", timeout=0.1)  # not wedged: send is the next call


def test_shared_secret_policy_refuses_strangers(make_node) -> None:
    a, b = make_node(), make_node()
    a.socket("pull", tag=1, policy=SharedSecretPolicy(b"s3cret"))
    friend = b.socket("push", policy=SharedSecretPolicy(b"s3cret"))
    friend.link(f"{a.address}/1")
    stranger = b.socket("push")
    with pytest.raises(exon.LinkRefused) as info:
        stranger.link(f"{a.address}/1", timeout=5)
    assert info.value.permanent
    wrong = b.socket("push", policy=SharedSecretPolicy(b"guess"))
    with pytest.raises(exon.LinkRefused):
        wrong.link(f"{a.address}/1", timeout=5)
    with pytest.raises(exon.Timeout):
        stranger.send(b"let me in", timeout=0.1)  # no link: it can send nothing


def test_close_from_another_thread_wakes_a_blocked_receiver(make_node) -> None:
    node = make_node()
    pull = node.socket("pull")
    outcome: list[object] = []

    def blocked() -> None:
        try:
            pull.receive(timeout=10)
        except exon.ExonError as exc:
            outcome.append(exc)

    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.1)
    pull.close()
    t.join(5)
    assert len(outcome) == 1
    assert isinstance(outcome[0], exon.ClosedError)
    with pytest.raises(exon.ClosedError):
        pull.receive(timeout=0.1)
