"""A tiny stdlib reader for classic pcap files, enough to pull UDP payloads out of a capture.

Supports microsecond and nanosecond pcap magics in either byte order and the link types
Ethernet (1), Linux cooked (113) and raw IP (101, 12). IPv4 and IPv6 UDP only; anything
else is skipped. Used by tests and tools to replay real Aeron captures.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["UdpPacket", "read_udp"]

_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
_LINK_OFFSETS = {1: 14, 113: 16, 101: 0, 12: 0}


@dataclass(frozen=True, slots=True, kw_only=True)
class UdpPacket:
    number: int  #: 1-based packet number in the file
    timestamp: float  #: seconds
    src: tuple[str, int]
    dst: tuple[str, int]
    payload: bytes


def _udp(ip: bytes) -> tuple[str, str, bytes] | None:
    if not ip:
        return None
    version = ip[0] >> 4
    if version == 4 and len(ip) >= 20 and ip[9] == 17:
        ihl = (ip[0] & 0x0F) * 4
        src, dst = ipaddress.IPv4Address(ip[12:16]), ipaddress.IPv4Address(ip[16:20])
        return str(src), str(dst), ip[ihl:]
    if version == 6 and len(ip) >= 40 and ip[6] == 17:
        return str(ipaddress.IPv6Address(ip[8:24])), str(ipaddress.IPv6Address(ip[24:40])), ip[40:]
    return None


def read_udp(path: str | Path) -> Iterator[UdpPacket]:
    """Yield every UDP datagram in the pcap file at ``path``."""
    with open(path, "rb") as f:
        header = f.read(24)
        if len(header) < 24 or header[:4] not in _MAGICS:
            raise ValueError(f"{path}: not a classic pcap file")
        endian, unit = _MAGICS[header[:4]]
        (linktype,) = struct.unpack(endian + "I", header[20:24])
        skip = _LINK_OFFSETS.get(linktype & 0x0FFFFFFF)
        if skip is None:
            raise ValueError(f"{path}: unsupported link type {linktype}")
        record = struct.Struct(endian + "IIII")
        number = 0
        while True:
            head = f.read(16)
            if len(head) < 16:
                return
            ts_s, ts_frac, incl, _orig = record.unpack(head)
            data = f.read(incl)
            number += 1
            if linktype == 1 and len(data) >= 14 and data[12:14] == b"\x81\x00":
                data = data[4:]  # 802.1Q tag
            parsed = _udp(data[skip:])
            if parsed is None:
                continue
            src, dst, udp = parsed
            if len(udp) < 8:
                continue
            sport, dport, ulen = struct.unpack(">HHH", udp[:6])
            yield UdpPacket(
                number=number,
                timestamp=ts_s + ts_frac * unit,
                src=(src, sport),
                dst=(dst, dport),
                payload=udp[8:ulen] if ulen >= 8 else udp[8:],
            )
