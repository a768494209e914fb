"""A userspace impairment bridge: the delay and reorder of the chaos suite (no netem here).

Run inside the middle namespace of a :class:`tests.chaos.netns.Lab`::

    python -m tests.chaos.relay IFACE_A IFACE_B

It opens an ``AF_PACKET`` socket on each interface (neither has an address) and forwards
every Ethernet frame that arrives on one out of the other, so the two end namespaces share
one link layer through it (ARP and IPv6 pass untouched). IPv4/UDP frames are impaired:

* each is held ``delay_ms`` before it goes out;
* with probability ``reorder_pct`` % it goes out at once instead (netem's meaning of
  reorder: it overtakes the frames being held), so the far side sees it early;
* ``block`` (both directions) drops every UDP frame (a partition; nftables does the same
  in the end namespaces, this one is for the relay's own tests).

The UDP checksum of a forwarded frame is set to 0 ("none", valid for IPv4): the sender's
veth leaves it to a checksum offload that a frame copied through a packet socket never
gets. Loss and duplication are nftables rules in the end namespaces, not here.

Control: one JSON object per line on stdin, one answer per line on stdout:
``{"op": "set", "delay_ms": 10, "reorder_pct": 25, "block": false, "seed": 1}``,
``{"op": "stats"}`` (counters per direction, "ab" and "ba"), ``{"op": "exit"}``.
End of stdin ends the relay too.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
_ETH_HEADER = 14
_BATCH = 256  # frames read from one socket before looking at the other


class Direction:
    """Counters of one direction of the bridge."""

    __slots__ = (
        "_arrivals",
        "_last_arrival",
        "blocked",
        "delayed",
        "early",
        "frames",
        "kernel_drops",
        "late",
        "passed",
        "send_errors",
        "sent",
        "udp",
    )

    def __init__(self) -> None:
        self.frames = 0  # every frame in
        self.udp = 0  # IPv4/UDP frames in
        self.passed = 0  # other frames forwarded at once
        self.delayed = 0  # UDP frames held delay_ms
        self.early = 0  # UDP frames sent at once (reorder)
        self.blocked = 0  # UDP frames dropped by block
        self.sent = 0  # frames written out
        self.send_errors = 0  # frames the kernel refused to take (counted, dropped)
        self.late = 0  # UDP frames that went out after a frame that arrived later
        self.kernel_drops = 0  # frames the receive socket lost (PACKET_STATISTICS)
        self._arrivals = 0
        self._last_arrival = -1  # arrival number of the last UDP frame sent

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__ if not name.startswith("_")}


def _open(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, ETH_P_ALL))
    for opt, force in ((socket.SO_RCVBUF, 33), (socket.SO_SNDBUF, 32)):  # *BUFFORCE
        try:
            s.setsockopt(socket.SOL_SOCKET, force, 8 << 20)
        except OSError:
            s.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
    s.setblocking(False)
    return s


def _udp_checksum_offset(frame: bytearray | bytes) -> int:
    """Offset of the UDP checksum in an IPv4/UDP Ethernet frame, or -1 for anything else."""
    if len(frame) < _ETH_HEADER + 28 or frame[12] != 0x08 or frame[13] != 0x00:
        return -1
    if frame[_ETH_HEADER + 9] != 17:
        return -1
    ihl = (frame[_ETH_HEADER] & 0x0F) * 4
    # a fragment other than the first carries no UDP header
    if struct.unpack_from("!H", frame, _ETH_HEADER + 6)[0] & 0x1FFF:
        return -1
    return _ETH_HEADER + ihl + 6


class Relay:
    def __init__(self, iface_a: str, iface_b: str) -> None:
        self.socks = [_open(iface_a), _open(iface_b)]
        self.dirs = [Direction(), Direction()]  # index: the receiving side (0: a->b)
        self.delay = 0.0
        self.reorder = 0.0
        self.block = False
        self.rng = random.Random(0)
        self.heap: list[tuple[float, int, int, bytes, int]] = []
        self.seq = 0

    def configure(self, cmd: dict[str, object]) -> None:
        if "delay_ms" in cmd:
            self.delay = float(cmd["delay_ms"]) / 1000.0  # type: ignore[arg-type]
        if "reorder_pct" in cmd:
            self.reorder = float(cmd["reorder_pct"]) / 100.0  # type: ignore[arg-type]
        if "block" in cmd:
            self.block = bool(cmd["block"])
        if "seed" in cmd:
            self.rng.seed(cmd["seed"])

    def stats(self) -> dict[str, object]:
        for side, s in enumerate(self.socks):
            try:
                raw = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
                _packets, drops = struct.unpack("II", raw)  # reading resets them
                self.dirs[side].kernel_drops += drops
            except OSError:
                pass
        return {"ab": self.dirs[0].as_dict(), "ba": self.dirs[1].as_dict(),
                "held": len(self.heap), "delay_ms": self.delay * 1000,
                "reorder_pct": self.reorder * 100, "block": self.block}

    def _emit(self, side: int, frame: bytes, arrival: int) -> None:
        d = self.dirs[side]
        if arrival >= 0:
            if arrival < d._last_arrival:
                d.late += 1
            else:
                d._last_arrival = arrival
        try:
            self.socks[1 - side].send(frame)
            d.sent += 1
        except OSError:
            d.send_errors += 1

    def _receive(self, side: int) -> None:
        s = self.socks[side]
        d = self.dirs[side]
        rng = self.rng.random
        clock = time.monotonic
        for _ in range(_BATCH):
            try:
                data, addr = s.recvfrom(65536)
            except BlockingIOError:
                return
            now = clock()  # per frame: a held one leaves no sooner than delay after it came
            if addr[2] == PACKET_OUTGOING:
                continue  # our own send, seen by the tap
            d.frames += 1
            off = _udp_checksum_offset(data)
            if off < 0:
                d.passed += 1
                self._emit(side, data, -1)
                continue
            d.udp += 1
            if self.block:
                d.blocked += 1
                continue
            frame = bytearray(data)
            frame[off] = frame[off + 1] = 0
            arrival = d._arrivals
            d._arrivals += 1
            if self.delay <= 0.0 or rng() < self.reorder:
                d.early += 1
                self._emit(side, bytes(frame), arrival)
            else:
                d.delayed += 1
                self.seq += 1
                heapq.heappush(self.heap, (now + self.delay, self.seq, side, bytes(frame),
                                           arrival))

    def _release(self, now: float) -> None:
        heap = self.heap
        while heap and heap[0][0] <= now:
            _due, _seq, side, frame, arrival = heapq.heappop(heap)
            self._emit(side, frame, arrival)

    def run(self, control_in: int, out) -> None:  # type: ignore[no-untyped-def]
        poller = select.poll()
        fds = {s.fileno(): i for i, s in enumerate(self.socks)}
        for fd in fds:
            poller.register(fd, select.POLLIN)
        poller.register(control_in, select.POLLIN)
        pending = b""
        while True:
            now = time.monotonic()
            self._release(now)
            timeout_ms = -1
            if self.heap:
                timeout_ms = max(0, int((self.heap[0][0] - now) * 1000) + 1)
            for fd, _event in poller.poll(timeout_ms):
                if fd == control_in:
                    chunk = os.read(control_in, 65536)
                    if not chunk:
                        return
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        if not line.strip():
                            continue
                        cmd = json.loads(line)
                        if cmd.get("op") == "exit":
                            return
                        if cmd.get("op") == "set":
                            self.configure(cmd)
                        out.write(json.dumps(self.stats()) + "\n")
                        out.flush()
                else:
                    self._receive(fds[fd])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.chaos.relay IFACE_A IFACE_B", file=sys.stderr)
        return 2
    relay = Relay(argv[0], argv[1])
    print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
    relay.run(sys.stdin.fileno(), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
