"""The C channel URI parser (driver) agrees with the Python one on every input."""

from __future__ import annotations

import random

import pytest

from exon.errors import ChannelUriError
from exon.native import ffi, lib
from exon.transport.aeron import channel

EDGE = [
    "", "aeron:ipc", "aeron:udp", "aeron:udp?", "aeron:udp?|", "aeron:ipc?", "aeron:ipc?alias=x",
    "aeron-spy:aeron:udp?endpoint=a:1", "aeron-spy:", "aeron:", "aeron:udpx?endpoint=a:1",
    "aeron:udp?endpoint=127.0.0.1:0", "aeron:udp?endpoint=[::1]:40123",
    "aeron:udp?endpoint=[::1]", "aeron:udp?endpoint=[::1]x1", "aeron:udp?endpoint=[]:1",
    "aeron:udp?endpoint=[::ffff:1.2.3.4]:9", "aeron:udp?endpoint=[fe80::1%eth0]:9",
    "aeron:udp?endpoint=[fe80::1%]:9", "aeron:udp?endpoint=[1::2::3]:9",
    "aeron:udp?endpoint=host:65535", "aeron:udp?endpoint=host:65536",
    "aeron:udp?endpoint=host:007", "aeron:udp?endpoint=host:123456", "aeron:udp?endpoint=a:b:1",
    "aeron:udp?control=a:1", "aeron:udp?control=a:1|control-mode=manual",
    "aeron:udp?endpoint=a:1|interface=eth0", "aeron:udp?endpoint=a:1|interface=1.2.3.4:5/24",
    "aeron:udp?endpoint=a:1|interface=1.2.3.4/", "aeron:udp?endpoint=a:1|interface=[::1]/128",
    "aeron:udp?endpoint=a:1|interface=[::1]/129", "aeron:udp?endpoint=a:1|interface=/1",
    "aeron:udp?endpoint=a:1|mtu=64", "aeron:udp?endpoint=a:1|mtu=1k",
    "aeron:udp?endpoint=a:1|mtu=32",
    "aeron:udp?endpoint=a:1|mtu=65504", "aeron:udp?endpoint=a:1|mtu=65536",
    "aeron:udp?endpoint=a:1|term-length=64k", "aeron:udp?endpoint=a:1|term-length=1g",
    "aeron:udp?endpoint=a:1|term-length=1G", "aeron:udp?endpoint=a:1|term-length=65535",
    "aeron:udp?endpoint=a:1|term-length=999999999999g",
    "aeron:udp?endpoint=a:1|session-id=-2147483648", "aeron:udp?endpoint=a:1|session-id=2147483647",
    "aeron:udp?endpoint=a:1|session-id=-2147483649", "aeron:udp?endpoint=a:1|session-id=-",
    "aeron:udp?endpoint=a:1|linger=0", "aeron:udp?endpoint=a:1|linger=9223372036854775807",
    "aeron:udp?endpoint=a:1|linger=999999999999999999s", "aeron:udp?endpoint=a:1|linger=5us",
    "aeron:udp?endpoint=a:1|linger=s", "aeron:udp?endpoint=a:1|nak-delay=1ms",
    "aeron:udp?endpoint=a:1|so-rcvbuf=2m|so-sndbuf=0|rcv-wnd=64k|pub-wnd=3g",
    "aeron:udp?endpoint=a:1|ttl=255", "aeron:udp?endpoint=a:1|ttl=256",
    "aeron:udp?endpoint=a:1|max-resend=256", "aeron:udp?endpoint=a:1|max-resend=0",
    "aeron:udp?endpoint=a:1|reliable=true|sparse=false|eos=true|tether=false|rejoin=true|group=false",
    "aeron:udp?endpoint=a:1|reliable=TRUE",
    "aeron:udp?endpoint=a:1|init-term-id=1|term-id=2|term-offset=32",
    "aeron:udp?endpoint=a:1|init-term-id=1|term-id=2", "aeron:udp?endpoint=a:1|term-offset=33",
    "aeron:udp?endpoint=a:1|term-length=64k|init-term-id=1|term-id=2|term-offset=65536",
    "aeron:udp?endpoint=a:1|term-length=64k|init-term-id=1|term-id=2|term-offset=65568",
    "aeron:udp?endpoint=a:1|endpoint=b:2", "aeron:udp?endpoint=a:1|x=1", "aeron:udp?endpoint=a:1|=",
    "aeron:udp?endpoint=a:1||mtu=64", "aeron:udp?endpoint==a:1", "aeron:ipc?ttl=3",
    "aeron:udp?endpoint=a:1|" + "k" * 200 + "=1", "aeron:udp?" + "z" * 300,
    "aeron:udp?endpoint=" + "h" * 255 + ":1", "aeron:udp?endpoint=" + "h" * 256 + ":1",
    "aeron:udp?endpoint=a:1|alias=" + "x" * 4066, "aeron:udp?endpoint=a:1|alias=" + "x" * 4067,
    "aeron:udp?endpoint=224.0.1.1:40456|fc=min", "aeron:udp?endpoint=224.0.1.1:40456|fc=max",
    "aeron:udp?endpoint=a:1|fc=min,t:5s", "aeron:udp?endpoint=a:1|fc=min,t:",
    "aeron:udp?endpoint=a:1|fc=min,", "aeron:udp?endpoint=a:1|fc=max,t:1s",
    "aeron:udp?endpoint=a:1|fc=min,x:1s", "aeron:udp?endpoint=a:1|fc=tagged",
    "aeron:udp?endpoint=a:1|fc=min,t:5q",
    "aeron:udp?endpoint=a\x00:1", "aeron:udp?endpoint=\u00e9:1",
]

