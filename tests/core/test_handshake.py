"""Every link handshake flow of seed 002, refusals and retries, ERROR frames."""

from __future__ import annotations

import pytest

from exon.core.events import (
    ErrorReceived,
    LinkClosed,
    LinkEstablished,
    LinkRefused,
    MessageReceived,
    PeerId,
)
from exon.core.frames import Decision, ErrorCode, FrameType, decode_frame, encode_data
from exon.core.link_state import LinkState
from exon.core.policy import SharedSecretPolicy
from exon.errors import SocketNotLinked, StateError
from tests.core.helpers import link_pair, make_core, pump, transfer


def types_of(frames: list[tuple[str, bytes]]) -> list[FrameType]:
    return [decode_frame(d).type for _a, d in frames]


def kinds(events: list[object]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_one_side_initiates_link_linkack_meta_linkack() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "req")
    b.open_socket(2, "rep")
    a.link(1, ("B", 2), now=0)
    f1 = a.frames_to_send()
    assert types_of(f1) == [FrameType.LINK]
    assert a.link_state(1, ("B", 2)) is LinkState.LINK_SENT
    for _addr, d in f1:
        b.receive_frame("A", d, now=0)
    f2 = b.frames_to_send()
    ack = decode_frame(f2[0][1])
    assert ack.type is FrameType.LINKACK
    assert ack.metadata is not None
    assert ack.metadata.socket_type == "rep"
    assert ack.metadata.reply_address == "B"
    assert ack.metadata.node_id == "node-B"
    assert b.link_state(2, ("A", 1)) is LinkState.DECIDED
    for _addr, d in f2:
        a.receive_frame("B", d, now=0)
    f3 = a.frames_to_send()
    final = decode_frame(f3[0][1])
    assert final.type is FrameType.LINKACK
    assert final.metadata is None
    assert final.decision is Decision.ACCEPTED
    assert kinds(a.events()) == ["LinkEstablished"]
    for _addr, d in f3:
        b.receive_frame("A", d, now=0)
    ev = b.events()
    assert kinds(ev) == ["LinkEstablished"]
    assert isinstance(ev[0], LinkEstablished)
    assert ev[0].peer_metadata.node_id == "node-A"
    assert ev[0].peer == PeerId("A", 1)
    assert a.link_state(1, ("B", 2)) is b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED


def test_simultaneous_links_make_exactly_one_link() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    b.link(2, ("A", 1), now=0)
    fa, fb = a.frames_to_send(), b.frames_to_send()
    assert types_of(fa) == types_of(fb) == [FrameType.LINK]
    for _x, d in fa:
        b.receive_frame("A", d, now=0)
    for _x, d in fb:
        a.receive_frame("B", d, now=0)
    acks_a, acks_b = a.frames_to_send(), b.frames_to_send()
    assert [decode_frame(d).metadata for _x, d in acks_a + acks_b] == [None, None]
    assert a.link_state(1, ("B", 2)) is LinkState.DECIDED
    for _x, d in acks_a:
        b.receive_frame("A", d, now=0)
    for _x, d in acks_b:
        a.receive_frame("B", d, now=0)
    assert kinds(a.events()) == kinds(b.events()) == ["LinkEstablished"]
    assert a.links(1) == {PeerId("B", 2): LinkState.ESTABLISHED}
    assert pump([a, b]) == 0  # 4 frames in all, nothing more


def test_linkack_before_the_peers_link_waits_for_the_link() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    b.link(2, ("A", 1), now=0)
    transfer(a, b)  # B gets A's LINK, answers LINKACK w/o metadata
    fb = b.frames_to_send()
    assert types_of(fb) == [FrameType.LINK, FrameType.LINKACK]
    a.receive_frame("B", fb[1][1], now=0)  # the LINKACK overtakes B's LINK
    assert a.link_state(1, ("B", 2)) is LinkState.GOT_DECISION
    assert a.events() == []
    a.receive_frame("B", fb[0][1], now=0)  # now the LINK
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    transfer(a, b)
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED


def test_data_before_linkack_means_the_peer_accepted() -> None:
    """Case 4 with address validation (2.6.1): DATA that overtakes the LINKACK carrying
    the echo is held, and delivered once the echo establishes the link."""
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    transfer(a, b)
    transfer(b, a)  # A established, queued LINKACK
    a.events()
    a.send(1, b"early", now=0)
    a.send(1, b"second", now=0)
    fa = a.frames_to_send()
    assert types_of(fa) == [FrameType.LINKACK, FrameType.DATA, FrameType.DATA]
    b.receive_frame("A", fa[1][1], now=0)  # DATA first: held, B repeats its LINKACK once
    b.receive_frame("A", fa[2][1], now=0)
    assert b.events() == []
    assert b.link_state(2, ("A", 1)) is LinkState.DECIDED
    assert types_of(b.frames_to_send()) == [FrameType.LINKACK]
    b.receive_frame("A", fa[0][1], now=0)  # the LINKACK with the echo
    ev = b.events()
    assert kinds(ev) == ["LinkEstablished", "MessageReceived", "MessageReceived"]
    assert [e.payload for e in ev[1:] if isinstance(e, MessageReceived)] == [b"early", b"second"]
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert b.frames_to_send() == []


