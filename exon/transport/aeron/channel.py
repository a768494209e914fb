"""Channel URIs: ``aeron:ipc`` and ``aeron:udp?endpoint=HOST:PORT|key=value|...``.

:func:`parse` validates a channel and returns a :class:`ChannelUri`; a malformed one raises
:class:`exon.errors.ChannelUriError` whose ``part`` attribute (and message) names the bad
part: ``"uri"`` (empty, too long, a character outside printable ASCII), ``"scheme"``,
``"media"``, a parameter key, or the raw text of a parameter without ``=``.

The C driver parses the same grammar (``exon/native/src/uri/exon_uri.c``); a parity test runs
both on the same inputs, so any rule changed here must change there too.

Grammar (Aeron's, with exon's checks):

* ``[aeron-spy:]aeron:MEDIA[?key=value|key=value...]``, at most 4095 characters of printable
  ASCII; ``MEDIA`` is ``udp`` or ``ipc``.
* keys are unique and known (Aeron's list); values are non-empty.
* ``endpoint``/``control``: ``HOST:PORT`` with HOST a name/IPv4 (``[A-Za-z0-9._-]``) or a
  bracketed IPv6 address, PORT 0..65535 (0 = pick a free port). ``interface``:
  ``HOST[:PORT][/PREFIX]``. A UDP channel needs ``endpoint`` or ``control``; an IPC
  channel takes neither (nor ``interface``/``ttl``).
* sizes (``mtu``, ``term-length``, ``so-sndbuf``, ``so-rcvbuf``, ``rcv-wnd``, ``pub-wnd``)
  accept a ``k``/``m``/``g`` suffix (powers of 1024); ``mtu`` is a multiple of 32 in
  (32, 65504]; ``term-length`` a power of two in [64 KiB, 1 GiB].
* durations (``linger``, ``nak-delay``, ``untethered-*``) are integers with an optional
  ``ns``/``us``/``ms``/``s`` suffix (default ns).
* ``fc`` (multicast flow control) is ``min``, ``max`` or ``min,t:DURATION``.
* ``init-term-id``, ``term-id`` and ``term-offset`` come together; ``term-offset`` is a
  multiple of 32 not beyond ``term-length`` (when given).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from exon.errors import ChannelUriError
from exon.transport.aeron import layout as L

__all__ = ["KNOWN_KEYS", "MAX_URI_LENGTH", "ChannelUri", "Endpoint", "parse"]

MAX_URI_LENGTH: Final = 4095
PART_MAX: Final = 120  # longest "part" quoted in an error (the C twin has the same cap)

KNOWN_KEYS: Final = frozenset(
    {
        "endpoint", "interface", "control", "control-mode", "ttl", "reliable", "mtu",
        "term-length", "init-term-id", "term-id", "term-offset", "session-id", "linger",
        "sparse", "eos", "tether", "tags", "alias", "group", "rejoin", "fc", "gtag", "cc",
        "ssc", "ats", "so-sndbuf", "so-rcvbuf", "rcv-wnd", "pub-wnd", "nak-delay",
        "max-resend", "stream-id", "response-correlation-id",
        "untethered-window-limit-timeout", "untethered-linger-timeout",
        "untethered-resting-timeout", "media-rcv-ts-offset", "channel-rcv-ts-offset",
        "channel-snd-ts-offset",
    }
)
_UDP_ONLY = ("endpoint", "control", "interface", "ttl")
_SIZE_KEYS = ("so-sndbuf", "so-rcvbuf", "rcv-wnd", "pub-wnd")
_DURATION_KEYS = (
    "linger", "nak-delay", "untethered-window-limit-timeout", "untethered-linger-timeout",
    "untethered-resting-timeout",
)
_BOOL_KEYS = ("reliable", "sparse", "eos", "tether", "rejoin", "group")
_INT32_KEYS = ("session-id", "init-term-id", "term-id", "stream-id")
_CONTROL_MODES = ("manual", "dynamic", "response")

_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}")
_IPV6_TEXT = re.compile(r"[0-9A-Fa-f:.]{2,45}(%[A-Za-z0-9._-]{1,15})?")
_DIGITS = re.compile(r"[0-9]{1,18}")
_INT = re.compile(r"-?[0-9]{1,11}")
_SIZE = re.compile(r"([0-9]{1,12})([kKmMgG]?)")
_DURATION = re.compile(r"([0-9]{1,18})(ns|us|ms|s)?")
_SIZE_SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_DURATION_SCALE = {None: 1, "ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A socket address from a URI: ``host`` without brackets, ``port`` 0 = any free port."""

    host: str
    port: int

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if self.is_ipv6 else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelUri:
    """A validated channel. ``params`` keeps every parameter as written."""

    media: str  #: "udp" or "ipc"
    spy: bool = False
    params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    endpoint: Endpoint | None = None
    control: Endpoint | None = None
    interface: str | None = None
    mtu: int | None = None
    term_length: int | None = None
    session_id: int | None = None
    linger_ns: int | None = None
    init_term_id: int | None = None
    term_id: int | None = None
    term_offset: int | None = None
    ttl: int | None = None
    so_sndbuf: int | None = None
    so_rcvbuf: int | None = None
    rcv_wnd: int | None = None
    pub_wnd: int | None = None
    nak_delay_ns: int | None = None
    max_resend: int | None = None
    stream_id: int | None = None
    reliable: bool | None = None
    sparse: bool | None = None
    eos: bool | None = None
    tether: bool | None = None
    rejoin: bool | None = None
    group: bool | None = None
    fc: str | None = None  #: "min" (the slowest receiver) or "max" (the fastest)
    fc_timeout_ns: int | None = None  #: ``fc=min,t:DURATION``: drop a silent receiver after

    @property
    def is_udp(self) -> bool:
        return self.media == "udp"

    def __str__(self) -> str:
        head = ("aeron-spy:" if self.spy else "") + "aeron:" + self.media
        if not self.params:
            return head
        return head + "?" + "|".join(f"{k}={v}" for k, v in self.params.items())


