"""The GIL-holding offer door (exon.native._fast) behaves exactly like the cffi path."""

from __future__ import annotations

import gc
import weakref

import pytest

from exon import errors
from exon.native import _fast, fast_offer, ffi, lib
from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import Publication

pytestmark = pytest.mark.skipif(_fast is None, reason="exon.native._fast was not built")


@pytest.fixture
def log(tmp_path):
    log = LogBuffer.create(tmp_path / "fast.logbuffer", term_length=64 * 1024, initial_term_id=7,
                           session_id=1, stream_id=2, correlation_id=3, is_connected=True)
    yield log
    log.close()


def test_publications_use_the_fast_door(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    assert type(pub.offer).__name__ == "Offer"


def test_fast_and_cffi_offers_write_the_same_stream(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    image = Image.standalone(log)
    cffi_offer = lib.exon_publication_offer
    sent = []
    for i in range(50):
        data = bytes([i]) * (i * 7)
        if i % 2:
            assert pub.offer(data, reserved_value=i) > 0
        else:
            assert cffi_offer(pub.cdata, data, len(data), i) > 0
        sent.append(data)
    assert pub.offer(bytearray(b"ba")) > 0
    assert pub.offer(memoryview(b"mv")) > 0
    sent += [b"ba", b"mv"]
    assert [bytes(m) for m in image.poll_messages(100)] == sent


@pytest.mark.parametrize(("args", "kwargs"), [((), {}), ((b"x", 1, 2), {}), ((b"x",), {"x": 1}),
                                              ((b"x", 1), {"reserved_value": 2})])
def test_bad_arguments_raise_type_error(log: LogBuffer, args, kwargs) -> None:
    pub = Publication.standalone(log)
    with pytest.raises(TypeError):
        pub.offer(*args, **kwargs)
    with pytest.raises(TypeError):
        pub.offer(12345)


def test_errors_become_typed_exceptions_and_outcomes_stay_codes(log: LogBuffer) -> None:
    pub = Publication.standalone(log, limit=0)
    assert pub.offer(b"x") == -2  # BACK_PRESSURED: an outcome, not an error
    with pytest.raises(errors.MessageTooLarge):
        pub.offer(b"x" * (pub.max_message_length + 1))
    pub.close()
    assert pub.offer(b"x") == -4  # CLOSED


def test_the_offer_callable_keeps_its_publication_alive(log: LogBuffer) -> None:
    pub = Publication.standalone(log)
    offer = pub.offer
    del pub
    gc.collect()
    assert offer(b"still here") > 0


def test_the_offer_callable_keeps_what_its_publication_points_to(tmp_path) -> None:
    # the C struct points to the position-limit cell and the log's handle: an offer callable
    # that outlived its publication read them freed (ASan: heap-use-after-free)
    log = LogBuffer.create(tmp_path / "kept.logbuffer", term_length=64 * 1024,
                           is_connected=True)
    log_ref = weakref.ref(log)
    pub = Publication.standalone(log, limit=0)
    offer = pub.offer
    del pub, log
    gc.collect()
    assert log_ref() is not None  # still held by the callable
    for _ in range(100):  # the freed cell would soon be reused by other objects
        ffi.new("int64_t[16]", [1 << 40] * 16)
    assert offer(b"x") == -2  # BACK_PRESSURED: the limit cell (0) is still the one read
    del offer
    gc.collect()
    assert log_ref() is None  # and released with it


def test_fast_offer_validates_its_inputs() -> None:
    with pytest.raises(ValueError):
        _fast.Offer(0, lambda rc: None, None)
    with pytest.raises(ValueError):
        _fast.Offer(1, "not callable", None)
    assert fast_offer(ffi.new("exon_publication_t *"), lambda rc: None) is not None