def test_incompatible_is_permanent_and_not_retried() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "req")
    b.open_socket(2, "push")
    a.link(1, ("B", 2), now=0)
    pump([a, b])
    ev = a.events()
    assert len(ev) == 1
    assert isinstance(ev[0], LinkRefused)
    assert ev[0].decision is Decision.INCOMPATIBLE
    assert ev[0].permanent
    assert ev[0].by_peer
    assert ev[0].retry_at is None
    assert "req" in ev[0].reason
    assert a.links(1) == {}
    assert b.links(2) == {}
    assert a.next_timer() is None
    assert b.statistics().refusals_sent == 1


def test_our_own_incompatibility_refuses_too() -> None:
    # B (pull) answers A (pull) ... both pull: B refuses first, A never decides
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "pull")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    pump([a, b])
    (ev,) = a.events()
    assert isinstance(ev, LinkRefused)
    assert ev.decision is Decision.INCOMPATIBLE


def test_temporary_refusal_retries_with_growing_random_delay_until_accepted() -> None:
    a = make_core("A", retry_initial=0.1, retry_max=10.0, retry_jitter=0.5)
    b = make_core("B")
    c = make_core("C")
    b.open_socket(2, "pull", max_links=1)
    c.open_socket(3, "push")
    c.link(3, ("B", 2), now=0)
    pump([b, c])
    a.open_socket(1, "push")
    a.link(1, ("B", 2), now=0)
    pump([a, b, c])
    delays = []
    now = 0.0
    for _ in range(4):
        (ev,) = a.events()
        assert isinstance(ev, LinkRefused)
        assert ev.decision is Decision.LINK_LIMIT
        assert not ev.permanent
        assert ev.retry_at is not None
        assert a.next_timer() == ev.retry_at
        assert a.link_state(1, ("B", 2)) is LinkState.RETRY_WAIT
        delays.append(ev.retry_at - now)
        now = ev.retry_at
        a.handle_timer(now=now)
        retry = a.frames_to_send()
        assert types_of(retry) == [FrameType.LINK]
        for _x, d in retry:
            b.receive_frame("A", d, now=now)
        pump([a, b, c], now)
    # growing: each delay within [0.5, 1.5] x 0.1 x 2^k
    for k, d in enumerate(delays):
        assert 0.05 * 2**k <= d <= 0.15 * 2**k
    assert len(set(delays)) == len(delays)
    c.unlink(3, ("B", 2), now=now)
    pump([a, b, c], now)
    a.events()
    now = a.next_timer() or now
    a.handle_timer(now=now)
    pump([a, b, c], now)
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert any(isinstance(e, LinkEstablished) for e in a.events())


def test_unknown_destination_gets_socket_not_found_formed_as_the_missing_socket() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "req")
    a.link(1, ("B", 99), now=0)
    transfer(a, b)
    (frame,) = b.frames_to_send()
    assert frame[0] == "A"
    err = decode_frame(frame[1])
    assert err.type is FrameType.ERROR
    assert err.error == ErrorCode.SOCKET_NOT_FOUND
    assert err.source_tag == 99
    assert err.destination_tag == 1
    a.receive_frame("B", frame[1], now=0)
    ev = a.events()
    assert isinstance(ev[0], ErrorReceived)
    assert ev[0].code == ErrorCode.SOCKET_NOT_FOUND
    assert isinstance(ev[1], LinkRefused)
    assert ev[1].decision is Decision.SOCKET_NOT_FOUND
    assert not ev[1].permanent
    assert ev[1].retry_at is not None
    b.open_socket(99, "rep")
    a.handle_timer(now=ev[1].retry_at)
    pump([a, b], ev[1].retry_at)
    assert a.link_state(1, ("B", 99)) is LinkState.ESTABLISHED


def test_frames_from_an_unlinked_socket_get_socket_not_linked_and_are_discarded() -> None:
    _a, b = make_core("A"), make_core("B")
    b.open_socket(2, "pull")
    for data in (encode_data(1, 2, 5, b"x"),):
        b.receive_frame("A", data, now=0)
    (frame,) = b.frames_to_send()
    err = decode_frame(frame[1])
    assert err.error == ErrorCode.SOCKET_NOT_LINKED
    assert (err.source_tag, err.destination_tag, err.incarnation) == (2, 1, 5)
    assert b.events() == []
    assert b.links(2) == {}
    assert b.statistics().not_linked_sent == 1


