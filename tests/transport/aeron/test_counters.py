"""Counters manager and reader (exon_counters.c, counters.py)."""

from __future__ import annotations

import pytest

from exon.native import ffi, lib
from exon.transport.aeron import counters as pc

N = 16


class Region:
    def __init__(self, n: int = N, reuse_ms: int = 1000) -> None:
        self.meta = ffi.new("uint64_t[]", n * pc.METADATA_LENGTH // 8)
        self.values = ffi.new("uint64_t[]", n * pc.VALUE_LENGTH // 8)
        self.c = ffi.new("exon_counters_t *")
        self.n = n
        assert (
            lib.exon_counters_init(
                self.c,
                self.meta,
                n * pc.METADATA_LENGTH,
                self.values,
                n * pc.VALUE_LENGTH,
                reuse_ms,
            )
            == 0
        )
        self.reader = pc.CountersReader(
            ffi.cast("uint8_t *", self.meta),
            n * pc.METADATA_LENGTH,
            ffi.cast("uint8_t *", self.values),
            n * pc.VALUE_LENGTH,
            keepalive=self,
        )

    def alloc(
        self, type_id: int, label: str, *, key: bytes = b"", reg: int = 0, owner: int = 0, now=0
    ) -> int:
        raw = label.encode()
        return lib.exon_counters_allocate(
            self.c, type_id, key, len(key), raw, len(raw), reg, owner, now
        )


def test_python_constants_match_c() -> None:
    assert pc.METADATA_LENGTH == lib.EXON_COUNTER_METADATA_LENGTH
    assert pc.VALUE_LENGTH == lib.EXON_COUNTER_VALUE_LENGTH
    assert pc.MAX_KEY_LENGTH == lib.EXON_COUNTER_MAX_KEY_LENGTH
    assert pc.MAX_LABEL_LENGTH == lib.EXON_COUNTER_MAX_LABEL_LENGTH
    assert pc.STATE_RECLAIMED == lib.EXON_COUNTER_STATE_RECLAIMED
    for t in pc.CounterType:
        assert getattr(lib, f"EXON_COUNTER_TYPE_{t.name}") == t.value
    assert len(pc.SystemCounter) == lib.EXON_SYSTEM_COUNTER_COUNT
    for s in pc.SystemCounter:
        assert getattr(lib, f"EXON_SYSTEM_COUNTER_{s.name}") == s.value
        assert s.label
    assert pc.PUB_POS.short_name == "pub-pos"
    assert pc.type_name(12345) == "type-12345"


def test_allocate_labels_keys_values_snapshot() -> None:
    r = Region()
    a = r.alloc(pc.PUB_POS, "pub-pos: 7 1001 aeron:ipc", key=b"\x07\x00", reg=1001, owner=5)
    b = r.alloc(pc.SUB_POS, "sub-pos: 9", reg=1002, owner=6)
    assert (a, b) == (0, 1)
    lib.exon_counter_set(r.c, a, 4096)
    assert lib.exon_counter_add(r.c, b, 10) == 0
    assert lib.exon_counter_add(r.c, b, 5) == 10
    assert lib.exon_counter_propose_max(r.c, b, 3) is False
    assert lib.exon_counter_propose_max(r.c, b, 30) is True
    snap = r.reader.snapshot()
    assert [(c.id, c.type_name, c.label, c.value, c.registration_id, c.owner_id) for c in snap] == [
        (0, "pub-pos", "pub-pos: 7 1001 aeron:ipc", 4096, 1001, 5),
        (1, "sub-pos", "sub-pos: 9", 30, 1002, 6),
    ]
    assert r.reader.key(a)[:2] == b"\x07\x00"
    assert r.reader.key(a)[2:] == bytes(110)
    assert r.reader.find(type_id=pc.SUB_POS) == [snap[1]]
    addr = lib.exon_counter_addr(r.c, a)
    assert addr[0] == 4096


def test_long_label_truncated_and_bad_key_rejected() -> None:
    r = Region()
    cid = r.alloc(1, "x" * 1000)
    assert r.reader.label(cid) == "x" * pc.MAX_LABEL_LENGTH
    assert r.alloc(1, "k", key=b"k" * (pc.MAX_KEY_LENGTH + 1)) == lib.EXON_E_ARGUMENT


def test_free_then_reuse_only_after_the_deadline() -> None:
    r = Region(reuse_ms=1000)
    ids = [r.alloc(1, f"c{i}", now=0) for i in range(3)]
    assert ids == [0, 1, 2]
    lib.exon_counter_set(r.c, 1, 99)
    assert lib.exon_counters_free(r.c, 1, 5000) == 0
    assert lib.exon_counters_free(r.c, 1, 5000) == lib.EXON_E_ARGUMENT  # not allocated now
    assert r.reader.state(1) == pc.STATE_RECLAIMED
    assert lib.exon_counters_free_for_reuse_deadline(r.c, 1) == 6000
    assert [c.id for c in r.reader.snapshot()] == [0, 2]
    assert r.alloc(1, "early", now=5999) == 3  # too early: fresh id
    reused = r.alloc(2, "late", now=6000)
    assert reused == 1
    assert r.reader.counter(1).value == 0  # value reset on reuse
    assert r.reader.label(1) == "late"


def test_exhaustion_is_no_space() -> None:
    r = Region(n=4)
    assert [r.alloc(1, "c") for _ in range(4)] == [0, 1, 2, 3]
    assert r.alloc(1, "c") == lib.EXON_E_NO_SPACE


def test_free_by_owner_frees_only_that_owner() -> None:
    r = Region()
    for i in range(6):
        r.alloc(pc.PUB_LMT, f"c{i}", owner=100 + i % 2)
    assert lib.exon_counters_free_by_owner(r.c, 101, 0) == 3
    assert [c.owner_id for c in r.reader.snapshot()] == [100, 100, 100]
    assert lib.exon_counters_free_by_owner(r.c, 101, 0) == 0


def test_system_counters_fixed_ids_and_refuse_twice() -> None:
    r = Region(n=64)
    assert lib.exon_counters_allocate_system(r.c, 0) == len(pc.SystemCounter)
    snap = r.reader.snapshot()
    assert [c.id for c in snap] == [s.value for s in pc.SystemCounter]
    assert all(c.type_id == pc.CounterType.SYSTEM for c in snap)
    assert snap[pc.SystemCounter.ERRORS].label == "Errors"
    assert snap[pc.SystemCounter.CLIENT_TIMEOUTS].label == "Client liveness timeouts"
    assert lib.exon_counters_allocate_system(r.c, 0) == lib.EXON_E_STATE
    assert r.alloc(pc.PUB_POS, "next") == len(pc.SystemCounter)


def test_reattach_finds_high_water_mark() -> None:
    r = Region()
    for i in range(5):
        r.alloc(1, f"c{i}")
    again = ffi.new("exon_counters_t *")
    assert lib.exon_counters_init(again, r.meta, N * 512, r.values, N * 128, 0) == 0
    assert again.id_high_water_mark == 5


def test_reader_rejects_bad_ids() -> None:
    r = Region()
    with pytest.raises(IndexError):
        r.reader.value(N)
    with pytest.raises(IndexError):
        r.reader.counter(-1)
    assert lib.exon_counter_get(r.c, N) == 0
    assert lib.exon_counter_addr(r.c, N) == ffi.NULL


def test_a_doorbell_counter_shows_its_wake_ups_not_its_armed_flag() -> None:
    r = Region()
    bell = r.alloc(pc.CounterType.DOORBELL, "doorbell: 1")
    word = lib.exon_doorbell_word(ffi.cast("uint8_t *", r.values), bell)
    lib.exon_doorbell_ring(word)
    lib.exon_doorbell_arm(word)  # a reader asleep: the high half of the value is set
    assert lib.exon_counter_get(r.c, bell) == (1 << 32) + 1
    assert r.reader.counter(bell).value == 1
