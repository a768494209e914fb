"""Property: any sequence of offer sizes reads back identically (hypothesis)."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import (
    ADMIN_ACTION,
    BACK_PRESSURED,
    ExclusivePublication,
    Publication,
)

TERM = 64 * 1024
MAX = TERM // 8

sizes = st.lists(
    st.one_of(st.integers(0, 200), st.integers(0, MAX), st.sampled_from([0, 1, MAX, MAX - 1])),
    max_size=120,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=sizes,
    mtu=st.sampled_from([64, 96, 1408, 8192]),
    initial_term_id=st.integers(-(2**31), 2**31 - 1),
    exclusive=st.booleans(),
    fragment_limit=st.integers(1, 64),
    window=st.sampled_from([0, 4096, 20000]),
)
def test_any_offer_sizes_read_back_identically(
    sizes: list[int], mtu: int, initial_term_id: int, exclusive: bool, fragment_limit: int,
    window: int,
) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = LogBuffer.create(f"{d}/p.logbuffer", term_length=TERM, mtu=mtu,
                               initial_term_id=initial_term_id, is_connected=True)
        try:
            cls = ExclusivePublication if exclusive else Publication
            pub = cls.standalone(log, limit=window or TERM // 2)
            img = Image.standalone(log)
            received: list[bytes] = []
            sent: list[bytes] = []

            def drain() -> None:
                received.extend(img.poll_messages(fragment_limit))
                log.update_limit(pub._limit, img.position, window)

            for i, size in enumerate(sizes):
                data = bytes([i % 256]) * size
                sent.append(data)
                for _ in range(100_000):
                    rc = pub.offer(data)
                    if rc > 0:
                        break
                    assert rc in (BACK_PRESSURED, ADMIN_ACTION)
                    drain()
                else:
                    raise AssertionError("offer never accepted")
            for _ in range(100_000):
                if img.position == pub.position:
                    break
                drain()
            assert received == sent
            assert img.position == pub.position == log.producer_position
        finally:
            log.close()
