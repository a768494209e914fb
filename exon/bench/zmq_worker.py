"""Worker processes for the pyzmq side of the benchmarks (``python -m exon.bench.zmq_worker``).

push ADDRESS N SIZE     send N messages of SIZE bytes, one per call
pull ADDRESS N          receive N messages; print seconds from first to last
rep ADDRESS N           answer N requests
req ADDRESS N SIZE      N round trips; print each in microseconds (after 10% warm-up)
"""

from __future__ import annotations

import sys
import time

import zmq


def main(argv: list[str]) -> None:
    role, address, count = argv[0], argv[1], int(argv[2])
    ctx = zmq.Context()
    if role == "push":
        size = int(argv[3])
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, -1)
        sock.connect(address)
        payload = b"x" * size
        send = sock.send
        for _ in range(count):
            send(payload)
        sock.close()
    elif role == "pull":
        sock = ctx.socket(zmq.PULL)
        sock.bind(address)
        recv = sock.recv
        recv()
        start = time.perf_counter()
        for _ in range(count - 1):
            recv()
        print(time.perf_counter() - start)
        sock.close()
    elif role == "rep":
        sock = ctx.socket(zmq.REP)
        sock.bind(address)
        for _ in range(count + count // 10):
            sock.send(sock.recv())
        sock.close()
    elif role == "req":
        size = int(argv[3])
        sock = ctx.socket(zmq.REQ)
        sock.connect(address)
        payload = b"x" * size
        warmup = count // 10
        for _ in range(warmup):
            sock.send(payload)
            sock.recv()
        samples = []
        clock = time.perf_counter_ns
        for _ in range(count):
            t0 = clock()
            sock.send(payload)
            sock.recv()
            samples.append((clock() - t0) / 1000.0)
        print(" ".join(f"{s:.2f}" for s in samples))
        sock.close()
    ctx.term()


if __name__ == "__main__":
    main(sys.argv[1:])
