"""A LINK that would replace an established link must come from the link's own stream
(issue #13: one forged LINK used to break a link silently).

The cores here get each frame with the ``channel`` (transport stream) it came on, as the
Node passes the Aeron image. "A" is a PUSH whose frames come on channel 1; an attacker
sends B a LINK claiming A's address and socket on channel 99.
"""

from __future__ import annotations

from exon.core.events import LinkClosed, LinkEstablished, LinkRefused, MessageReceived, PeerId
from exon.core.frames import Decision, FrameType, LinkMetadata, decode_frame, encode_link
from exon.core.link_state import LinkState
from exon.core.socket_core import SocketCore
from tests.core.helpers import make_core

A_CHANNEL, B_CHANNEL, FORGER = 1, 2, 99


def move(src: SocketCore, dst: SocketCore, channel: int, now: float = 0.0) -> list[bytes]:
    """Deliver every frame ``src`` wants sent to ``dst`` on ``channel``; the frames."""
    frames = [data for _address, data in src.frames_to_send()]
    for data in frames:
        dst.receive_frame(src.reply_address, data, now=now, channel=channel)
    return frames


def settle(a: SocketCore, b: SocketCore, now: float = 0.0, a_channel: int = A_CHANNEL) -> None:
    for _ in range(20):
        if not (move(a, b, a_channel, now) or move(b, a, B_CHANNEL, now)):
            return
    raise AssertionError("never settled")


def linked() -> tuple[SocketCore, SocketCore]:
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    settle(a, b)
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    a.events()
    b.events()
    return a, b


def forged_link(incarnation: int, node_id: str = "node-A") -> bytes:
    meta = LinkMetadata(socket_type="push", credits=1024, max_message_size=1 << 20,
                        node_id=node_id, reply_address="A", nonce=b"n" * 16)
    return encode_link(1, 2, incarnation, meta)


def test_a_forged_link_from_another_stream_leaves_the_link_alone() -> None:
    a, b = linked()
    peer_inc = b._sockets[2].links[PeerId("A", 1)].peer_incarnation
    assert peer_inc is not None
    for node_id in ("node-A", "node-restarted"):  # the forger may copy or make up the id
        b.receive_frame("A", forged_link(peer_inc + 1000, node_id), now=1, channel=FORGER)
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert b.statistics().relinks_refused == 2
    assert not [e for e in b.events() if isinstance(e, LinkClosed)]
    # B answered the claimed address: a temporary refusal, which the real A drops (it
    # answers a LINK A never sent), so A stays linked too
    answers = move(b, a, B_CHANNEL, now=1)
    assert [decode_frame(f).decision for f in answers] == [Decision.TEMPORARY] * 2
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert not [e for e in a.events() if isinstance(e, (LinkClosed, LinkRefused))]
    # and A's stream keeps flowing: every message arrives
    for i in range(50):
        a.send(1, b"m%d" % i, now=2)
    move(a, b, A_CHANNEL, now=2)
    got = [e.payload for e in b.events() if isinstance(e, MessageReceived)]
    assert got == [b"m%d" % i for i in range(50)]


def test_a_peer_that_restarted_relinks_once_its_old_stream_is_gone() -> None:
    a, b = linked()
    a.send(1, b"before", cookie="c", now=1)
    move(a, b, A_CHANNEL, now=1)
    b.events()
    # A's node restarts at the same address: a new core, a new stream (channel 3)
    a2 = make_core("A", seed=1)
    a2.node_id = "node-A-restarted"
    a2.open_socket(1, "push")
    a2.link(1, ("B", 2), now=2)
    settle(a2, b, now=2, a_channel=3)
    # refused for now (the old stream is alive as far as B knows): A2 retries
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    refusals = [e for e in a2.events() if isinstance(e, LinkRefused)]
    assert refusals
    assert refusals[0].decision is Decision.TEMPORARY
    assert refusals[0].retry_at is not None
    # the transport reports the old stream gone: the old link breaks, typed
    b.channel_gone("A", A_CHANNEL, now=3)
    closed = [e for e in b.events() if isinstance(e, LinkClosed)]
    assert [(e.reason, e.error) for e in closed] == [("PEER_GONE", True)]
    # A2's retry links
    a2.handle_timer(now=10)
    settle(a2, b, now=10, a_channel=3)
    assert a2.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    a2.send(1, b"after restart", now=11)
    move(a2, b, 3, now=11)
    assert [e.payload for e in b.events() if isinstance(e, MessageReceived)] == [
        b"after restart"]


def test_a_relink_on_the_links_own_stream_is_accepted_at_once() -> None:
    a, b = linked()
    # A's end broke on its side only (say, an abort) and A links again from the same node
    a.abort(1, ("B", 2), now=1)
    a.events()
    a.link(1, ("B", 2), now=1)
    settle(a, b, now=1)
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert [e.reason for e in b.events() if isinstance(e, LinkClosed)] == ["PEER_RELINKED"]
    assert b.statistics().relinks_refused == 0


