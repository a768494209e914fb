"""Two hot-path rules are written in C and kept in the pure-Python core as well (the core is
tested without C, and sends what the native path does not):

* round-robin with credit: ``exon_lt_send`` over a socket's ring (exon_link_table.c) and
  ``exon.core.credits.pick_round_robin`` (``SocketCore.pick_destination``), and where the
  cursor goes when a link leaves: the ring's unlink (``exon_lt_detach``) and
  ``exon.core.credits.cursor_after_removal`` (``SocketCore``'s forget);
* PUB prefix matching: the PUB door's ``pub_matches`` (exon_fast_pubsub.c) and
  ``exon.core.pubsub.PrefixFilter.matches``.

Each parity test feeds both twins the same random input and compares every verdict; each
has a drifted-rule test showing the harness fails when one twin changes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exon.core.credits import cursor_after_removal, pick_round_robin
from exon.core.pubsub import PrefixFilter
from exon.native import fast_prefix_matches, ffi, lib
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import Publication

TERM = 64 * 1024
SLOT = 0

RoundRobin = Callable[[int, int, Callable[[int], bool]], tuple[int, int] | None]
Removal = Callable[[int, int, int], int]


class NativeRing:
    """A link table whose socket ``SLOT`` has ``len(limits)`` attached links, activated in
    order (its ring's order), all writing to one publication."""

    def __init__(self, directory: Path, limits: list[int]) -> None:
        self.log = LogBuffer.create(directory / "ring.logbuffer", term_length=TERM)
        self.pub = Publication.standalone(self.log)
        self.table = ffi.new("exon_link_table_t *")
        assert lib.exon_lt_init(self.table, 16, 2) == 0
        self.links: list[int] = []
        for n, limit in enumerate(limits):
            index = lib.exon_lt_reserve(self.table)
            rec = self.table.links[index]
            rec.limit = limit
            rec.source_tag = 7
            rec.destination_tag = 100 + n
            rec.peer_key = 0
            rec.socket_slot = SLOT
            rec.max_out = 64
            rec.max_in = 64
            assert lib.exon_lt_activate(self.table, index, self.pub._pub) == 0
            self.links.append(int(index))

    def send(self) -> int | None:
        """The position (in activation order) of the link the table sent on, or None."""
        rc = int(lib.exon_lt_send(self.table, SLOT, lib.EXON_LT_ROUND_ROBIN, b"m", 1))
        if rc == lib.EXON_LT_NO_CREDIT:
            return None
        assert rc >= 0, rc
        return self.links.index(rc)

    def grant(self, position: int, credit: int) -> None:
        self.table.links[self.links[position]].limit += credit

    def remove(self, position: int) -> None:
        """The link at ``position`` leaves the table (its socket's ring with it)."""
        lib.exon_lt_detach(self.table, self.links.pop(position))

    def close(self) -> None:
        for index in self.links:
            lib.exon_lt_detach(self.table, index)
        lib.exon_lt_close(self.table)
        self.pub.close()
        self.log.close()


@pytest.fixture
def ring_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Path]:
    base = tmp_path_factory.mktemp("ring")
    count = iter(range(1_000_000))

    def fresh() -> Path:
        path = base / f"run-{next(count)}"
        path.mkdir()
        return path

    return fresh


def run_round_robin(directory: Path, limits: list[int], ops: list[tuple[int, int]],
                    twin: RoundRobin, removal: Removal = cursor_after_removal) -> None:
    """Apply ``ops`` (``(-1, 0)``: send one message; ``(-2, k)``: link k leaves; ``(k, n)``:
    grant link k n credits; k is taken modulo the links left) to the native table and to
    the twins over a model of the same credits; assert that every send picks the same link
    (or none in both)."""
    native = NativeRing(directory, limits)
    limit, sent = list(limits), [0] * len(limits)
    cursor = 0
    try:
        for op_number, (link, credit) in enumerate(ops):
            if link == -2:
                if limit:
                    k = credit % len(limit)
                    native.remove(k)
                    cursor = removal(cursor, k, len(limit))
                    del limit[k], sent[k]
                continue
            if link >= 0:
                if limit:
                    k = link % len(limit)
                    native.grant(k, credit)
                    limit[k] += credit
                continue
            picked = twin(len(limit), cursor, lambda i: sent[i] < limit[i])
            expected = None
            if picked is not None:
                expected, cursor = picked
                sent[expected] += 1
            assert native.send() == expected, (op_number, limits, ops[: op_number + 1])
    finally:
        native.close()


