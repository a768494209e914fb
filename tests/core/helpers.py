"""Test kit for the sans-IO core: build cores, move frames between them, lossy wires.

* ``make_core(name)``: a SocketCore whose reply address is ``name``.
* ``transfer(a, b, now)``: hand every frame ``a`` wants sent to ``b``; returns the count.
* ``pump(cores, now)``: move frames among many cores until nobody sends anything.
* ``link_pair(...)``: two cores with one established link, all events drained.
* ``LossyWire(drop=, reorder=, duplicate=, seed=)``: a wire that loses, swaps adjacent
  control frames and duplicates frames, with its own seeded random source.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from exon.core.events import Event, LinkEstablished, PeerId
from exon.core.frames import FrameType, peek_header
from exon.core.settings import LinkSettings
from exon.core.socket_core import SocketCore


def make_core(name: str, *, seed: int = 0, **settings: object) -> SocketCore:
    return SocketCore(
        node_id=f"node-{name}",
        reply_address=name,
        settings=LinkSettings(**settings),  # type: ignore[arg-type]
        rng=random.Random(f"{name}-{seed}"),
    )


def transfer(a: SocketCore, b: SocketCore, now: float = 0.0) -> int:
    """Deliver every frame ``a`` has queued to ``b`` (all must be addressed to ``b``)."""
    frames = a.frames_to_send(now=now)
    for address, data in frames:
        assert address == b.reply_address, f"frame for {address}, not {b.reply_address}"
        b.receive_frame(a.reply_address, data, now=now)
    return len(frames)


def pump(cores: Iterable[SocketCore], now: float = 0.0, max_rounds: int = 1000) -> int:
    """Route frames among ``cores`` by address until all are quiet; returns frames moved."""
    by_address = {c.reply_address: c for c in cores}
    moved = 0
    for _ in range(max_rounds):
        batch = [(c.reply_address, addr, data) for c in by_address.values()
                 for addr, data in c.frames_to_send(now=now)]
        if not batch:
            return moved
        for src, addr, data in batch:
            moved += 1
            if addr in by_address:
                by_address[addr].receive_frame(src, data, now=now)
    raise AssertionError("cores never went quiet")


def drain(core: SocketCore) -> list[Event]:
    return core.events()


@dataclass
class Pair:
    a: SocketCore
    b: SocketCore
    a_tag: int
    b_tag: int

    @property
    def peer_b(self) -> PeerId:
        """B's socket as A sees it."""
        return PeerId(self.b.reply_address, self.b_tag)

    @property
    def peer_a(self) -> PeerId:
        return PeerId(self.a.reply_address, self.a_tag)


def link_pair(
    type_a: str = "push",
    type_b: str = "pull",
    *,
    a_tag: int = 1,
    b_tag: int = 2,
    now: float = 0.0,
    credits_a: int | None = None,
    credits_b: int | None = None,
    **settings: object,
) -> Pair:
    """Two cores "A" and "B", A links to B, everything delivered, events drained."""
    a = make_core("A", **settings)
    b = make_core("B", **settings)
    a.open_socket(a_tag, type_a, initial_credits=credits_a)
    b.open_socket(b_tag, type_b, initial_credits=credits_b)
    pair = Pair(a, b, a_tag, b_tag)
    a.link(a_tag, pair.peer_b, now=now)
    pump([a, b], now)
    ea, eb = a.events(), b.events()
    assert any(isinstance(e, LinkEstablished) for e in ea), ea
    assert any(isinstance(e, LinkEstablished) for e in eb), eb
    return pair


def is_control(data: bytes) -> bool:
    return peek_header(data)[2] != FrameType.DATA


class LossyWire:
    """A wire among cores that drops, reorders (adjacent control frames) and duplicates.

    ``reorder`` only swaps two adjacent *control* frames on the same path, so DATA keeps
    its order (as on an Aeron stream) while LINK/LINKACK/FLOW/UNLINK/ERROR may overtake
    each other.
    """

    def __init__(self, *, drop: float = 0.0, reorder: float = 0.0, duplicate: float = 0.0,
                 seed: int = 0) -> None:
        self.drop, self.reorder, self.duplicate = drop, reorder, duplicate
        self.rng = random.Random(seed)
        self.cores: dict[str, SocketCore] = {}
        self.in_flight: list[tuple[str, str, bytes]] = []  # (source, destination, frame)
        self.dropped = self.duplicated = self.reordered = 0

    def connect(self, *cores: SocketCore) -> None:
        for core in cores:
            self.cores[core.reply_address] = core

    def collect(self, now: float) -> None:
        for core in self.cores.values():
            for address, data in core.frames_to_send(now=now):
                if self.rng.random() < self.drop:
                    self.dropped += 1
                    continue
                self.in_flight.append((core.reply_address, address, data))
                if self.rng.random() < self.duplicate:
                    self.duplicated += 1
                    self.in_flight.append((core.reply_address, address, data))
        flight = self.in_flight
        for i in range(len(flight) - 1):
            x, y = flight[i], flight[i + 1]
            if (x[:2] == y[:2] and is_control(x[2]) and is_control(y[2])
                    and self.rng.random() < self.reorder):
                flight[i], flight[i + 1] = y, x
                self.reordered += 1

    def deliver_one(self, now: float) -> bool:
        if not self.in_flight:
            return False
        src, dst, data = self.in_flight.pop(0)
        core = self.cores.get(dst)
        if core is not None:
            core.receive_frame(src, data, now=now)
        return True

    def run(self, now: float, max_frames: int = 10_000) -> int:
        """Collect and deliver until quiet; returns frames delivered."""
        delivered = 0
        self.collect(now)
        while self.in_flight and delivered < max_frames:
            self.deliver_one(now)
            delivered += 1
            self.collect(now)
        return delivered
