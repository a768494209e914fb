"""The native poll's fairness (exon_lt_poll, docs/protocol.md 2.17), on real images of one
driver: a session with a backlog of garbage does not hold up another one's frames, its
malformed messages are dropped natively, and once it sends mostly garbage it gets the
garbage share of each batch."""

from __future__ import annotations

import random
import time

from exon.core.frames import encode_data
from exon.middleware.fastpath import FastLinks
from exon.native import lib
from exon.transport.aeron import Aeron

STREAM = 4242
LIMIT = 64  #: the batch: 2 images, a first share of 32 each


def _offer(pub, frame: bytes) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 5
    while pub.offer(frame) < 0:
        assert time.monotonic() < deadline, "the publication never took the frame"
        time.sleep(0.0005)


def _images_by_session(sub, sessions: set[int]):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 5
    while True:
        images = sub.images
        if {img.session_id for img in images} >= sessions:
            return images
        assert time.monotonic() < deadline, "the images never came"
        time.sleep(0.005)


def test_a_garbage_backlog_does_not_hold_up_another_session(driver) -> None:
    rng = random.Random(5)
    fast = FastLinks(lambda _address: None)
    poller = fast.poller(LIMIT)
    try:
        with Aeron.connect(driver.dir) as aeron:
            sub = aeron.add_subscription("aeron:ipc", STREAM)
            bad = aeron.add_exclusive_publication("aeron:ipc", STREAM)
            good = aeron.add_exclusive_publication("aeron:ipc", STREAM)
            images = _images_by_session(sub, {bad.session_id, good.session_id})
            for _ in range(1000):  # no exon frame at all: a wrong version byte first
                _offer(bad, b"\x07" + rng.randbytes(rng.randrange(7, 40)))
            frames = [encode_data(1, 2, 3, b"good %d" % i) for i in range(20)]
            for frame in frames:
                _offer(good, frame)
            order = [img.session_id for img in images]
            poller.set_images(images, [0] * len(images))
            good_index = order.index(good.session_id)
            n, left, _touched = poller.batch(fast.queues)
            ints, data = poller.descriptors()
            seen = [bytes(data[ints[k + 2] : ints[k + 2] + ints[k + 3]])
                    for k in range(0, 5 * n, 5) if ints[k + 1] == good_index]
            # whichever image the batch began with, the good session's frames are in it
            assert seen == frames
            assert left == n == 20  # the garbage got no descriptor
            first = fast.malformed_dropped
            assert 0 < first <= LIMIT - 20
            # the garbage session is now marked: at most EXON_LT_GARBAGE_SHARE a batch
            share = int(lib.EXON_LT_GARBAGE_SHARE)
            before = first
            batches = 0
            while fast.malformed_dropped < 1000 and batches < 1000:
                n, _left, _touched = poller.batch(fast.queues)
                assert n == 0
                step = fast.malformed_dropped - before
                if before >= 64:
                    assert step <= share
                before += step
                batches += 1
            assert fast.malformed_dropped == 1000
            bad_image = images[order.index(bad.session_id)]
            assert bad_image.cdata.lt_malformed * 2 > bad_image.cdata.lt_polled
            good_image = images[good_index]
            assert good_image.cdata.lt_malformed == 0
            assert good_image.cdata.lt_polled == 20
    finally:
        fast.close()


def test_a_lone_busy_session_still_fills_the_batch(driver) -> None:
    """The share is a first round only: what is left goes to who has more, so one busy
    session among idle ones is not held to its share."""
    fast = FastLinks(lambda _address: None)
    poller = fast.poller(LIMIT)
    try:
        with Aeron.connect(driver.dir) as aeron:
            sub = aeron.add_subscription("aeron:ipc", STREAM + 1)
            pubs = [aeron.add_exclusive_publication("aeron:ipc", STREAM + 1) for _ in range(8)]
            images = _images_by_session(sub, {p.session_id for p in pubs})
            for i in range(200):
                _offer(pubs[0], encode_data(1, 2, 3, b"%d" % i))
            poller.set_images(images, [0] * len(images))
            n, _left, _touched = poller.batch(fast.queues)
            assert n == LIMIT  # a share of max(16, 64 / 8) first, then the rest
            assert fast.malformed_dropped == 0
    finally:
        fast.close()
