"""Numbered UDP datagrams, to show what a fault does (run in a namespace by the tests).

``python -m tests.chaos.probe recv PORT``: count datagrams until a line (or the end) on
stdin (the sender is done and the caller waited as long as it wanted), then print one JSON
line: how many arrived, the distinct numbers, inversions (a datagram numbered below one
that came before it) and the one-way delays (sender and receiver share the kernel's
monotonic clock).

``python -m tests.chaos.probe send HOST PORT COUNT``: COUNT datagrams, 200 us apart, each
``(number, monotonic_ns)``.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time

DATAGRAM = struct.Struct("<Qq")


def receive(port: int) -> dict[str, object]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", port))
    s.setblocking(False)
    print(json.dumps({"ready": True}), flush=True)
    numbers: list[int] = []
    delays: list[float] = []
    poller = select.poll()
    poller.register(s, select.POLLIN)
    poller.register(sys.stdin, select.POLLIN)
    stop = False
    while not stop:
        for fd, _event in poller.poll(1000):
            if fd != s.fileno():
                stop = True  # a line (or EOF) on stdin: the sender is done
                continue
            while True:
                try:
                    data = s.recv(2048)
                except BlockingIOError:
                    break
                number, sent_ns = DATAGRAM.unpack_from(data)
                delays.append((time.monotonic_ns() - sent_ns) / 1e6)
                numbers.append(number)
    highest = -1
    inversions = 0
    for n in numbers:
        if n < highest:
            inversions += 1
        highest = max(highest, n)
    delays.sort()
    return {"received": len(numbers), "distinct": len(set(numbers)),
            "inversions": inversions,
            "delay_ms_min": delays[0] if delays else None,
            "delay_ms_median": delays[len(delays) // 2] if delays else None,
            "under_5ms": sum(1 for d in delays if d < 5.0),
            "over_9ms": sum(1 for d in delays if d >= 9.0)}


def send(host: str, port: int, count: int) -> dict[str, object]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for n in range(count):
        s.sendto(DATAGRAM.pack(n, time.monotonic_ns()) + b"x" * 48, (host, port))
        time.sleep(0.0002)
    return {"sent": count}


def main(argv: list[str]) -> int:
    if argv[:1] == ["recv"] and len(argv) == 2:
        print(json.dumps(receive(int(argv[1]))), flush=True)
        return 0
    if argv[:1] == ["send"] and len(argv) == 4:
        print(json.dumps(send(argv[1], int(argv[2]), int(argv[3]))), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
