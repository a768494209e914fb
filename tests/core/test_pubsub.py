"""PUB/SUB payload codecs and the publisher's prefix filter (docs/protocol.md 2.19)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exon.core.pubsub import (
    MAX_PREFIX,
    MESSAGE,
    PrefixFilter,
    PubKind,
    SubKind,
    decode_published,
    decode_subscription,
    encode_dropped,
    encode_subscription,
)
from exon.errors import FrameDecodeError


def test_layouts() -> None:
    assert MESSAGE + b"hi" == b"\x00hi"
    assert encode_dropped(5) == b"\x01" + (5).to_bytes(8, "little")
    assert encode_subscription(SubKind.SUBSCRIBE, b"ab") == b"\x01ab"
    assert encode_subscription(SubKind.UNSUBSCRIBE, b"") == b"\x02"


@given(st.binary(max_size=64))
def test_published_round_trip(data: bytes) -> None:
    assert decode_published(MESSAGE + data) == (PubKind.MESSAGE, data)


@given(st.integers(0, 2**64 - 1))
def test_dropped_round_trip(count: int) -> None:
    assert decode_published(encode_dropped(count)) == (PubKind.DROPPED, count)


@given(st.sampled_from(list(SubKind)), st.binary(max_size=64))
def test_subscription_round_trip(kind: SubKind, prefix: bytes) -> None:
    assert decode_subscription(encode_subscription(kind, prefix)) == (kind, prefix)


@pytest.mark.parametrize("payload", [b"", b"\x02", b"\x01\x00", b"\x01" + bytes(9), b"\xff"])
def test_bad_published_payloads(payload: bytes) -> None:
    with pytest.raises(FrameDecodeError):
        decode_published(payload)


@pytest.mark.parametrize("payload", [b"", b"\x00abc", b"\x03", b"\x01" + bytes(MAX_PREFIX + 1)])
def test_bad_subscription_payloads(payload: bytes) -> None:
    with pytest.raises(FrameDecodeError):
        decode_subscription(payload)


def test_encode_refuses_a_long_prefix() -> None:
    with pytest.raises(ValueError, match="at most"):
        encode_subscription(SubKind.SUBSCRIBE, bytes(MAX_PREFIX + 1))


@given(st.binary(max_size=32))
def test_any_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    for decode in (decode_published, decode_subscription):
        try:
            decode(data)
        except FrameDecodeError:
            pass


@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=3)), max_size=20),
       st.lists(st.binary(max_size=5), max_size=20))
def test_prefix_filter_matches_like_startswith(ops: list[tuple[bool, bytes]],
                                               messages: list[bytes]) -> None:
    f = PrefixFilter()
    model: set[bytes] = set()
    for add, prefix in ops:
        if add:
            f.add(prefix)
            model.add(prefix)
        else:
            f.discard(prefix)
            model.discard(prefix)
    assert len(f) == len(model)
    for m in messages:
        assert f.matches(m) == any(m.startswith(p) for p in model)
