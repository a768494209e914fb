"""The soak: push/pull and req/rep between two namespaced nodes under faults that change
every round, while both nodes' RSS, file descriptors and threads are sampled.

Used by ``tests/chaos/test_soak.py`` (a few minutes, in CI) and ``tools/soak.py`` (30
minutes by default). Each round picks loss, duplication, delay and reorder at random (now
and then a 1 s partition too), streams :data:`ROUND_MESSAGES` messages on one PUSH->PULL
link while :data:`ROUND_REQUESTS` requests go through fresh REQ sockets (opened, linked
and closed every round: sockets and links churn), then checks that everything arrived
once and in order and every reply matched. After the warm-up rounds, growth of RSS, fds
and threads must stay within :data:`LIMITS`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.netns import Lab

ROUND_MESSAGES = 8000
ROUND_REQUESTS = 240
REQ_SOCKETS = 8
PULL, PUSH, REP = 2, 1, 3
#: growth allowed after the warm-up, per node: resident memory in all, the anonymous part
#: of it (heap: what a leak grows), file descriptors, threads
LIMITS = {"rss": 24 << 20, "anon": 16 << 20, "fds": 4, "threads": 4}
#: 1 MiB terms (Aeron's default is 16 MiB): a log buffer is resident once its three terms
#: were written over, and that happens within the warm-up instead of after 48 MiB
DRIVER = {"term_buffer_length": "1m"}
WARMUP_FRACTION = 0.25
MIN_WARMUP_ROUNDS = 3
PARTITION_ROUND = MIN_WARMUP_ROUNDS + 1  #: the round that partitions whatever the draw


class SoakFailure(AssertionError):
    """A round lost, duplicated or reordered something, or a resource grew."""


@dataclass
class SoakReport:
    rounds: int = 0
    messages: int = 0
    requests: int = 0
    partitions: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    growth: dict[str, dict[str, int]] = field(default_factory=dict)
    slope_kib_per_min: dict[str, float] = field(default_factory=dict)  # of anon, after warm-up

    def summary(self) -> dict[str, Any]:
        first, last = self.samples[0], self.samples[-1]
        return {"rounds": self.rounds, "messages": self.messages, "requests": self.requests,
                "partitions": self.partitions, "seconds": round(last["t"], 1),
                "rss_mib_first_last": {side: [round(first[side]["rss"] / 2**20, 1),
                                              round(last[side]["rss"] / 2**20, 1)]
                                       for side in "ab"},
                "anon_mib_first_last": {side: [round(first[side]["anon"] / 2**20, 1),
                                               round(last[side]["anon"] / 2**20, 1)]
                                        for side in "ab"},
                "fds": {side: [first[side]["fds"], last[side]["fds"]] for side in "ab"},
                "growth_after_warmup": self.growth,
                "anon_slope_kib_per_min": self.slope_kib_per_min}


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def run_soak(lab: Lab, seconds: float, *, seed: int = 0,
             log: Callable[[str], None] = lambda line: None) -> SoakReport:
    rng = random.Random(seed)
    a = lab.start_node("a", driver=DRIVER)
    b = lab.start_node("b", driver=DRIVER)
    b.ok("socket", name="pull", type="pull", tag=PULL)
    b.ok("socket", name="rep", type="rep", tag=REP)
    b.ok("sink_start", name="pull")
    b.ok("serve_start", name="rep")
    a.ok("socket", name="push", type="push", tag=PUSH)
    a.ok("link", name="push", peer=f"{b.address}/{PULL}")
    report = SoakReport()
    start = time.monotonic()
    sent_total = 0
    while time.monotonic() - start < seconds:
        faults = {"loss": rng.choice([0, 5, 10, 20]), "dup": rng.choice([0, 2, 5]),
                  "delay_ms": rng.choice([0, 2, 10]), "reorder": rng.choice([0, 10, 25]),
                  "seed": rng.randrange(1 << 30)}
        # now and then, and always in the round after the warm-up's first rounds: a short
        # soak partitions at least once too
        partition = rng.random() < 0.1 or report.rounds == PARTITION_ROUND
        lab.impair(**faults)
        results: dict[str, dict[str, Any]] = {}

        def push(results: dict[str, dict[str, Any]] = results, first: int = sent_total) -> None:
            results["push"] = a.call("push", name="push", count=ROUND_MESSAGES, start=first,
                                     timeout=60, wait=300)

        def req(results: dict[str, dict[str, Any]] = results) -> None:
            results["req"] = a.call("req", peer=f"{b.address}/{REP}", count=ROUND_REQUESTS,
                                    sockets=REQ_SOCKETS, timeout=60, wait=300)

        threads = [threading.Thread(target=push), threading.Thread(target=req)]
        for t in threads:
            t.start()
        if partition:
            time.sleep(0.3)
            lab.partition()
            time.sleep(1.0)
            lab.heal()
            report.partitions += 1
        for t in threads:
            t.join(timeout=400)
        lab.impair()  # a clean link to drain and sample
        pushed, asked = results.get("push", {}), results.get("req", {})
        if not pushed.get("ok") or pushed.get("error") or pushed.get("sent") != ROUND_MESSAGES:
            raise SoakFailure(f"round {report.rounds} ({faults}): push {pushed}")
        if not asked.get("ok") or asked["errors"] or asked["matched"] != ROUND_REQUESTS:
            raise SoakFailure(f"round {report.rounds} ({faults}): req {asked}")
        sent_total += ROUND_MESSAGES
        got = _drain(b, sent_total)
        if (got["received"], got["duplicates"], got["out_of_order"], got["gaps"]) != (
                sent_total, 0, 0, 0):
            raise SoakFailure(f"round {report.rounds} ({faults}): sink {got}")
        report.rounds += 1
        report.messages = sent_total
        report.requests += ROUND_REQUESTS
        sample: dict[str, Any] = {"t": time.monotonic() - start}
        for side, node in (("a", a), ("b", b)):
            stats = node.ok("stats")
            sample[side] = {k: stats[k] for k in ("rss", "anon", "shmem", "fds", "threads")}
        report.samples.append(sample)
        log(f"round {report.rounds} t={sample['t']:.0f}s faults={faults} "
            f"partition={partition} a={_mib(sample['a'])} b={_mib(sample['b'])}")
    _check_growth(report)
    served = b.ok("serve_stop", name="rep")
    if served["error_count"]:
        raise SoakFailure(f"the REP saw errors: {served}")
    return report


def _mib(sample: dict[str, int]) -> dict[str, float]:
    return {k: round(v / 2**20, 1) if k in ("rss", "anon", "shmem") else v
            for k, v in sample.items()}


def _drain(node: Any, count: int, stall: float = 30.0) -> dict[str, Any]:
    last, since = -1, time.monotonic()
    while True:
        stats: dict[str, Any] = node.ok("sink_stats", name="pull")
        if stats["received"] >= count:
            return stats
        if stats["received"] != last:
            last, since = stats["received"], time.monotonic()
        elif time.monotonic() - since > stall:
            return stats
        time.sleep(0.05)


def _check_growth(report: SoakReport) -> None:
    samples = report.samples
    if len(samples) < MIN_WARMUP_ROUNDS + 2:
        raise SoakFailure(f"only {len(samples)} rounds: too short to judge growth")
    warm = max(MIN_WARMUP_ROUNDS, int(len(samples) * WARMUP_FRACTION))
    after = samples[warm:]
    problems = []
    for side in ("a", "b"):
        report.growth[side] = {}
        for key, limit in LIMITS.items():
            grew = max(s[side][key] for s in after) - samples[warm][side][key]
            report.growth[side][key] = grew
            if grew > limit:
                problems.append(f"{side} {key} grew by {grew} after the warm-up (limit {limit})")
        report.slope_kib_per_min[side] = round(_slope(
            [s["t"] / 60 for s in after], [s[side]["anon"] / 1024 for s in after]), 1)
    if problems:
        raise SoakFailure("; ".join(problems) + f": {report.summary()}")
