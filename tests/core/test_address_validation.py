"""Address validation and the anti-amplification limit (docs/protocol.md 2.6.1).

A socket that answers a LINK its application did not ask for links only once the peer has
echoed the token of its LINKACK, i.e. shown that it receives at the reply address it
named; until an address is validated, at most 3x the bytes received in its name go to it.
"""

from __future__ import annotations

import random

from exon.core.events import LinkEstablished, MessageReceived, PeerId
from exon.core.frames import (
    TOKEN_LENGTH,
    Decision,
    FrameType,
    LinkMetadata,
    decode_frame,
    encode_data,
    encode_flow,
    encode_link,
    encode_linkack,
)
from exon.core.link_actions import AMPLIFICATION_FACTOR
from exon.core.link_state import LinkState
from exon.core.socket_core import SocketCore
from tests.core.helpers import LossyWire, make_core, pump, transfer

BLACKHOLE = "10.255.255.1:9"  # nobody answers there: the attacker never sees B's frames


def _attacker_meta(nonce: bytes = b"n" * 16) -> LinkMetadata:
    return LinkMetadata(socket_type="push", credits=64, max_message_size=1 << 20,
                        node_id="node-attacker", reply_address=BLACKHOLE, nonce=nonce)


def test_the_responders_linkack_carries_a_token_and_the_initiator_echoes_it() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "req")
    b.open_socket(2, "rep")
    a.link(1, ("B", 2), now=0)
    transfer(a, b)
    answer = b.frames_to_send()
    ack = decode_frame(answer[0][1])
    assert ack.type is FrameType.LINKACK
    assert ack.metadata is not None
    assert len(ack.token) == TOKEN_LENGTH
    assert ack.echo == b""
    for _x, d in answer:
        a.receive_frame("B", d, now=0)
    final = decode_frame(a.frames_to_send()[0][1])
    assert final.echo == ack.token
    assert final.token == b""
    b.receive_frame("A", encode_linkack(1, 2, final.incarnation, Decision.ACCEPTED,
                                        answers=final.answers, echo=final.echo), now=0)
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert b.validated("A")


def test_a_linkack_without_the_echo_or_with_a_wrong_one_is_dropped_and_counted() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    transfer(a, b)
    transfer(b, a)
    good = decode_frame(a.frames_to_send()[0][1])
    for echo in (b"", bytes(TOKEN_LENGTH), bytes(reversed(good.echo))):
        b.receive_frame("A", encode_linkack(1, 2, good.incarnation, Decision.ACCEPTED,
                                            answers=good.answers, echo=echo), now=0)
        assert b.link_state(2, ("A", 1)) is LinkState.DECIDED
    assert b.statistics().tokens_rejected == 3
    assert b.events() == []
    b.receive_frame("A", encode_linkack(1, 2, good.incarnation, Decision.ACCEPTED,
                                        answers=good.answers, echo=good.echo), now=0)
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED


def test_a_lost_echo_is_repaired_by_the_repeated_linkack_and_held_data_delivered() -> None:
    """A's LINKACK (with the echo) is lost with its stream; A's DATA reaches B: B holds it
    and repeats its LINKACK once, A (established) echoes the token again."""
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    transfer(a, b)
    transfer(b, a)
    a.frames_to_send()  # the LINKACK with the echo: lost
    for i in range(3):
        a.send(1, b"m%d" % i, now=0)
    transfer(a, b)
    assert b.link_state(2, ("A", 1)) is LinkState.DECIDED
    assert pump([a, b]) == 2  # B's repeated LINKACK, A's echo
    ev = b.events()
    assert [type(e) for e in ev] == [LinkEstablished] + [MessageReceived] * 3
    assert [e.payload for e in ev if isinstance(e, MessageReceived)] == [b"m0", b"m1", b"m2"]
    assert a.statistics().links_resent == 1
    assert b.statistics().links_resent == 1


