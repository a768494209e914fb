"""Hypothesis state machine: two cores over a lossless wire that reorders control frames.

Invariants: credits never negative, no DATA without credit, a receiver never holds more
than its capacity undelivered, every cookie comes back exactly once (returned, or lost when
the link closes first), never both, and a returned cookie's message was delivered.
"""

from __future__ import annotations

from collections import deque

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from exon.core.events import (
    CookieLost,
    CookieReturned,
    LinkClosed,
    MessageReceived,
    PeerId,
)
from exon.core.link_state import LinkState
from exon.errors import BackPressured, SocketNotLinked, StateError
from tests.core.helpers import LossyWire, make_core

A_PEER, B_PEER = PeerId("A", 1), PeerId("B", 2)
CAPACITY = 4


class LinkMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.a = make_core("A", grant_batch_fraction=0.5, flow_delay=0.01, unlink_timeout=3.0,
                           retry_initial=0.01)
        self.b = make_core("B", grant_batch_fraction=0.5, flow_delay=0.01, unlink_timeout=3.0)
        self.a.open_socket(1, "push")
        self.b.open_socket(2, "pull", initial_credits=CAPACITY)
        self.wire = LossyWire(reorder=0.5, seed=7)
        self.wire.connect(self.a, self.b)
        self.next_cookie = 0
        self.sent: set[int] = set()
        self.returned: list[int] = []
        self.lost: list[int] = []
        self.inbox: deque[MessageReceived] = deque()
        self.delivered: set[int] = set()

    def _collect(self) -> None:
        for event in self.a.events():
            if isinstance(event, CookieReturned):
                self.returned.append(event.cookie)
            elif isinstance(event, CookieLost):
                self.lost.append(event.cookie)
        for event in self.b.events():
            if isinstance(event, MessageReceived):
                self.inbox.append(event)
            elif isinstance(event, LinkClosed):
                pass

    @rule()
    def a_links(self) -> None:
        try:
            self.a.link(1, B_PEER, now=self.now)
        except StateError:
            assert self.a.link_state(1, B_PEER) is LinkState.UNLINKING
        self._collect()

    @rule()
    def b_links_too(self) -> None:
        try:
            self.b.link(2, A_PEER, now=self.now)
        except StateError:
            pass
        self._collect()

    @rule()
    def a_unlinks(self) -> None:
        self.a.unlink(1, B_PEER, now=self.now)
        self._collect()

    @rule()
    def b_unlinks(self) -> None:
        self.b.unlink(2, A_PEER, now=self.now)
        self._collect()

    @rule(with_cookie=st.booleans())
    def send(self, with_cookie: bool) -> None:
        credit = self.a.credits(1, B_PEER)
        cookie = self.next_cookie
        self.next_cookie += 1
        try:
            self.a.send(1, str(cookie).encode(), cookie=cookie if with_cookie else None,
                        now=self.now)
        except (BackPressured, SocketNotLinked):
            assert credit == 0
            return
        assert credit > 0
        if with_cookie:
            self.sent.add(cookie)
        self._collect()

    @rule(n=st.integers(1, 5))
    def b_app_receives(self, n: int) -> None:
        for _ in range(min(n, len(self.inbox))):
            msg = self.inbox.popleft()
            self.delivered.add(int(msg.payload))
            self.b.deliver(msg, now=self.now)
        self._collect()

    @rule(n=st.integers(1, 8))
    def wire_moves(self, n: int) -> None:
        self.wire.collect(self.now)
        for _ in range(n):
            if not self.wire.deliver_one(self.now):
                break
            self.wire.collect(self.now)
        self._collect()

    @rule(dt=st.sampled_from([0.005, 0.02, 0.5, 4.0]))
    def time_passes(self, dt: float) -> None:
        self.now += dt
        self.a.handle_timer(now=self.now)
        self.b.handle_timer(now=self.now)
        self._collect()

    @invariant()
    def credits_never_negative_and_memory_bounded(self) -> None:
        for core, tag in ((self.a, 1), (self.b, 2)):
            for link in core._sockets[tag].links.values():
                led = link.ledger
                if led is not None:
                    assert 0 <= led.sent <= led.limit
                    assert led.received - led.delivered <= led.capacity
                    assert led.confirmed <= led.sent
        assert self.b.statistics().credit_violations == 0

    @invariant()
    def cookies_at_most_once(self) -> None:
        assert len(self.returned) == len(set(self.returned))
        assert len(self.lost) == len(set(self.lost))
        assert not set(self.returned) & set(self.lost)
        assert set(self.returned) | set(self.lost) <= self.sent
        assert set(self.returned) <= self.delivered

    def teardown(self) -> None:
        # settle: deliver everything, unlink, let timers run; then every cookie is accounted
        for _ in range(20):
            self.wire.run(self.now)
            self._collect()
            while self.inbox:
                msg = self.inbox.popleft()
                self.delivered.add(int(msg.payload))
                self.b.deliver(msg, now=self.now)
            self.a.unlink(1, B_PEER, now=self.now)
            self.now += 1.0
            self.a.handle_timer(now=self.now)
            self.b.handle_timer(now=self.now)
            self._collect()
        assert self.a.links(1) == {}
        assert sorted(self.returned + self.lost) == sorted(self.sent)
        self.cookies_at_most_once()


LinkMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                         deadline=None)
TestLinkMachine = LinkMachine.TestCase
