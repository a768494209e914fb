"""The FRAGMENT codec and FrameAssembler (docs/protocol.md 2.14): any split of any frame
joins back to the frame; anything else is a counted drop, with bounded memory."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exon import errors
from exon.middleware.frame_assembly import FrameAssembler
from exon.middleware.node_transport import (
    FRAGMENT,
    FRAGMENT_HEADER_LENGTH,
    PendingFragments,
    decode_fragment,
    encode_fragments,
    encode_hello,
    fragment_header,
    is_fragment,
)
from exon.transport.aeron import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED

_HEADER = struct.Struct("<HBBIII")


def fragment(total: int, offset: int, chunk: bytes, *, version: int = 1, protocol: int = 2,
             kind: int = FRAGMENT, remaining: int | None = None) -> bytes:
    """A FRAGMENT built by hand (any field may lie)."""
    rest = 8 + len(chunk) if remaining is None else remaining
    return _HEADER.pack(version, protocol, kind, rest, total, offset) + chunk


def test_the_layout_is_the_one_of_the_spec() -> None:
    frame = bytes(range(50))
    chunks = encode_fragments(frame, 16 + 20)
    assert [len(c) for c in chunks] == [36, 36, 26]
    # version 1, protocol 0x02 nodes, type 0x02 FRAGMENT, remaining, total, offset
    assert chunks[1][:16] == struct.pack("<HBBIII", 1, 0x02, 0x02, 28, 50, 20)
    assert chunks[1][16:] == frame[20:40]
    assert FRAGMENT_HEADER_LENGTH == 16
    assert decode_fragment(chunks[2])[:2] == (50, 40)
    assert bytes(decode_fragment(chunks[2])[2]) == frame[40:]
    assert all(is_fragment(c) for c in chunks)
    assert not is_fragment(encode_hello("127.0.0.1:1"))
    assert not is_fragment(b"\x01\x00\x01\x02")  # a sockets-protocol DATA
    assert not is_fragment(b"\x01\x00\x02")  # too short to say


def test_a_limit_without_room_for_data_is_refused() -> None:
    with pytest.raises(errors.ConfigurationError):
        encode_fragments(b"abc", FRAGMENT_HEADER_LENGTH)


@settings(max_examples=200, deadline=None)
@given(frame=st.binary(min_size=1, max_size=3000), step=st.integers(1, 400),
       key=st.integers(0, 2**63))
def test_any_split_of_any_frame_joins_back(frame: bytes, step: int, key: int) -> None:
    chunks = encode_fragments(frame, FRAGMENT_HEADER_LENGTH + step)
    assert len(chunks) == -(-len(frame) // step)
    assembler = FrameAssembler(max_total=len(frame))
    out = [assembler.feed(key, c) for c in chunks]
    assert out[:-1] == [None] * (len(chunks) - 1)
    assert out[-1] == frame
    assert assembler.dropped == 0
    assert len(assembler) == 0
    assert assembler.pending_bytes == 0


@settings(max_examples=100, deadline=None)
@given(frame=st.binary(min_size=2, max_size=2000), cuts=st.lists(st.integers(1, 1999),
                                                                  max_size=20))
def test_chunks_of_any_sizes_join_back(frame: bytes, cuts: list[int]) -> None:
    """Not only the sender's equal steps: any cut points (another implementation may cut
    differently) join back, each chunk continuing where the last ended."""
    points = sorted({c for c in cuts if c < len(frame)} | {0, len(frame)})
    assembler = FrameAssembler(max_total=len(frame))
    out = [assembler.feed(1, fragment(len(frame), a, frame[a:b]))
           for a, b in itertools.pairwise(points)]
    assert out[-1] == frame
    assert all(o is None for o in out[:-1])
    assert assembler.dropped == 0


def test_two_images_assemble_apart() -> None:
    a, b = b"A" * 100, b"B" * 70
    ca, cb = encode_fragments(a, 16 + 30), encode_fragments(b, 16 + 30)
    assembler = FrameAssembler(max_total=1000)
    got = []
    for x, y in zip(ca, cb + [b""] * 10, strict=False):
        got.append(assembler.feed(1, x))
        if y:
            got.append(assembler.feed(2, y))
    assert [g for g in got if g is not None] == [b, a]
    assert assembler.dropped == 0


def test_a_new_start_gives_the_unfinished_frame_up() -> None:
    assembler = FrameAssembler(max_total=1000)
    first = encode_fragments(b"x" * 100, 16 + 30)
    assert assembler.feed(7, first[0]) is None
    assert assembler.feed(7, first[1]) is None
    second = encode_fragments(b"y" * 50, 16 + 30)
    assert assembler.feed(7, second[0]) is None  # the 2 chunks of the first go
    assert assembler.dropped == 2
    assert assembler.feed(7, second[1]) == b"y" * 50
    assert assembler.feed(7, first[2]) is None  # a stray continuation: no assembly
    assert assembler.dropped == 3


@pytest.mark.parametrize("bad", [
    fragment(100, 31, b"z" * 30),  # a gap
    fragment(100, 29, b"z" * 30),  # an overlap
    fragment(101, 30, b"z" * 30),  # another total
])
def test_a_chunk_that_does_not_continue_drops_the_assembly(bad: bytes) -> None:
    assembler = FrameAssembler(max_total=1000)
    assert assembler.feed(1, fragment(100, 0, b"a" * 30)) is None
    assert assembler.feed(1, bad) is None
    assert assembler.dropped == 2  # the assembly's chunk and the bad one
    assert len(assembler) == 0
    # the next frame from offset 0 is fine
    assert assembler.feed(1, fragment(3, 0, b"abc")) == b"abc"


@pytest.mark.parametrize("bad", [
    b"",
    b"\x01\x00\x02\x02",  # truncated header
    fragment(10, 0, b"abc")[:15],
    fragment(10, 0, b"abc", version=2),
    fragment(10, 0, b"abc", protocol=1),
    fragment(10, 0, b"abc", kind=0x01),
    fragment(10, 0, b"abc", remaining=12),  # disagrees with the length
    fragment(10, 0, b""),  # an empty chunk
    fragment(10, 8, b"abc"),  # runs past the total
    fragment(0, 0, b"a"),
    fragment(2**32 - 1, 2**32 - 2, b"ab"),  # past the total, at the top of the u32s
])
def test_malformed_fragments_are_counted_drops(bad: bytes) -> None:
    with pytest.raises(errors.FrameDecodeError):
        decode_fragment(bad)
    assembler = FrameAssembler(max_total=1000)
    assert assembler.feed(1, fragment(10, 0, b"12345")) is None
    assert assembler.feed(1, bad) is None
    assert assembler.dropped == 2  # the bad one, and the assembly it interrupted
    assert len(assembler) == 0


def test_a_total_above_the_cap_is_refused_before_anything_is_kept() -> None:
    assembler = FrameAssembler(max_total=100)
    assert assembler.feed(1, fragment(2**32 - 1, 0, b"a" * 50)) is None
    assert assembler.dropped == 1
    assert assembler.pending_bytes == 0
    assert assembler.feed(1, fragment(2**32 - 1, 50, b"a" * 50)) is None  # no assembly
    assert assembler.dropped == 2
    assert assembler.feed(1, fragment(100, 0, b"a" * 100)) == b"a" * 100  # at the cap: fine


def test_memory_is_the_announced_total_at_most_the_cap_per_key() -> None:
    """An assembly takes its announced total at once (one buffer, filled in place): memory
    is bounded by max_total per key, and an announced total above it takes nothing."""
    assembler = FrameAssembler(max_total=1 << 20)
    assert assembler.feed(1, fragment(1 << 20, 0, b"a" * 10)) is None
    assert assembler.pending_bytes == 10  # the bytes received
    assert len(assembler._assemblies[1].buffer) == 1 << 20
    assert assembler.feed(2, fragment((1 << 20) + 1, 0, b"a" * 10)) is None
    assert 2 not in assembler._assemblies
    assert assembler.dropped == 1


def test_the_chunks_fed_are_copied_at_once_not_kept() -> None:
    """The Node feeds views of its poll buffer, which the next poll overwrites: what the
    assembler hands out must not change when the fed buffers do afterwards."""
    frame = bytes(range(256)) * 4
    buf = bytearray(FRAGMENT_HEADER_LENGTH + 300)
    assembler = FrameAssembler(max_total=len(frame))
    out = None
    for chunk in encode_fragments(frame, FRAGMENT_HEADER_LENGTH + 300):
        buf[: len(chunk)] = chunk
        out = assembler.feed(1, memoryview(buf)[: len(chunk)])
        buf[:] = b"\xee" * len(buf)  # the poll buffer reused
    assert out is not None
    assert bytes(out) == frame
    assert assembler.dropped == 0


def test_forget_drops_the_image_assembly() -> None:
    assembler = FrameAssembler(max_total=1000)
    for c in encode_fragments(b"q" * 90, 16 + 30)[:2]:
        assembler.feed(4, c)
    assembler.forget(4)
    assembler.forget(5)  # nothing there: nothing counted
    assert assembler.dropped == 2
    assert len(assembler) == 0


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(st.binary(max_size=80), max_size=30), keys=st.lists(st.integers(0, 3),
                                                                          max_size=30))
def test_any_bytes_are_a_frame_or_a_counted_drop_within_the_cap(frames: list[bytes],
                                                               keys: list[int]) -> None:
    """Fuzz: arbitrary input never raises, never holds more than the cap per key, and
    every input that did not complete a frame is accounted for (held or dropped)."""
    assembler = FrameAssembler(max_total=200)
    for i, data in enumerate(frames):
        key = keys[i] if i < len(keys) else 0
        out = assembler.feed(key, data)
        assert out is None or len(out) <= 200
        assert all(len(a.buffer) <= 200 for a in assembler._assemblies.values())  # the cap
        assert len(assembler) <= 4


@settings(max_examples=200, deadline=None)
@given(frame=st.binary(min_size=40, max_size=400), step=st.integers(8, 40),
       data=st.data())
def test_a_mangled_stream_never_yields_a_wrong_frame(frame: bytes, step: int,
                                                    data: st.DataObject) -> None:
    """Chunks lost, repeated or swapped: the assembler hands out the frame only when its
    chunks came in order, and nothing else than the frame."""
    chunks = encode_fragments(frame, FRAGMENT_HEADER_LENGTH + step)
    mangled = data.draw(st.lists(st.sampled_from(chunks), max_size=2 * len(chunks)))
    assembler = FrameAssembler(max_total=len(frame))
    for c in mangled:
        out = assembler.feed(0, c)
        assert out is None or out == frame


def test_a_key_reuses_its_buffer_for_the_next_frame_until_forgotten() -> None:
    """A finished frame's buffer serves the key's next assembly when long enough (no fresh
    large allocation per frame); a longer frame takes a new one; forget lets it go."""
    assembler = FrameAssembler(max_total=1000)
    big, small, bigger = b"a" * 300, b"b" * 100, b"c" * 400
    out = [assembler.feed(3, c) for c in encode_fragments(big, 16 + 64)]
    assert out[-1] == big
    first = assembler._spares[3]
    out = [assembler.feed(3, c) for c in encode_fragments(small, 16 + 64)]
    assert out[-1] == small
    assert len(out[-1]) == 100
    assert assembler._spares[3] is first  # filled in place, handed out as a view of it
    out = [assembler.feed(3, c) for c in encode_fragments(bigger, 16 + 64)]
    assert out[-1] == bigger
    assert assembler._spares[3] is not first
    assert len(assembler._spares[3]) == 400
    assembler.forget(3)
    assert 3 not in assembler._spares
    assert assembler.dropped == 0



class _TwoPiecePublication:
    """A publication's offer2, recording each message; refuses the offers listed."""

    def __init__(self, refuse: dict[int, int]) -> None:
        self.refuse = refuse  # offer call number -> outcome
        self.calls = 0
        self.messages: list[bytes] = []

    def offer2(self, head: bytes | memoryview, body: bytes | memoryview) -> int:
        self.calls += 1
        rc = self.refuse.get(self.calls)
        if rc is not None:
            return rc
        assert isinstance(body, memoryview)  # a view of the frame: no chunk was built
        self.messages.append(bytes(head) + bytes(body))
        return 1000 + len(self.messages)