def test_simultaneous_links_need_no_token_both_sides_initiated() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    b.link(2, ("A", 1), now=0)
    fa, fb = a.frames_to_send(), b.frames_to_send()
    for _x, d in fa:
        b.receive_frame("A", d, now=0)
    for _x, d in fb:
        a.receive_frame("B", d, now=0)
    acks = a.frames_to_send() + b.frames_to_send()
    assert [decode_frame(d).token for _x, d in acks] == [b"", b""]
    for _x, d in acks[:1]:
        b.receive_frame("A", d, now=0)
    for _x, d in acks[1:]:
        a.receive_frame("B", d, now=0)
    assert a.link_state(1, ("B", 2)) is b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED


def test_handshakes_over_a_reordering_duplicating_wire_still_link_and_deliver() -> None:
    for seed in range(30):
        a, b = make_core("A", seed=seed), make_core("B", seed=seed)
        a.open_socket(1, "push")
        b.open_socket(2, "pull")
        wire = LossyWire(reorder=0.5, duplicate=0.3, seed=seed)
        wire.connect(a, b)
        a.link(1, ("B", 2), now=0)
        now = 0.0
        for _ in range(20):
            wire.run(now)
            if a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED:
                break
            now += 1.0
            a.handle_timer(now=now)
            b.handle_timer(now=now)
        a.send(1, b"x", now=now)
        wire.run(now)
        got = [e.payload for e in b.events() if isinstance(e, MessageReceived)]
        assert got[:1] == [b"x"], seed
        assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED


def test_a_blind_attacker_with_a_blackhole_reply_address_never_links_nor_delivers() -> None:
    """The finding of issue #32: LINK naming an address the attacker does not own, then
    DATA and FLOW as if linked, then LINKACKs guessing the echo."""
    b = make_core("B")
    b.open_socket(2, "pull")
    rng = random.Random(7)
    received = 0
    for attempt in range(20):
        inc = 1000 + attempt
        link = encode_link(66, 2, inc, _attacker_meta(rng.randbytes(16)))
        received += len(link)
        b.receive_frame("attacker-image", link, now=float(attempt))
        # B's incarnation is unknown to a blind attacker, but grant it that guess
        b_inc = b._sockets[2].links[PeerId(BLACKHOLE, 66)].incarnation
        frames = [encode_data(66, 2, inc, b"spoofed %d" % i) for i in range(30)]
        frames.append(encode_flow(66, 2, inc, 0, 1000))
        for echo in (b"", rng.randbytes(TOKEN_LENGTH)):
            frames.append(encode_linkack(66, 2, inc, Decision.ACCEPTED, answers=b_inc,
                                         echo=echo))
        for data in frames:
            received += len(data)
            b.receive_frame("attacker-image", data, now=float(attempt))
    sent = b.frames_to_send()
    assert not any(isinstance(e, (LinkEstablished, MessageReceived)) for e in b.events())
    assert b.link_state(2, (BLACKHOLE, 66)) is LinkState.DECIDED
    stats = b.statistics()
    assert stats.links_established == 0
    assert stats.tokens_rejected == 40
    to_blackhole = sum(len(d) for addr, d in sent if addr == BLACKHOLE)
    assert 0 < to_blackhole <= AMPLIFICATION_FACTOR * received
    assert not b.validated(BLACKHOLE)


def test_answers_to_an_unvalidated_address_stay_within_three_times_its_bytes() -> None:
    """Frames for sockets that do not exist, each answered SOCKET_NOT_FOUND (an ERROR
    longer than the frame): what goes to the address never exceeds 3x what came."""
    # a long node id makes each SOCKET_NOT_FOUND answer longer than 3x the frame it answers
    b = SocketCore(node_id="node-" + "b" * 80, reply_address="B", rng=random.Random(1))
    b.open_socket(2, "pull")
    came = went = 0
    for i in range(500):
        data = encode_data(5, 1000 + i, 1, b"")  # 20 bytes; the ERROR answer is longer
        came += len(data)
        b.receive_frame("victim:1", data, now=0)
        went += sum(len(d) for addr, d in b.frames_to_send() if addr == "victim:1")
        assert went <= AMPLIFICATION_FACTOR * came
    stats = b.statistics()
    assert stats.amplification_held > 0
    assert stats.amplification_held_bytes > 0
    assert went > 0  # not silenced either: answers flow within the limit


