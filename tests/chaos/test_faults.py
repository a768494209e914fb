"""Each fault of the chaos lab does what it says, in both directions, on plain UDP
(numbered datagrams counted at the far side, :mod:`tests.chaos.probe`)."""

from __future__ import annotations

import pytest

from tests.chaos.netns import PEER, Lab

pytestmark = pytest.mark.netns

COUNT = 3000
SIDES = ("a", "b")  # a->b, then b->a


def test_clean_link_delivers_everything_in_order(lab: Lab) -> None:
    for src in SIDES:
        got = lab.probe(src, COUNT)
        print(f"clean {src}->{PEER[src]}: {got}")
        assert got["received"] == got["distinct"] == COUNT
        assert got["inversions"] == 0


def test_loss_drops_about_the_share_asked(nft_lab: Lab) -> None:
    nft_lab.impair(loss=20)
    for src in SIDES:
        got = nft_lab.probe(src, COUNT)
        dropped = nft_lab.nft_counters(PEER[src])["input"]
        print(f"loss 20% {src}->{PEER[src]}: {got}, nft dropped {dropped}")
        assert got["distinct"] == got["received"]
        # binomial(3000, 0.2): sd 22; the bounds are about 7 sd out
        assert 0.15 * COUNT < COUNT - got["received"] < 0.25 * COUNT
        assert dropped == COUNT - got["received"]


def test_duplication_repeats_about_the_share_asked(nft_lab: Lab) -> None:
    nft_lab.impair(dup=5)
    for src in SIDES:
        got = nft_lab.probe(src, COUNT)
        counts = nft_lab.nft_counters(src)
        duplicated, passed = counts["output"], counts["udp_out"]
        print(f"dup 5% {src}->{PEER[src]}: {got}, nft duplicated {duplicated} "
              f"of {passed} datagrams through the output hook")
        assert got["distinct"] == COUNT
        assert got["received"] - COUNT <= duplicated  # a copy may be lost on the way
        # copies pass the output hook too (most of them; and may be copied again), so the
        # share is of every datagram that passed, about 3,160 here (a share of COUNT alone
        # came to 5.3% on average, once 7.2%); binomial sd 0.4%: the bounds are 5 sd out
        assert COUNT <= passed <= COUNT + duplicated
        assert 0.03 * passed < duplicated < 0.07 * passed


def test_delay_and_reorder(lab: Lab) -> None:
    lab.impair(delay_ms=10, reorder=25, seed=7)
    for src in SIDES:
        before = lab.relay_stats()["ab" if src == "a" else "ba"]
        got = lab.probe(src, COUNT)
        after = lab.relay_stats()["ab" if src == "a" else "ba"]
        print(f"delay 10 ms, reorder 25% {src}->{PEER[src]}: {got}, relay {after}")
        assert got["received"] == got["distinct"] == COUNT
        early = after["early"] - before["early"]  # sent on at once: 25% of them
        held = after["delayed"] - before["delayed"]
        assert early + held == COUNT
        assert 0.20 * COUNT < early < 0.30 * COUNT
        assert got["over_9ms"] >= held  # a held one never arrives before its 10 ms
        assert 0 < got["under_5ms"] <= early
        assert got["inversions"] > 0.1 * COUNT  # an early one overtakes those held


def test_partition_drops_everything_until_healed(nft_lab: Lab) -> None:
    nft_lab.partition()
    during = [nft_lab.probe(src, 500) for src in SIDES]
    dropped = [nft_lab.nft_counters(PEER[src], "chaos_partition")["input"] for src in SIDES]
    nft_lab.heal()
    after = [nft_lab.probe(src, 500) for src in SIDES]
    print(f"partition: {during}, healed: {after}")
    assert [d["received"] for d in during] == [0, 0]
    assert dropped == [500, 500]  # they were sent, and the partition took them
    assert [d["received"] for d in after] == [500, 500]
