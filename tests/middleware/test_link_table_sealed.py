"""The link table's encrypted hot path (exon_link_table.c, issue 28): a DATA that fits one
frame is sealed straight into a claim of the term, and a sealed frame is opened in place in
the poll's copy buffer. What goes out must open with the peer's keys as before; a seal that
fails after the claim leaves padding that readers skip; a frame that does not open is
dropped and counted once by the table (it never reaches the core: its ciphertext may be
overwritten by the failed open), and the frames after it stay on the fast path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exon.core import frames as F
from exon.core.sealing import open_frame, seal_frame
from exon.crypto import libcrypto, seal
from exon.crypto.seal import TransportSeal
from exon.native import ffi, lib
from exon.transport.aeron.image import Image
from exon.transport.aeron.logbuffer import LogBuffer
from exon.transport.aeron.publication import Publication

pytestmark = pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing")

TERM = 64 * 1024
OUR_TAG, PEER_TAG = 7, 9
OUR_INC, PEER_INC = 1001, 2002
PEER_KEY = 0
MAX_SIZE = 16 * 1024
HEADER = F.HEADER_LENGTH
OVERHEAD = int(lib.EXON_SEAL_OVERHEAD)
BACKENDS = {"openssl": lib.EXON_CRYPTO_OPENSSL, "libsodium": lib.EXON_CRYPTO_SODIUM}


def _cases() -> list[tuple[str, str]]:
    backends = ["openssl", "libsodium"] if seal.backend() == "libsodium" else ["openssl"]
    return [(b, c) for b in backends for c in seal.local_ciphers()]


class SealedLink:
    """One attached encrypted link of a native table, its publication and an image that
    reads what it sends, and the peer's seal (the keys swapped)."""

    def __init__(self, directory: Path, cipher: str) -> None:
        self.log = LogBuffer.create(directory / "sealed.logbuffer", term_length=TERM)
        self.pub = Publication.standalone(self.log)
        self.image = Image.standalone(self.log)
        k1, k2 = os.urandom(32), os.urandom(32)
        self.ours = TransportSeal(k1, k2, cipher=cipher)
        self.peer = TransportSeal(k2, k1, cipher=cipher)
        self.table = ffi.new("exon_link_table_t *")
        assert lib.exon_lt_init(self.table, 4, 2) == 0
        index = lib.exon_lt_reserve(self.table)
        rec = self.table.links[index]
        rec.limit = rec.advertised = 1 << 20
        rec.source_tag, rec.destination_tag = OUR_TAG, PEER_TAG
        rec.incarnation, rec.peer_incarnation = OUR_INC, PEER_INC
        rec.peer_key = PEER_KEY
        rec.socket_slot = 0
        rec.max_out = rec.max_in = MAX_SIZE
        rec.seal = self.ours.native
        assert lib.exon_lt_activate(self.table, index, self.pub._pub) == 0
        self.record = rec
        self.keys = ffi.new("int32_t[1]", [PEER_KEY])
        self.images = ffi.new("exon_image_t *[1]", [self.image.cdata])

    def close(self) -> None:
        lib.exon_lt_detach(self.table, 0)
        lib.exon_lt_close(self.table)
        self.image.close()
        self.pub.close()
        self.log.close()

    def send(self, payload: bytes) -> int:
        return int(lib.exon_lt_send(self.table, 0, 0, payload, len(payload)))

    def from_peer(self, payload: bytes) -> bytes:
        """A DATA the peer sealed for us."""
        return seal_frame(self.peer, F.encode_data(PEER_TAG, OUR_TAG, PEER_INC, payload))

    def classify(self, frames: list[bytes]) -> tuple[list[tuple[int, bytes]], Any]:
        """Classify frames laid one after another in a copy buffer: (link, the bytes the
        descriptor names) per frame."""
        buf = ffi.new("uint8_t[]", b"".join(frames) or b"\0")
        descs = ffi.new("exon_lt_desc_t[]", len(frames))
        offset = 0
        for k, frame in enumerate(frames):
            descs[k].image, descs[k].offset, descs[k].length = 0, offset, len(frame)
            offset += len(frame)
        lib.exon_lt_classify(self.table, self.images, self.keys, buf, descs, len(frames))
        view = ffi.buffer(buf)
        return [(int(d.link), bytes(view[d.offset:d.offset + d.length])) for d in descs], buf


@pytest.fixture(params=_cases(), ids=lambda c: "-".join(c))
def link(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SealedLink]:
    backend, cipher = request.param
    was = lib.exon_crypto_backend(-1)  # only asks
    assert lib.exon_crypto_backend(BACKENDS[backend]) == BACKENDS[backend]
    sealed = SealedLink(tmp_path, cipher)
    try:
        yield sealed
    finally:
        sealed.close()
        lib.exon_crypto_backend(was)


