"""A PULL's one inbox (exon.sockets.inbox, exon_fast_inbox.c) under link churn: PUSH
sockets on other nodes link, send, unlink, relink and close over and over while the PULL
takes its messages with receive(), receive_many() and receive_held() + confirm, and steady
PUSHes stream beside them; one sender node's links reach the PULL through the core, the
others' on the fast path. Nothing of a link that stayed up is lost, duplicated or
reordered; nothing at all is duplicated; every cookie comes back exactly once (a Cookie,
or CookieLost for a link that closed first); and once the churn is over the inbox holds
no lane beyond the steady peers' (Python's map and the native queue's count agree)."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

import exon
from exon.sockets.messages import Cookie, CookieLost
from tests.sockets.test_inbox import _core_path_for

SENDERS = 3  # sender nodes, each with one steady PUSH and one churning thread
STEADY = 400  # messages of each steady PUSH
CHURN_SECONDS = 3.0  # how long the churn goes on (the whole test stays under ~10 s)
CREDITS = 64


def _cookies_of(push: Any, expected: int, timeout: float) -> list[Cookie | CookieLost]:
    """Every cookie ``push`` has coming (``expected``), then a check that none is left."""
    got: list[Cookie | CookieLost] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        try:
            item = push.receive(timeout=0.2)
        except exon.Timeout:
            continue
        assert isinstance(item, (Cookie, CookieLost)), item
        got.append(item)
    with pytest.raises((exon.Timeout, exon.StateError)):  # nothing more than was sent
        push.receive(timeout=0.05)
    return got


class _Churner:
    """A thread that, until ``stop``, makes PUSH sockets on ``node`` that link to the PULL,
    send a few messages with cookies, then unlink (checking the cookies), relink once, or
    close with messages possibly still in flight."""

    def __init__(self, node: exon.Node, target: str, name: str, seed: int) -> None:
        self.node, self.target, self.name = node, target, name
        self.rng = random.Random(seed)
        self.sent: dict[bytes, list[int]] = defaultdict(list)  # generation key -> sent seqs
        self.complete: set[bytes] = set()  # generations whose link closed by unlink
        self.cookie_errors: list[str] = []
        self.rounds = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"churn-{name}", daemon=True)

    def _burst(self, push: Any, key: bytes) -> int:
        count = self.rng.randint(1, 24)
        for i in range(count):
            push.send(b"%s:%d" % (key, i), cookie=(key, i), timeout=5)
            self.sent[key].append(i)
        return count

    def _check_cookies(self, push: Any, keys: list[bytes], expected: int) -> None:
        cookies = _cookies_of(push, expected, timeout=8)
        values = sorted(c.value for c in cookies)
        want = sorted((k, i) for k in keys for i in self.sent[k])
        if values != want:
            self.cookie_errors.append(f"{keys}: cookies {values} != sent {want}")

    def _run(self) -> None:
        try:
            generation = 0
            while not self.stop.is_set():
                push = self.node.socket("push")
                mode = self.rng.choice(["unlink", "relink", "close"])
                key = b"%s.%d" % (self.name.encode(), generation)
                generation += 1
                push.link(self.target, timeout=5)
                sent = self._burst(push, key)
                if mode == "close":
                    push.close(timeout=self.rng.choice([0.0, 0.5]))
                elif mode == "unlink":
                    push.unlink(self.target, timeout=8)
                    self.complete.add(key)
                    self._check_cookies(push, [key], sent)
                    push.close(timeout=1)
                else:  # unlink, link again (a new incarnation of the same peer), unlink
                    push.unlink(self.target, timeout=8)
                    again = b"%s.%d" % (self.name.encode(), generation)
                    generation += 1
                    push.link(self.target, timeout=5)
                    sent += self._burst(push, again)
                    push.unlink(self.target, timeout=8)
                    self.complete.update((key, again))
                    self._check_cookies(push, [key, again], sent)
                    push.close(timeout=1)
                self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.error = exc


def _steady(push: Any, name: bytes, errors: list[BaseException]) -> None:
    try:
        for i in range(STEADY):
            push.send(b"%s:%d" % (name, i), cookie=(name, i), timeout=5)
            if i % 50 == 49:
                time.sleep(0.02)  # spread them over the churn
    except BaseException as exc:
        errors.append(exc)


def _take(pull: Any, rng: random.Random, held: list[Any]) -> list[bytes]:
    """One receive of a randomly chosen kind; held batches are confirmed late (one or two
    batches behind) or at once."""
    kind = rng.choice(["one", "many", "held", "held"])
    if kind != "held" and held:  # the other doors refuse while a batch is held
        for batch in held:
            pull.confirm(batch)
        held.clear()
    try:
        if kind == "one":
            return [pull.receive(timeout=0.05).payload]
        if kind == "many":
            return [m.payload for m in pull.receive_many(rng.randint(1, 40), timeout=0.05)]
        batch = pull.receive_held(rng.randint(1, 40), timeout=0.05)
    except exon.Timeout:
        return []
    held.append(batch)
    if len(held) > rng.randint(0, 2):
        for b in held:
            pull.confirm(b)
        held.clear()
    return list(batch.payloads)


def test_the_inbox_under_link_churn_loses_duplicates_and_leaks_nothing(
        make_node: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    b = make_node()
    pull = b.socket("pull", tag=1, credits=CREDITS)
    target = f"{b.address}/1"
    senders = [make_node() for _ in range(SENDERS)]
    _core_path_for(b, monkeypatch, senders[0].address)  # the others' links: the fast path
    steadies = [node.socket("push") for node in senders]
    for push in steadies:
        push.link(target, timeout=5)
    pull.wait_for_links(SENDERS, timeout=5)
    with b._lock:
        # a lane per fast link (opened as it attached); the core-path peer's opens with
        # its first message, and stays, as the other steady ones' do
        assert (len(pull._inbox.lanes), pull._inbox.nq.open_lanes) == (SENDERS - 1, SENDERS - 1)
    on_fast = {peer.address for (tag, peer) in b._fast.by_link if tag == pull.tag}
    assert on_fast == {node.address for node in senders[1:]}

    churners = [_Churner(node, target, f"c{k}", seed=k) for k, node in enumerate(senders)]
    errors: list[BaseException] = []
    names = [b"s%d" % k for k in range(SENDERS)]
    threads = [threading.Thread(target=_steady, args=(push, name, errors), daemon=True)
               for push, name in zip(steadies, names, strict=True)]
    for t in [*threads, *(c.thread for c in churners)]:
        t.start()

    rng = random.Random(7)
    got: list[bytes] = []
    held: list[Any] = []
    stop_at = time.monotonic() + CHURN_SECONDS
    deadline = time.monotonic() + 9.0
    while time.monotonic() < deadline:
        got += _take(pull, rng, held)
        if time.monotonic() > stop_at:
            for c in churners:
                c.stop.set()
        if (not any(t.is_alive() for t in threads)
                and not any(c.thread.is_alive() for c in churners)
                and not held and pull._queued() == 0):
            break
    for batch in held:
        pull.confirm(batch)
    for c in churners:
        c.stop.set()
        c.thread.join(timeout=1)
    for t in threads:
        t.join(timeout=1)
    assert not errors, errors
    for c in churners:
        assert not c.thread.is_alive(), f"{c.name} still churning"
        assert c.error is None, c.error
        assert not c.cookie_errors, c.cookie_errors
        assert c.rounds >= 3, f"{c.name}: only {c.rounds} churn rounds"

    # nothing taken twice
    assert len(got) == len(set(got)), sorted(p for p in set(got) if got.count(p) > 1)[:10]
    by_key: dict[bytes, list[int]] = defaultdict(list)
    for payload in got:
        key, _, seq = payload.rpartition(b":")
        by_key[key].append(int(seq))
    # a link that stayed up: everything, in order
    for name in names:
        assert by_key[name] == list(range(STEADY)), name
    for c in churners:
        for key, seqs in c.sent.items():
            taken = by_key.get(key, [])
            assert taken == sorted(taken), (key, taken)  # each link's order held
            assert set(taken) <= set(seqs), (key, taken)
            if key in c.complete:  # unlinked: nothing sent before is lost
                assert taken == seqs, (key, taken, seqs)

    # every steady cookie came back as delivered, once
    for push, name in zip(steadies, names, strict=True):
        cookies = _cookies_of(push, STEADY, timeout=5)
        assert all(isinstance(c, Cookie) for c in cookies)
        assert sorted(c.value for c in cookies) == sorted((name, i) for i in range(STEADY))

    # no lane left behind: only the steady peers' (Python's map and the native count)
    end = time.monotonic() + 5
    while time.monotonic() < end:
        with b._lock:
            if (len(pull._inbox.lanes), pull._inbox.nq.open_lanes) == (SENDERS, SENDERS):
                break
        time.sleep(0.01)
    with b._lock:
        assert (len(pull._inbox.lanes), pull._inbox.nq.open_lanes) == (SENDERS, SENDERS), \
            sorted(map(str, pull._inbox.lanes))
        assert len(pull._inbox.nq) == 0
        assert pull._inbox.nq.queued_bytes() == 0
