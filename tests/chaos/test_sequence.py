"""The chaos agents' sequence checker (no root needed): exact counts, and memory that does
not grow with the messages taken (issue #13: the soak's node b grew 440 KiB/min because
its checker kept one byte per sequence ever received)."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from tests.chaos.sequence import SEQ, SequenceChecker

INC = 0x1234


def _feed(checker: SequenceChecker, seqs: list[int] | range, inc: int = INC) -> None:
    for seq in seqs:
        checker.take(SEQ.pack(inc, seq))


def _reference(seqs: list[int]) -> dict[str, int]:
    """The checker's rules with a set of every sequence seen (unbounded, obviously right)."""
    seen: set[int] = set()
    first, nxt = seqs[0], seqs[0]
    out = {"duplicates": 0, "out_of_order": 0, "gaps": 0}
    for seq in seqs:
        if seq > nxt:
            out["gaps"] += seq - nxt
        if seq in seen:
            out["duplicates"] += 1
        elif seq < nxt or seq < first:
            out["out_of_order"] += 1
        if seq >= first:
            seen.add(seq)
        nxt = max(nxt, seq + 1)
    out["distinct"] = len(seen)
    return out


def test_in_order_stream_holds_no_memory() -> None:
    """100 000 messages in order: the traced heap stays put (the old bitmap grew by a byte
    a message: 100 KB here, 8 MB in the 20-minute soak)."""
    checker = SequenceChecker()
    _feed(checker, range(1000))  # the stream's record exists
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _feed(checker, range(1000, 100_000))
        grew = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grew < 16 << 10
    assert checker.footprint() == 0
    stats = checker.stats()
    assert (stats["received"], stats["duplicates"], stats["out_of_order"], stats["gaps"]) == (
        100_000, 0, 0, 0)
    assert stats["incarnations"] == [[INC, 100_000, 100_000, 0, 99_999, 100_000]]


def test_reordered_and_duplicated() -> None:
    checker = SequenceChecker()
    _feed(checker, [0, 1, 2, 5, 3, 4, 4, 1, 6, 6])
    stats = checker.stats()
    assert (stats["duplicates"], stats["out_of_order"], stats["gaps"]) == (3, 2, 2)
    assert stats["incarnations"] == [[INC, 10, 7, 0, 6, 7]]
    assert checker.footprint() == 0  # every hole closed: nothing held


@pytest.mark.parametrize("seed", range(5))
def test_matches_the_unbounded_reference(seed: int) -> None:
    """Random loss, duplication and reordering: the same counts as a set of everything."""
    rng = random.Random(seed)
    seqs = []
    for seq in range(20_000):
        if rng.random() < 0.02:
            continue  # lost
        seqs.append(seq)
        if rng.random() < 0.03:
            seqs.append(seq - rng.randrange(0, 50))  # a duplicate, maybe of an older one
    for _ in range(400):  # local reordering
        i = rng.randrange(len(seqs) - 10)
        j = i + rng.randrange(1, 10)
        seqs[i], seqs[j] = seqs[j], seqs[i]
    seqs = [s for s in seqs if s >= 0]
    checker = SequenceChecker()
    _feed(checker, seqs)
    stats = checker.stats()
    want = _reference(seqs)
    assert {k: stats[k] for k in ("duplicates", "out_of_order", "gaps")} == {
        k: want[k] for k in ("duplicates", "out_of_order", "gaps")}
    assert stats["incarnations"][0][5] == want["distinct"]
    assert stats["stale"] == 0
    assert checker.footprint() <= 20_000  # the lost ones keep holes open: bounded by them


def test_a_hole_held_open_slides_out_of_the_window() -> None:
    """A sequence that never comes cannot make the bitmap grow past the window; what
    arrives from behind the slid window is counted ``stale``."""
    checker = SequenceChecker(window=64)
    _feed(checker, [0, *range(2, 10_000)])  # 1 never comes
    assert checker.footprint() <= 64
    assert checker.gaps == 1
    _feed(checker, [1])  # from behind the slide: duplicate or late cannot be told
    assert (checker.stale, checker.duplicates) == (1, 0)
    _feed(checker, [5000, 9999])  # seen after the slide: still told apart
    assert (checker.stale, checker.duplicates) == (1, 2)
    assert checker.stats()["incarnations"][0][5] == 9999  # distinct: all but 1


def test_incarnations_and_malformed() -> None:
    checker = SequenceChecker()
    _feed(checker, range(5), inc=1)
    _feed(checker, range(3), inc=2)
    _feed(checker, [5], inc=1)  # the old one, after the new one appeared
    checker.take(b"short")
    stats = checker.stats()
    assert (stats["from_older"], stats["malformed"], stats["received"]) == (1, 1, 9)
    assert [row[:2] for row in stats["incarnations"]] == [[1, 6], [2, 3]]
    with pytest.raises(ValueError, match="window"):
        SequenceChecker(window=0)