def test_sends_in_one_frame_and_fragmented_open_with_the_peers_keys(link: SealedLink) -> None:
    fits = int(link.pub._pub.max_payload_length) - HEADER - OVERHEAD  # the largest claim
    sizes = [0, 1, 16, 64, 1024, fits, fits + 1, 3 * fits]
    payloads = [os.urandom(n) for n in sizes]
    for p in payloads:
        assert link.send(p) == 0
    got = link.image.poll_messages(100)
    assert [len(m) for m in got] == [HEADER + OVERHEAD + n for n in sizes]
    for message, payload in zip(got, payloads, strict=True):
        assert message[2] == 0x03  # sealed
        assert open_frame(link.peer, message) == F.encode_data(OUR_TAG, PEER_TAG, OUR_INC,
                                                               payload)
    assert (link.peer.opened, link.peer.failures) == (len(sizes), 0)
    assert link.record.sent == len(sizes)


def test_a_seal_that_fails_after_its_claim_leaves_padding(link: SealedLink) -> None:
    assert link.send(b"first") == 0
    link.ours.native.send.next = (1 << 64) - 2  # the send counter is exhausted
    before = link.pub.position
    rc = link.send(b"x" * 100)
    assert rc == lib.EXON_E_STATE  # not an offer outcome: the caller does not retry
    assert link.pub.position > before  # the claim is there, aborted: a PAD frame
    assert link.record.sent == 1  # nothing was spent
    link.ours.native.send.next = 5  # a usable counter again (the peer allows gaps)
    assert link.send(b"after") == 0
    got = link.image.poll_messages(100)  # the reader skips the padding
    assert [open_frame(link.peer, m) for m in got] == [
        F.encode_data(OUR_TAG, PEER_TAG, OUR_INC, p) for p in (b"first", b"after")]
    assert link.image.position == link.pub.position


def test_frames_open_in_place(link: SealedLink) -> None:
    payloads = [b"", b"a", os.urandom(64), os.urandom(1024)]
    results, _ = link.classify([link.from_peer(p) for p in payloads])
    assert results == [(0, F.encode_data(PEER_TAG, OUR_TAG, PEER_INC, p)) for p in payloads]
    assert link.record.received == len(payloads)
    assert int(link.table.unopened_dropped) == 0


@pytest.mark.parametrize("where", ["ciphertext", "tag", "counter"])
def test_a_frame_that_does_not_open_is_dropped_and_counted_once(link: SealedLink,
                                                                where: str) -> None:
    good1, bad, good2 = (link.from_peer(b"one" * 30), link.from_peer(b"two" * 30),
                         link.from_peer(b"three" * 30))
    altered = bytearray(bad)
    offset = {"ciphertext": HEADER + 8 + 5, "tag": len(bad) - 3, "counter": HEADER + 7}[where]
    altered[offset] ^= 0x40
    malformed = link.image.cdata.lt_malformed
    results, _ = link.classify([good1, bytes(altered), good2])
    assert [r[0] for r in results] == [0, int(lib.EXON_LT_DROPPED), 0]
    assert results[0][1] == F.encode_data(PEER_TAG, OUR_TAG, PEER_INC, b"one" * 30)
    assert results[2][1] == F.encode_data(PEER_TAG, OUR_TAG, PEER_INC, b"three" * 30)
    assert int(link.table.unopened_dropped) == 1
    assert link.ours.failures == 1  # one open tried: the core never saw it
    assert link.image.cdata.lt_malformed == malformed + 1  # the image's poll share
    assert link.record.received == 2


def test_a_replayed_frame_is_dropped_and_the_link_goes_on(link: SealedLink) -> None:
    first = link.from_peer(b"once")
    assert [r[0] for r in link.classify([first])[0]] == [0]
    results, _ = link.classify([first, link.from_peer(b"next")])
    assert results == [(int(lib.EXON_LT_DROPPED), first),  # refused before any byte moved
                       (0, F.encode_data(PEER_TAG, OUR_TAG, PEER_INC, b"next"))]
    assert int(link.table.unopened_dropped) == 1


def test_frames_the_fast_path_does_not_take_stay_sealed_for_the_core(link: SealedLink) -> None:
    frame = link.from_peer(b"x" * 40)
    stale = bytearray(frame)
    stale[16] ^= 1  # another incarnation: the core decides
    link.record.advertised = link.record.received  # no credit left: the core decides
    results, _ = link.classify([frame, bytes(stale)])
    assert results == [(-1, frame), (-1, bytes(stale))]
    assert int(link.table.unopened_dropped) == 0
    assert (link.ours.failures, link.ours.opened) == (0, 0)
