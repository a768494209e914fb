"""Fuzz every decoder (tests/fuzz/targets.py): decode, or raise the typed protocol error;
never another exception, and never an allocation sized by an attacker's length field.

Budgets are hypothesis profiles picked by ``EXON_FUZZ_PROFILE``: ``ci`` (the default, a
short pass) or ``deep`` (``EXON_FUZZ_EXAMPLES`` examples per decoder, 100,000 unless set).
For about a million inputs per decoder against an ASan/UBSan build of the C core, run
``tools/fuzz_campaign.py``.
"""

from __future__ import annotations

import os
import random
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import TARGETS, Target, mutate

settings.register_profile("ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=int(os.environ.get("EXON_FUZZ_EXAMPLES", "100000")),
                          deadline=None, suppress_health_check=list(HealthCheck))
PROFILE = settings.get_profile(os.environ.get("EXON_FUZZ_PROFILE", "ci"))

#: what one decode may allocate beyond a small constant: a few copies of its input (frames,
#: payload bytes, records), never what a length field inside the input claims
ALLOWANCE = 16
CONSTANT = 256 * 1024


def _inputs(target: Target) -> st.SearchStrategy[bytes]:
    seeds = target.seeds()
    mutated = st.randoms(use_true_random=False).map(lambda rng: mutate(rng, seeds))
    return st.one_of(st.sampled_from(seeds), mutated, st.binary(max_size=512))


def _check(target: Target, data: bytes) -> str:
    """Run one input: "ok" or "refused" (its typed error); any other exception propagates.
    The Python allocations of the decode are bounded by the input's size (traced around
    the decode only: tracing hypothesis as well would slow it several times)."""
    tracemalloc.start()
    try:
        target.run(data)
        outcome = "ok"
    except target.expected:
        outcome = "refused"
    finally:
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    if target.python_allocates:
        assert peak <= CONSTANT + ALLOWANCE * len(data), (
            f"{target.name}: decoding {len(data)} bytes allocated {peak} bytes: {data.hex()}")
    return outcome


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_decoder_decodes_or_raises_its_typed_error(name: str) -> None:
    target = TARGETS[name]

    @settings(PROFILE)
    @given(_inputs(target))
    def fuzz(data: bytes) -> None:
        _check(target, data)

    fuzz()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeds_are_valid_inputs(name: str) -> None:
    """The seeds decode: a mutator that starts from garbage finds little."""
    target = TARGETS[name]
    for seed in target.seeds():
        target.run(seed)


def test_the_mutator_reaches_both_outcomes() -> None:
    """Half-valid inputs: every target sees accepted and refused inputs from the mutator
    (a mutator that only made garbage would test the first check of each decoder)."""
    rng = random.Random(13)
    for target in TARGETS.values():
        if not target.expected:
            continue
        seeds = target.seeds()
        outcomes = set()
        for _ in range(400):
            data = mutate(rng, seeds)
            if data in seeds:
                continue  # a draw that changed nothing is no mutation
            try:
                target.run(data)
                outcomes.add("ok")
            except target.expected:
                outcomes.add("refused")
        assert outcomes == ({"refused"} if target.authenticated else {"ok", "refused"}), (
            target.name)


def test_a_length_field_cannot_make_a_decoder_allocate() -> None:
    """Lengths claimed inside the input: an exon frame's remaining length of 4 GiB, an Aeron
    frame_length of 2 GiB, an archive record of 1 GiB. Each is refused, cheaply."""
    import struct

    from exon.archive import format as AF

    exon_frame = bytearray(TARGETS["exon_frames"].seeds()[0])
    struct.pack_into("<I", exon_frame, 4, 0xFFFF_FFFF)
    aeron = bytearray(TARGETS["aeron_frames"].seeds()[0])
    struct.pack_into("<i", aeron, 0, (1 << 31) - 1)
    record = bytearray(TARGETS["archive_records"].seeds()[0])
    struct.pack_into("<i", record, AF.FRAME_LENGTH_OFFSET, 1 << 30)
    for name, data in (("exon_frames", exon_frame), ("aeron_frames", aeron),
                       ("archive_records", record), ("archive_native", record)):
        assert _check(TARGETS[name], bytes(data)) == "refused", name


def test_the_allocation_bound_catches_a_decoder_that_trusts_a_length() -> None:
    """The check bites: a decoder that allocates what the input's first field claims."""
    import struct

    def trusting(data: bytes) -> None:
        (claimed,) = struct.unpack_from("<I", data, 0)
        bytearray(claimed)

    target = Target("trusting", lambda: [b""], trusting, ())
    assert _check(target, struct.pack("<I", 1024)) == "ok"
    with pytest.raises(AssertionError, match="allocated"):
        _check(target, struct.pack("<I", 64 << 20))