def _fail(uri: str, part: str, reason: str) -> ChannelUriError:
    part = part[:PART_MAX]
    err = ChannelUriError(f"invalid channel URI, {reason} [{part}]: {uri[:200]!r}")
    err.part = part  # type: ignore[attr-defined]
    return err


def _port(text: str) -> int | None:
    if not _DIGITS.fullmatch(text) or len(text) > 5:
        return None
    port = int(text)
    return port if port <= 65535 else None


def _ipv6_ok(text: str) -> bool:
    if not _IPV6_TEXT.fullmatch(text):
        return False
    address = text.split("%", 1)[0]
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def _host_port(text: str, *, port_required: bool) -> tuple[str, int | None] | None:
    """Split ``HOST:PORT`` (``[V6]:PORT``); None when malformed."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return None
        host, rest = text[1:close], text[close + 1 :]
        if not _ipv6_ok(host):
            return None
    else:
        colon = text.rfind(":")
        host, rest = (text, "") if colon < 0 else (text[:colon], text[colon:])
        if not _NAME.fullmatch(host):
            return None
    if not rest:
        return None if port_required else (host, None)
    if not rest.startswith(":"):
        return None
    port = _port(rest[1:])
    return None if port is None else (host, port)


def _size(text: str) -> int | None:
    m = _SIZE.fullmatch(text)
    if not m:
        return None
    value = int(m.group(1)) * _SIZE_SCALE[m.group(2).lower()]
    return value if value <= _INT32_MAX else None


def _duration(text: str) -> int | None:
    m = _DURATION.fullmatch(text)
    if not m:
        return None
    value = int(m.group(1)) * _DURATION_SCALE[m.group(2)]
    return value if value <= _INT64_MAX else None


def _int32(text: str) -> int | None:
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT32_MIN <= value <= _INT32_MAX else None


# (key, converter, what a good value looks like, ChannelUri field or "" when only checked),
# in the order _typed checks them
_SCALAR_PARAMS: Final = (
    *[(key, _size, "a size (digits with optional k/m/g)", key.replace("-", "_"))
      for key in _SIZE_KEYS],
    *[(key, _duration, "a duration (digits with optional ns/us/ms/s)",
       {"linger": "linger_ns", "nak-delay": "nak_delay_ns"}.get(key, ""))
      for key in _DURATION_KEYS],
    *[(key, _int32, "a 32-bit integer", key.replace("-", "_")) for key in _INT32_KEYS],
)


def parse(uri: str) -> ChannelUri:
    """Validate ``uri`` and return its :class:`ChannelUri`; raise ``ChannelUriError``."""
    if not isinstance(uri, str):
        raise TypeError(f"channel URI must be a str, not {type(uri).__name__}")
    if not uri:
        raise _fail(uri, "uri", "empty")
    if len(uri) > MAX_URI_LENGTH:
        raise _fail(uri, "uri", f"longer than {MAX_URI_LENGTH} characters")
    if any(not 0x21 <= ord(c) <= 0x7E for c in uri):
        raise _fail(uri, "uri", "characters outside printable ASCII")
    rest = uri
    spy = rest.startswith("aeron-spy:")
    if spy:
        rest = rest[len("aeron-spy:") :]
    if not rest.startswith("aeron:"):
        raise _fail(uri, "scheme", "expected 'aeron:'")
    rest = rest[len("aeron:") :]
    media, sep, query = rest.partition("?")
    if media not in ("udp", "ipc"):
        raise _fail(uri, "media", f"unknown media {media[:40]!r}, expected udp or ipc")
    params: dict[str, str] = {}
    if sep:
        for pair in query.split("|"):
            key, eq, value = pair.partition("=")
            if not eq or not key:
                raise _fail(uri, pair, "expected key=value")
            if not value:
                raise _fail(uri, key, "empty value")
            if key not in KNOWN_KEYS:
                raise _fail(uri, key, "unknown parameter")
            if key in params:
                raise _fail(uri, key, "parameter given twice")
            params[key] = value
    return _typed(uri, media, spy, params)


def _typed(uri: str, media: str, spy: bool, params: dict[str, str]) -> ChannelUri:
    out: dict[str, object] = {}

    def bad(key: str, reason: str) -> ChannelUriError:
        return _fail(uri, key, reason)

    if media == "ipc":
        for key in _UDP_ONLY:
            if key in params:
                raise bad(key, "not a parameter of an ipc channel")
    for key in ("endpoint", "control"):
        if key in params:
            hp = _host_port(params[key], port_required=True)
            if hp is None or hp[1] is None:
                raise bad(key, "expected HOST:PORT with PORT in 0..65535")
            out[key] = Endpoint(hp[0], hp[1])
    if "interface" in params:
        text, slash, prefix = params["interface"].partition("/")
        if slash and not (_DIGITS.fullmatch(prefix) and len(prefix) <= 3 and int(prefix) <= 128):
            raise bad("interface", "bad prefix length")
        if _host_port(text, port_required=False) is None:
            raise bad("interface", "expected HOST[:PORT][/PREFIX]")
        out["interface"] = params["interface"]
    if media == "udp" and "endpoint" not in out and "control" not in out:
        raise bad("endpoint", "a udp channel needs endpoint or control")
    if "mtu" in params:
        mtu = _size(params["mtu"])
        if mtu is None or mtu % L.FRAME_ALIGNMENT or not 32 < mtu <= L.MAX_UDP_PAYLOAD_LENGTH:
            raise bad("mtu", "expected a multiple of 32 in (32, 65504]")
        out["mtu"] = mtu
    if "term-length" in params:
        tl = _size(params["term-length"])
        if tl is None or not L.TERM_MIN_LENGTH <= tl <= L.TERM_MAX_LENGTH or tl & (tl - 1):
            raise bad("term-length", "expected a power of two in [64k, 1g]")
        out["term_length"] = tl
    for key, convert, expected, name in _SCALAR_PARAMS:
        if key in params:
            value = convert(params[key])
            if value is None:
                raise bad(key, f"expected {expected}")
            if name:
                out[name] = value
    for key in _BOOL_KEYS:
        if key in params:
            if params[key] not in ("true", "false"):
                raise bad(key, "expected true or false")
            out[key] = params[key] == "true"
    if "ttl" in params:
        ttl = _port(params["ttl"])
        if ttl is None or ttl > 255:
            raise bad("ttl", "expected 0..255")
        out["ttl"] = ttl
    if "max-resend" in params:
        mr = _port(params["max-resend"])
        if mr is None or not 1 <= mr <= 256:
            raise bad("max-resend", "expected 1..256")
        out["max_resend"] = mr
    if "fc" in params:
        head, comma, tail = params["fc"].partition(",")
        timeout = _duration(tail[2:]) if comma and tail.startswith("t:") else None
        if head not in ("min", "max") or (comma and (head != "min" or timeout is None)):
            raise bad("fc", "expected min, max or min,t:DURATION")
        out["fc"] = head
        if comma:
            out["fc_timeout_ns"] = timeout
    if "control-mode" in params and params["control-mode"] not in _CONTROL_MODES:
        raise bad("control-mode", "expected manual, dynamic or response")
    if "term-offset" in params:
        to = _size(params["term-offset"])
        if to is None or to % L.FRAME_ALIGNMENT:
            raise bad("term-offset", "expected a multiple of 32")
        if to > int(out.get("term_length", L.TERM_MAX_LENGTH)):  # type: ignore[call-overload]
            raise bad("term-offset", "beyond term-length")
        out["term_offset"] = to
    explicit = [k for k in ("init-term-id", "term-id", "term-offset") if k in params]
    if explicit and len(explicit) != 3:
        missing = next(k for k in ("init-term-id", "term-id", "term-offset") if k not in params)
        raise bad(missing, "init-term-id, term-id and term-offset come together")
    return ChannelUri(media=media, spy=spy, params=MappingProxyType(params), **out)  # type: ignore[arg-type]