def test_data_of_a_replaced_link_gets_an_error_not_silence() -> None:
    """If a link was replaced anyway (here: on its own stream, by a LINK the real sender
    did not send), the sender's next DATA is answered SOCKET_NOT_LINKED: it learns
    (BrokenLink, its cookies lost) instead of sending into a void."""
    a, b = linked()
    peer_inc = b._sockets[2].links[PeerId("A", 1)].peer_incarnation
    assert peer_inc is not None
    b.receive_frame("A", forged_link(peer_inc + 1), now=1, channel=A_CHANNEL)
    assert [e.reason for e in b.events() if isinstance(e, LinkClosed)] == ["PEER_RELINKED"]
    b.frames_to_send()  # the LINKACK for the forged LINK: the real A would drop it
    a.send(1, b"into the void?", cookie="c1", now=2)
    move(a, b, A_CHANNEL, now=2)
    assert not [e for e in b.events() if isinstance(e, MessageReceived)]
    answers = move(b, a, B_CHANNEL, now=2)
    assert [decode_frame(f).type for f in answers] == [FrameType.ERROR]
    events = a.events()
    assert [(e.reason, e.error) for e in events if isinstance(e, LinkClosed)] == [
        ("ERROR:SOCKET_NOT_LINKED", True)]
    assert [e.cookie for e in events if type(e).__name__ == "CookieLost"] == ["c1"]
    assert not [e for e in events if isinstance(e, LinkEstablished)]


def test_channel_gone_asks_to_replace_our_stream_only_when_the_peer_is_gone() -> None:
    """True (replace the stream to A) when links broke and none with A lives on; False for
    a stream that carried no link (a refused impostor's) or while live links remain."""
    _a, b = linked()
    b.receive_frame("A", forged_link(10**6), now=1, channel=FORGER)  # refused, no record
    assert b.channel_gone("A", FORGER, now=2) is False
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert b.channel_gone("A", A_CHANNEL, now=3) is True
    assert b.link_state(2, ("A", 1)) is LinkState.IDLE
    assert b.channel_gone("A", A_CHANNEL, now=4) is False  # nothing left to break


def test_a_restarted_peer_links_by_repeating_its_link_when_the_refusal_was_lost() -> None:
    """The restart at once: B's refusal went to the old node's stream, so A2 never sees it.
    A2 repeats its LINK (same incarnation) until B, once the old stream is gone, accepts."""
    _a, b = linked()
    a2 = make_core("A", seed=1)
    a2.node_id = "node-A-restarted"
    a2.open_socket(1, "push")
    a2.link(1, ("B", 2), now=2)
    (first,) = move(a2, b, 3, now=2)
    assert b.statistics().relinks_refused == 1
    b.frames_to_send()  # the TEMPORARY refusal: lost with the old stream
    assert a2.link_state(1, ("B", 2)) is LinkState.LINK_SENT
    repeats = []
    now = 2.0
    for _ in range(4):
        due = a2.next_timer()
        assert due is not None
        repeats.append(due - now)
        now = due
        a2.handle_timer(now=now)
        (frame,) = move(a2, b, 3, now=now)
        assert frame == first  # the same LINK: same incarnation and nonce
        b.frames_to_send()
    assert repeats == [1.0, 2.0, 4.0, 4.0]  # resend_initial, doubling, capped at resend_max
    assert a2.statistics().links_resent == 4
    assert b.statistics().relinks_refused == 5
    assert b.channel_gone("A", A_CHANNEL, now=now) is True
    b.events()
    now = a2.next_timer() or now
    a2.handle_timer(now=now)
    settle(a2, b, now=now, a_channel=3)
    assert a2.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert a2.next_timer() is None  # no repeat once answered


def test_a_repeated_link_gets_the_answer_again() -> None:
    """B in DECIDED answered a LINK whose answer was lost: the repeat is answered again,
    with metadata, and the handshake completes on it."""
    a, b = make_core("A"), make_core("B")
    a.open_socket(1, "push")
    b.open_socket(2, "pull")
    a.link(1, ("B", 2), now=0)
    move(a, b, A_CHANNEL)
    assert b.link_state(2, ("A", 1)) is LinkState.DECIDED
    b.frames_to_send()  # the LINKACK is lost
    due = a.next_timer()
    assert due == 1.0
    a.handle_timer(now=due)
    move(a, b, A_CHANNEL, now=due)
    (raw,) = [f for _x, f in b.frames_to_send()]
    again = decode_frame(raw)
    assert again.type is FrameType.LINKACK
    assert again.decision is Decision.ACCEPTED
    assert again.metadata is not None
    assert b.statistics().links_resent == 1
    a.receive_frame("B", raw, now=due, channel=B_CHANNEL)
    settle(a, b, now=due)
    assert a.link_state(1, ("B", 2)) is LinkState.ESTABLISHED
    assert b.link_state(2, ("A", 1)) is LinkState.ESTABLISHED
    assert [type(e) for e in a.events()] == [LinkEstablished]
