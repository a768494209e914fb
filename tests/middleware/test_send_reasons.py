"""The native send says why it did not send (exon_link_table.h): one reason per cause, the
guard (``exon_lt_hold_reason``) decided in C only, and the Python names
(``exon.middleware.fastpath.SendReason``, ``HOLD_*``) read from the same header."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exon.middleware.fastpath import (
    HOLD_BACKLOG,
    HOLD_CLOSED,
    HOLD_COOKIE,
    LINK_NONE,
    OFFER_SPINS,
    OFFER_YIELD_AFTER,
    RETRY,
    ROUND_ROBIN,
    SendReason,
)
from exon.native import fast_link_calls, fast_link_send_many, ffi, lib
from exon.transport.aeron import publication as aeron_offer
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import Publication

MAX_OUT = 32


class OneLink:
    """A table with one attached link (slot 0) with ``limit`` credits."""

    def __init__(self, directory: Path, limit: int) -> None:
        self.log = LogBuffer.create(directory / "reasons.logbuffer", term_length=64 * 1024)
        self.pub = Publication.standalone(self.log)
        self.table = ffi.new("exon_link_table_t *")
        assert lib.exon_lt_init(self.table, 4, 2) == 0
        self.index = int(lib.exon_lt_reserve(self.table))
        rec = self.table.links[self.index]
        rec.limit = limit
        rec.destination_tag = 9
        rec.peer_key = 0
        rec.socket_slot = 0
        rec.max_out = MAX_OUT
        assert lib.exon_lt_activate(self.table, self.index, self.pub._pub) == 0
        self.rec = rec
        self.send, _ = fast_link_calls(self.table)
        self.send_many = fast_link_send_many(self.table)

    def close(self) -> None:
        lib.exon_lt_detach(self.table, self.index)
        lib.exon_lt_close(self.table)
        self.pub.close()
        self.log.close()


@pytest.fixture
def one_link(tmp_path: Path) -> Iterator[OneLink]:
    link = OneLink(tmp_path, limit=2)
    yield link
    link.close()


def test_reasons_are_distinct_and_below_every_link_index() -> None:
    values = [int(r) for r in SendReason]
    assert len(set(values)) == len(values)
    assert all(v < 0 for v in values)
    assert {SendReason.BACK_PRESSURED, SendReason.ADMIN_ACTION} == RETRY
    # Aeron's offer outcomes keep their values: an offer's result passes through as it is
    assert [SendReason.NOT_CONNECTED, SendReason.BACK_PRESSURED, SendReason.ADMIN_ACTION,
            SendReason.PUB_CLOSED, SendReason.MAX_POSITION] == [
        aeron_offer.NOT_CONNECTED, aeron_offer.BACK_PRESSURED, aeron_offer.ADMIN_ACTION,
        aeron_offer.CLOSED, aeron_offer.MAX_POSITION_EXCEEDED]
    assert 0 < OFFER_YIELD_AFTER < OFFER_SPINS


@pytest.mark.parametrize(("hold", "reason"), [
    (HOLD_COOKIE, SendReason.COOKIE),
    (HOLD_BACKLOG, SendReason.BACKLOG),
    (HOLD_CLOSED, SendReason.CLOSED),
    (HOLD_COOKIE | HOLD_BACKLOG, SendReason.BACKLOG),
    (HOLD_COOKIE | HOLD_BACKLOG | HOLD_CLOSED, SendReason.CLOSED),
])
def test_a_held_message_gets_its_reason_and_spends_nothing(one_link: OneLink, hold: int,
                                                          reason: SendReason) -> None:
    assert lib.exon_lt_hold_reason(hold) == reason
    assert one_link.send(0, ROUND_ROBIN, b"m", hold) == reason
    assert lib.exon_lt_send_held(one_link.table, 0, ROUND_ROBIN, hold, b"m", 1) == reason
    assert one_link.send_many(0, ROUND_ROBIN, [b"a", b"b"], 0, hold) == 0
    assert one_link.rec.sent == 0


def test_each_cause_of_the_table_has_its_reason(one_link: OneLink) -> None:
    assert lib.exon_lt_hold_reason(0) == 0
    assert one_link.send(0, LINK_NONE, b"m") == SendReason.NO_LINK
    assert one_link.send(1, ROUND_ROBIN, b"m") == SendReason.NO_CREDIT  # a slot, no links
    assert one_link.send(-1, ROUND_ROBIN, b"m") == SendReason.NO_LINK  # no slot
    assert one_link.send(1, one_link.index, b"m") == SendReason.NO_LINK  # another's link
    assert one_link.send(0, ROUND_ROBIN, b"x" * (MAX_OUT + 1)) == SendReason.TOO_LARGE
    assert one_link.send(0, ROUND_ROBIN, b"m", 0) == one_link.index
    assert one_link.send(0, one_link.index, b"m") == one_link.index
    assert one_link.send(0, ROUND_ROBIN, b"m") == SendReason.NO_CREDIT
    assert one_link.send(0, one_link.index, b"m") == SendReason.NO_CREDIT
    assert one_link.rec.sent == 2


def test_back_pressure_is_a_reason_to_retry(one_link: OneLink) -> None:
    one_link.pub.position_limit = 0  # the log is full for this publication
    rc: Any = one_link.send(0, ROUND_ROBIN, b"m")
    assert rc == SendReason.NOT_CONNECTED  # no subscriber: no reason to offer again
    assert rc not in RETRY
    one_link.log.is_connected = True
    rc = one_link.send(0, ROUND_ROBIN, b"m")
    assert rc == SendReason.BACK_PRESSURED
    assert rc in RETRY
    assert one_link.rec.sent == 0


def test_a_send_after_the_table_closed_finds_no_socket(tmp_path: Path) -> None:
    link = OneLink(tmp_path, limit=1)
    lib.exon_lt_close(link.table)
    try:
        assert link.send(0, ROUND_ROBIN, b"m") == SendReason.NO_LINK
    finally:
        link.pub.close()
        link.log.close()


def test_send_rejects_a_bad_hold() -> None:
    table = ffi.new("exon_link_table_t *")
    assert lib.exon_lt_init(table, 2, 1) == 0
    try:
        send, _ = fast_link_calls(table)
        with pytest.raises(TypeError):
            send(0, ROUND_ROBIN, b"m", 0, 0)
        with pytest.raises(OverflowError):
            send(0, ROUND_ROBIN, b"m", 1 << 40)
    finally:
        lib.exon_lt_close(table)
