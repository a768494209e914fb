"""Channel URI parsing: what is accepted, and errors that name the bad part."""

from __future__ import annotations

import pytest

from exon.errors import ChannelUriError, ConfigurationError
from exon.transport.aeron.channel import MAX_URI_LENGTH, Endpoint, parse


def test_ipc() -> None:
    uri = parse("aeron:ipc")
    assert uri.media == "ipc"
    assert not uri.is_udp
    assert str(uri) == "aeron:ipc"
    assert parse("aeron:ipc?term-length=64k|linger=5s").linger_ns == 5_000_000_000


def test_udp_full() -> None:
    uri = parse(
        "aeron:udp?endpoint=127.0.0.1:40123|control=localhost:0|interface=10.0.0.1/24"
        "|mtu=1408|term-length=65536|session-id=-7|linger=10ms|so-rcvbuf=2m|nak-delay=1us"
        "|reliable=false|ttl=8|max-resend=16"
    )
    assert uri.endpoint == Endpoint("127.0.0.1", 40123)
    assert uri.control == Endpoint("localhost", 0)
    assert uri.interface == "10.0.0.1/24"
    assert (uri.mtu, uri.term_length, uri.session_id) == (1408, 65536, -7)
    assert uri.linger_ns == 10_000_000
    assert uri.so_rcvbuf == 2 * 1024 * 1024
    assert uri.nak_delay_ns == 1000
    assert uri.reliable is False
    assert (uri.ttl, uri.max_resend) == (8, 16)
    assert parse(str(uri)) == uri


def test_ipv6_and_port_zero() -> None:
    uri = parse("aeron:udp?endpoint=[::1]:0")
    assert uri.endpoint == Endpoint("::1", 0)
    assert uri.endpoint.is_ipv6
    assert str(uri.endpoint) == "[::1]:0"
    assert parse("aeron:udp?endpoint=[fe80::1%lo]:40123").endpoint == Endpoint("fe80::1%lo", 40123)


def test_spy_and_explicit_position() -> None:
    uri = parse("aeron-spy:aeron:udp?endpoint=h:1|init-term-id=5|term-id=7|term-offset=64")
    assert uri.spy
    assert (uri.init_term_id, uri.term_id, uri.term_offset) == (5, 7, 64)


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("", "uri"),
        ("aeron:udp?endpoint=a b:1", "uri"),
        ("aeron:udp?endpoint=é:1", "uri"),
        ("aeron:udp?endpoint=a:1" + "x" * MAX_URI_LENGTH, "uri"),
        ("aron:udp", "scheme"),
        ("aeron:tcp?endpoint=a:1", "media"),
        ("aeron:udp", "endpoint"),
        ("aeron:udp?", ""),
        ("aeron:udp?endpoint", "endpoint"),
        ("aeron:udp?=1", "=1"),
        ("aeron:udp?endpoint=", "endpoint"),
        ("aeron:udp?endpoint=a:1|bogus=2", "bogus"),
        ("aeron:udp?endpoint=a:1|endpoint=a:2", "endpoint"),
        ("aeron:udp?endpoint=a:65536", "endpoint"),
        ("aeron:udp?endpoint=a", "endpoint"),
        ("aeron:udp?endpoint=:5", "endpoint"),
        ("aeron:udp?endpoint=[::1:5", "endpoint"),
        ("aeron:udp?endpoint=[::g]:5", "endpoint"),
        ("aeron:udp?endpoint=a:1|control=b:x", "control"),
        ("aeron:udp?endpoint=a:1|interface=b/200", "interface"),
        ("aeron:udp?endpoint=a:1|mtu=33", "mtu"),
        ("aeron:udp?endpoint=a:1|mtu=65536", "mtu"),
        ("aeron:udp?endpoint=a:1|term-length=100000", "term-length"),
        ("aeron:udp?endpoint=a:1|term-length=2g", "term-length"),
        ("aeron:udp?endpoint=a:1|session-id=2147483648", "session-id"),
        ("aeron:udp?endpoint=a:1|linger=5h", "linger"),
        ("aeron:udp?endpoint=a:1|reliable=yes", "reliable"),
        ("aeron:udp?endpoint=a:1|ttl=256", "ttl"),
        ("aeron:udp?endpoint=a:1|max-resend=0", "max-resend"),
        ("aeron:udp?endpoint=a:1|control-mode=auto", "control-mode"),
        ("aeron:udp?endpoint=a:1|term-id=1|term-offset=0", "init-term-id"),
        ("aeron:udp?endpoint=a:1|term-length=64k|init-term-id=1|term-id=1|term-offset=1m",
         "term-offset"),
        ("aeron:ipc?endpoint=a:1", "endpoint"),
    ],
)
def test_errors_name_the_bad_part(text: str, part: str) -> None:
    with pytest.raises(ChannelUriError) as info:
        parse(text)
    assert info.value.part == part  # type: ignore[attr-defined]
    assert f"[{part}]" in str(info.value)
    assert isinstance(info.value, ConfigurationError)


def test_max_length_is_accepted() -> None:
    base = "aeron:udp?endpoint=a:1|alias="
    uri = parse(base + "x" * (MAX_URI_LENGTH - len(base)))
    assert len(str(uri)) == MAX_URI_LENGTH