def test_transport_rounds_share_the_limit_with_the_frames() -> None:
    """The SETUP rounds of a stream towards an unvalidated address (what its transport
    sends before the peer answers) are granted only as far as 3x its bytes still go, are
    counted as sent, and nothing is granted once the frames took the room."""
    b = SocketCore(node_id="B", reply_address="B", rng=random.Random(1))
    b.open_socket(2, "pull")
    assert b.reserve_unvalidated("stranger:1", 72, 11) == 0  # nothing came from it
    assert b.statistics().amplification_held == 1
    data = encode_data(5, 1000, 1, b"x" * 80)  # 100 bytes in its name, 300 to spend
    b.receive_frame("stranger:1", data, now=0)
    answer = sum(len(d) for addr, d in b.frames_to_send() if addr == "stranger:1")
    granted = b.reserve_unvalidated("stranger:1", 72, 11)
    assert granted == (AMPLIFICATION_FACTOR * len(data) - answer) // 72 > 0
    assert answer + granted * 72 <= AMPLIFICATION_FACTOR * len(data)
    assert b.reserve_unvalidated("stranger:1", 72, 11) == 0  # spent
    a = make_core("A")
    a.open_socket(1, "push")
    a.link(1, ("B", 2), now=0)
    assert a.reserve_unvalidated("B", 72, 11) == 11  # validated: not limited


def test_an_address_our_application_linked_to_is_not_limited() -> None:
    a = make_core("A")
    a.open_socket(1, "push")
    a.link(1, ("B", 2), now=0)
    assert a.validated("B")
    assert len(a.frames_to_send()) == 1  # the LINK goes out though nothing came from B
    assert a.statistics().amplification_held == 0


def test_claiming_a_validated_address_still_needs_the_token() -> None:
    """A validated address lifts the amplification limit, not the token: an attacker that
    names a real peer's address (frames to it reach the real node, not the attacker)
    still cannot link, nor pass as that peer in ``Message.peer``."""
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    pump([a, b])
    b.events()
    assert b.validated("A")
    meta = LinkMetadata(socket_type="push", credits=64, max_message_size=1024,
                        node_id="node-A", reply_address="A", nonce=b"m" * 16)
    b.receive_frame("attacker", encode_link(9, 2, 4242, meta), now=1)
    answer = b.frames_to_send()
    assert [decode_frame(d).token != b"" for _a, d in answer] == [True]
    for i in range(5):
        b.receive_frame("attacker", encode_data(9, 2, 4242, b"as A %d" % i), now=1)
    assert not any(isinstance(e, MessageReceived) for e in b.events())
    assert b.link_state(2, ("A", 9)) is LinkState.DECIDED


def test_repeats_carry_the_same_token_and_every_answer_is_echoed() -> None:
    """Case 6 with the token: B's first LINKACK is late, A repeats its LINK, B answers
    the repeat with the same token; A echoes whichever LINKACK it gets, and the late one
    too, once established; B links once and ignores the extra echo."""
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    transfer(a, b)
    late = b.frames_to_send()  # B's LINKACK: held back on the wire
    a.handle_timer(now=1.0)  # no answer: A repeats its LINK (same incarnation)
    repeat = a.frames_to_send()
    assert [decode_frame(d).type for _x, d in repeat] == [FrameType.LINK]
    for _x, d in repeat:
        b.receive_frame("A", d, now=1.0)
    second = b.frames_to_send()
    tokens = [decode_frame(d).token for _x, d in late + second]
    assert len(tokens) == 2
    assert tokens[0] == tokens[1] != b""
    for _x, d in second + late:  # the repeat's answer first, then the late one
        a.receive_frame("B", d, now=1.0)
    echoes = a.frames_to_send()
    assert [decode_frame(d).echo for _x, d in echoes] == tokens
    for _x, d in echoes:
        b.receive_frame("A", d, now=1.0)
    assert [type(e) for e in b.events()] == [LinkEstablished]
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert b.statistics().tokens_rejected == 0
    assert b.frames_to_send() == []
