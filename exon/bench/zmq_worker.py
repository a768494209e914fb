"""Worker processes for the pyzmq side of the benchmarks (``python -m exon.bench.zmq_worker``).

push ADDRESS N SIZE     send N messages of SIZE bytes, one per call
pull ADDRESS N          receive N messages; print seconds from first to last
rep ADDRESS N           answer N requests
req ADDRESS N SIZE      N round trips; print each in microseconds (after 10% warm-up)
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import zmq

#: ``SERVER_PUBLIC,SERVER_SECRET,CLIENT_PUBLIC,CLIENT_SECRET`` (Z85, ``zmq.curve_keypair()``):
#: CURVE on every socket (``exon bench sockets --encrypted``)
CURVE_ENV = "EXON_BENCH_CURVE"


def _curve(sock: Any, server_side: bool) -> None:
    keys = os.environ.get(CURVE_ENV)
    if not keys:
        return
    server_public, server_secret, client_public, client_secret = (
        k.encode() for k in keys.split(","))
    if server_side:
        sock.curve_server = True
        sock.curve_secretkey = server_secret
        sock.curve_publickey = server_public
    else:
        sock.curve_serverkey = server_public
        sock.curve_publickey = client_public
        sock.curve_secretkey = client_secret


def main(argv: list[str]) -> None:
    role, address, count = argv[0], argv[1], int(argv[2])
    ctx = zmq.Context()
    real_socket = ctx.socket

    def socket_of(kind: int) -> Any:
        sock = real_socket(kind)
        _curve(sock, kind in (zmq.PULL, zmq.REP))
        return sock

    if role == "push":
        size = int(argv[3])
        sock = socket_of(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, -1)
        sock.connect(address)
        payload = b"x" * size
        send = sock.send
        for _ in range(count):
            send(payload)
        sock.close()
    elif role == "pull":
        sock = socket_of(zmq.PULL)
        sock.bind(address)
        recv = sock.recv
        recv()
        start = time.perf_counter()
        for _ in range(count - 1):
            recv()
        print(time.perf_counter() - start)
        sock.close()
    elif role == "rep":
        sock = socket_of(zmq.REP)
        sock.bind(address)
        for _ in range(count + count // 10):
            sock.send(sock.recv())
        sock.close()
    elif role == "req":
        size = int(argv[3])
        sock = socket_of(zmq.REQ)
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