def test_error_frames_never_get_answered() -> None:
    b = make_core("B")
    b.open_socket(2, "pull")
    from exon.core.frames import encode_error

    b.receive_frame("A", encode_error(1, 77, 0, ErrorCode.SOCKET_NOT_FOUND), now=0)
    b.receive_frame("A", encode_error(1, 2, 0, ErrorCode.SOCKET_NOT_LINKED), now=0)
    assert b.frames_to_send() == []


def test_send_before_link_and_wrong_order_raise() -> None:
    a = make_core("A")
    a.open_socket(1, "push")
    with pytest.raises(SocketNotLinked):
        a.send(1, b"x", destination=("B", 2), now=0)
    with pytest.raises(StateError):
        a.send(9, b"x", now=0)


def test_unlink_during_handshake_cancels() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    a.unlink(1, ("B", 2), now=0)
    (ev,) = a.events()
    assert isinstance(ev, LinkRefused)
    assert ev.decision is Decision.CANCELLED
    pump([a, b])
    assert a.links(1) == {}
    assert b.links(2) == {}


def test_shared_secret_policy_links_when_both_know_the_secret() -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "req", policy=SharedSecretPolicy(b"s3cret"))
    b.open_socket(2, "rep", policy=SharedSecretPolicy(b"s3cret"))
    a.link(1, ("B", 2), now=0)
    pump([a, b])
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED


@pytest.mark.parametrize("client_policy", [None, SharedSecretPolicy(b"wrong")])
def test_shared_secret_policy_refuses_unauthenticated_peers(client_policy) -> None:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "req", policy=client_policy)
    b.open_socket(2, "rep", policy=SharedSecretPolicy(b"s3cret"))
    a.link(1, ("B", 2), now=0)
    pump([a, b])
    (ev,) = a.events()
    assert isinstance(ev, LinkRefused)
    assert ev.decision is Decision.UNAUTHORIZED
    assert ev.permanent
    assert b.links(2) == {}
    # and it can send no data: forged DATA gets SOCKET_NOT_LINKED, nothing delivered
    b.receive_frame("A", encode_data(1, 2, 1, b"sneaky"), now=0)
    assert not any(isinstance(e, MessageReceived) for e in b.events())
    assert decode_frame(b.frames_to_send()[0][1]).error == ErrorCode.SOCKET_NOT_LINKED


def test_secret_server_refuses_replayed_link() -> None:
    a, b = make_core("A"), make_core("B")
    server_policy = SharedSecretPolicy(b"k")
    a.open_socket(1, "req", policy=SharedSecretPolicy(b"k"))
    b.open_socket(2, "rep", policy=server_policy)
    a.link(1, ("B", 2), now=0)
    (link_frame,) = a.frames_to_send()
    b.receive_frame("A", link_frame[1], now=0)
    assert decode_frame(b.frames_to_send()[0][1]).decision is Decision.ACCEPTED
    b.close_socket(2, now=0, force=True)  # B forgets the link, keeps the policy
    b.open_socket(2, "rep", policy=server_policy)
    b.receive_frame("A", link_frame[1], now=100.0)  # a captured LINK, replayed
    ack = decode_frame(b.frames_to_send()[0][1])
    assert ack.decision is Decision.UNAUTHORIZED


def test_peer_gone_breaks_links_and_loses_cookies() -> None:
    p = link_pair()
    p.a.send(1, b"x", cookie="c1", now=0)
    p.a.peer_gone("B", now=0)
    ev = p.a.events()
    assert kinds(ev) == ["CookieLost", "LinkClosed"]
    assert isinstance(ev[1], LinkClosed)
    assert ev[1].error
    assert ev[1].reason == "PEER_GONE"
    assert p.a.links(1) == {}


def test_a_late_unlink_of_a_cancelled_attempt_does_not_cancel_the_next_one() -> None:
    """A's first attempt is cancelled while its LINK and UNLINK(0) still wait to reach B
    (the node waits for the connection); B then answers that old attempt (LINKACK, then
    UNLINK) while A's next attempt is in LINK_SENT. The old UNLINK must not cancel it."""
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    a.unlink(1, ("B", 2), now=0)
    a.events()
    a.link(1, ("B", 2), now=1)
    transfer(a, b, now=1)  # LINK(old), UNLINK(old, 0), LINK(new), in order
    for _address, data in b.frames_to_send():  # LINKACK(old), UNLINK(old), LINKACK(new)
        a.receive_frame("B", data, now=1)
    pump([a, b], now=1)
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert not [e for e in a.events() if isinstance(e, LinkRefused)]
    assert a.send(1, b"after", now=1) == PeerId("B", 2)
    pump([a, b], now=1)
    assert [e.payload for e in b.events() if isinstance(e, MessageReceived)] == [b"after"]