RING_OPS = st.lists(st.one_of(st.just((-1, 0)),
                              st.tuples(st.integers(0, 5), st.integers(1, 3)),
                              st.tuples(st.just(-2), st.integers(0, 5))), max_size=60)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limits=st.lists(st.integers(0, 4), min_size=1, max_size=6), ops=RING_OPS)
def test_round_robin_native_and_core_agree(ring_dir: Callable[[], Path], limits: list[int],
                                           ops: list[tuple[int, int]]) -> None:
    run_round_robin(ring_dir(), limits, ops, pick_round_robin)


def test_round_robin_harness_detects_a_drifted_rule(ring_dir: Callable[[], Path]) -> None:
    """A twin that always starts at the first link (its cursor drifted) fails the check,
    while the real one passes the same input."""

    def from_the_start(count: int, cursor: int,
                       has_credit: Callable[[int], bool]) -> tuple[int, int] | None:
        return pick_round_robin(count, 0, has_credit)

    ops = [(-1, 0)] * 3
    run_round_robin(ring_dir(), [5, 5, 5], ops, pick_round_robin)
    with pytest.raises(AssertionError):
        run_round_robin(ring_dir(), [5, 5, 5], ops, from_the_start)


def test_removal_harness_detects_a_drifted_rule(ring_dir: Callable[[], Path]) -> None:
    """A cursor that keeps its index when a link before it leaves (the core's rule before
    the parity test covered removals: it skipped a link) fails the check, while the real
    one passes the same input."""

    def keeps_the_index(cursor: int, removed: int, count: int) -> int:
        return 0 if cursor >= count - 1 else cursor

    ops = [(-1, 0), (-1, 0), (-2, 0), (-1, 0)]  # sent on 0 and 1; 0 leaves: next is 2
    run_round_robin(ring_dir(), [5, 5, 5], ops, pick_round_robin)
    with pytest.raises(AssertionError):
        run_round_robin(ring_dir(), [5, 5, 5], ops, pick_round_robin, keeps_the_index)


# ---- PUB prefix matching -----------------------------------------------------------------

SMALL_BYTES = st.lists(st.sampled_from(b"ab\x00"), max_size=4).map(bytes)
FILTER_OPS = st.lists(st.tuples(st.booleans(), SMALL_BYTES), max_size=12)


def build_filter(ops: list[tuple[bool, bytes]]) -> PrefixFilter:
    f = PrefixFilter()
    for add, prefix in ops:
        if add:
            f.add(prefix)
        else:
            f.discard(prefix)
    return f


def check_prefix_parity(f: PrefixFilter, data: bytes,
                        twin: Callable[[PrefixFilter, bytes], bool]) -> None:
    """The PUB door's rule (over the filter in the form the door gets it) and ``twin``
    agree on ``data``."""
    assert bool(fast_prefix_matches(f.as_tuple(), data)) is twin(f, data), (f.prefixes(), data)


@settings(max_examples=300, deadline=None)
@given(ops=FILTER_OPS, data=st.lists(SMALL_BYTES, min_size=1, max_size=6))
def test_prefix_rule_native_and_core_agree(ops: list[tuple[bool, bytes]],
                                          data: list[bytes]) -> None:
    f = build_filter(ops)
    for message in data:
        check_prefix_parity(f, message, PrefixFilter.matches)


def test_prefix_harness_detects_a_drifted_rule() -> None:
    """A twin that forgot the empty prefix (everything) fails the check."""

    def forgets_everything(f: PrefixFilter, data: bytes) -> bool:
        return any(p and data.startswith(p) for p in f.prefixes())

    f = build_filter([(True, b""), (True, b"ab")])
    check_prefix_parity(f, b"zz", PrefixFilter.matches)
    with pytest.raises(AssertionError):
        check_prefix_parity(f, b"zz", forgets_everything)


def test_prefix_rule_rejects_what_is_no_prefix_tuple() -> None:
    with pytest.raises(TypeError):
        fast_prefix_matches(["a"], b"a")
    with pytest.raises(TypeError):
        fast_prefix_matches(("a",), b"a")
