"""The real Aeron 1.15.1 capture decodes with exon's codecs and re-encodes byte for byte."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from exon.errors import FrameDecodeError
from exon.transport.aeron import frames as F
from exon.transport.aeron.pcap import read_udp

REPO = Path(__file__).resolve().parents[3]
CAPTURE = REPO.parent / "shared" / "research" / "aeron-1.15.1-udp.pcap"


@pytest.fixture(scope="module")
def packets() -> list:
    if not CAPTURE.exists():
        pytest.skip(f"capture not found at {CAPTURE}")
    return list(read_udp(CAPTURE))


def _kind(frame: F.Frame) -> str:
    if isinstance(frame, F.DataFrame):
        if frame.is_heartbeat:
            return "HB+EOS" if frame.is_eos else "HB"
        return "DATA"
    return type(frame).__name__


def test_every_datagram_round_trips_byte_for_byte(packets: list) -> None:
    assert len(packets) > 100
    counts: collections.Counter[str] = collections.Counter()
    empty = 0
    for packet in packets:
        if not packet.payload:  # the capture holds one empty datagram; it is not a frame
            empty += 1
            with pytest.raises(FrameDecodeError):
                F.split_datagram(packet.payload)
            continue
        frames = F.split_datagram(packet.payload)
        assert F.encode_datagram(frames) == packet.payload, f"packet #{packet.number}"
        counts.update(_kind(f) for f in frames)
    assert empty <= 1
    # the counts the reference decoder reports for this capture
    assert counts == {
        "DATA": 2064, "HB": 109, "HB+EOS": 135, "NakFrame": 7, "PadFrame": 4,
        "RttmFrame": 2, "SetupFrame": 9, "StatusMessage": 76,
    }