_KEYS = sorted(channel.KNOWN_KEYS)
_VALUES = [
    "1", "0", "-1", "64", "1408", "64k", "1m", "1g", "3g", "65536", "true", "false", "5s", "10ms",
    "1us", "7ns", "127.0.0.1:0", "localhost:40123", "[::1]:5", "[::1]", "a:1", "eth0", "1.2.3.4/24",
    "manual", "min", "max", "min,t:2s", "x", "-2147483648", "2147483648", "", "32", "33", "a b",
    "[::]:65535", ":1", "host:",
]


def _random_uri(rng: random.Random) -> str:
    head = rng.choice(["aeron:udp", "aeron:ipc", "aeron-spy:aeron:udp", "aeron:udp", "aeron:tcp"])
    if rng.random() < 0.1:
        return head
    pairs = []
    if head.endswith("udp") and rng.random() < 0.8:
        pairs.append(f"endpoint={rng.choice(_VALUES[16:22])}")
    for _ in range(rng.randint(0, 5)):
        key = rng.choice(_KEYS) if rng.random() < 0.95 else "bogus"
        pairs.append(f"{key}={rng.choice(_VALUES)}")
    rng.shuffle(pairs)
    text = head + "?" + "|".join(pairs)
    if rng.random() < 0.2:  # mutate a few characters
        chars = list(text)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(chars))
            chars[i] = rng.choice("=|?:[]/%-a0\x7f ")
        text = "".join(chars)
    return text


def _compare(text: str) -> None:
    data = text.encode("utf-8")
    out = ffi.new("exon_uri_t *")
    rc = lib.exon_uri_parse(data, len(data), out)
    try:
        uri = channel.parse(text)
    except ChannelUriError as exc:
        problem = exc
    else:
        problem = None
    if problem is not None:
        assert rc == lib.EXON_E_URI, f"C accepted {text!r}; Python said {problem}"
        assert ffi.string(out.error_part).decode() == problem.part, text  # type: ignore[attr-defined]
        return
    assert rc == 0, f"C refused {text!r}: {ffi.string(out.error_part)}"
    assert out.media == (lib.EXON_URI_MEDIA_UDP if uri.is_udp else lib.EXON_URI_MEDIA_IPC)
    assert out.spy == uri.spy
    for name in ("endpoint", "control"):
        ep = getattr(uri, name)
        c = getattr(out, name)
        assert bool(c.present) == (ep is not None), text
        if ep is not None:
            assert (ffi.string(c.host).decode(), c.port, bool(c.is_ipv6)) == (
                ep.host, ep.port, ep.is_ipv6)
    assert bool(out.has_interface) == (uri.interface is not None)
    if uri.interface is not None:
        assert ffi.string(out.interface_name).decode() == uri.interface
    assert out.mtu == (uri.mtu or 0)
    assert out.term_length == (uri.term_length or 0)
    for name in ("session_id", "init_term_id", "term_id", "stream_id"):
        value = getattr(uri, name)
        assert bool(getattr(out, "has_" + name)) == (value is not None), (text, name)
        if value is not None:
            assert getattr(out, name) == value
    for name in ("linger_ns", "nak_delay_ns", "term_offset", "ttl", "so_sndbuf", "so_rcvbuf",
                 "rcv_wnd", "pub_wnd"):
        value = getattr(uri, name)
        assert getattr(out, name) == (-1 if value is None else value), (text, name)
    assert out.max_resend == (uri.max_resend or 0)
    assert out.fc == {None: 0, "min": lib.EXON_URI_FC_MIN, "max": lib.EXON_URI_FC_MAX}[uri.fc], text
    assert out.fc_timeout_ns == (-1 if uri.fc_timeout_ns is None else uri.fc_timeout_ns), text
    for name in ("reliable", "sparse", "eos", "tether", "rejoin", "group"):
        value = getattr(uri, name)
        assert getattr(out, name) == (-1 if value is None else int(value)), (text, name)


@pytest.mark.parametrize("text", EDGE)
def test_edge_cases_agree(text: str) -> None:
    _compare(text)


def test_random_inputs_agree() -> None:
    rng = random.Random(20261122)
    accepted = 0
    for _ in range(3000):
        text = _random_uri(rng)
        _compare(text)
        try:
            channel.parse(text)
            accepted += 1
        except ChannelUriError:
            pass
    assert 100 < accepted < 2900  # the generator exercises both outcomes


def test_c_error_text_names_the_part() -> None:
    out = ffi.new("exon_uri_t *")
    data = b"aeron:udp?endpoint=a:1|mtu=33"
    assert lib.exon_uri_parse(data, len(data), out) == lib.EXON_E_URI
    assert "[mtu]" in ffi.string(lib.exon_last_error()).decode()