@settings(max_examples=100, deadline=None)
@given(frame=st.binary(min_size=1, max_size=2000), step=st.integers(1, 300),
       refusals=st.lists(st.integers(1, 40), max_size=6))
def test_pending_fragments_offer_what_encode_fragments_cuts_resuming_after_refusals(
        frame: bytes, step: int, refusals: list[int]) -> None:
    """Header + view of the frame per chunk (two-piece offer): the same messages as
    encode_fragments, in order, each once, however often back pressure interrupts."""
    pub = _TwoPiecePublication({n: BACK_PRESSURED if n % 2 else ADMIN_ACTION
                                for n in refusals})
    pending = PendingFragments(frame)
    limit = FRAGMENT_HEADER_LENGTH + step
    for _ in range(50):
        if pending.offer(pub, limit) >= 0:
            break
        assert len(pending) > 0
    assert pub.messages == encode_fragments(frame, limit)
    assert len(pending) == 0
    assert pending.offset == len(frame)


def test_pending_fragments_spin_on_back_pressure_and_stop_at_a_final_outcome() -> None:
    frame = bytes(range(100))
    pub = _TwoPiecePublication({2: BACK_PRESSURED, 3: BACK_PRESSURED})
    pending = PendingFragments(frame)
    assert pending.offer(pub, 16 + 40, spins=2) >= 0  # two refusals, two retries: all went
    assert pub.messages == encode_fragments(frame, 16 + 40)
    pub = _TwoPiecePublication({2: NOT_CONNECTED})
    pending = PendingFragments(frame)
    assert pending.offer(pub, 16 + 40, spins=5) == NOT_CONNECTED  # no retry of that
    assert pending.offset == 40
    assert pub.calls == 2
    assert fragment_header(100, 40, 40) == encode_fragments(frame, 16 + 40)[1][:16]
    with pytest.raises(errors.ConfigurationError):
        PendingFragments(frame).offer(pub, FRAGMENT_HEADER_LENGTH)
