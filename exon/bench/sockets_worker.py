"""Worker processes for the exon side of ``exon bench sockets``
(``python -m exon.bench.sockets_worker ROLE DRIVER_DIR N [SIZE] [CREDITS]``).

DIR is a media driver's directory (both nodes on one driver: IPC between them) or "-"
(each node launches its own embedded driver: UDP over loopback between them).

pull DIR N CREDITS        print the node address, receive N messages, print seconds
                          from the first to the last
pull-many DIR N CREDITS B the same with receive_many(B)
pull-held DIR N CREDITS B the same with receive_held(B) + confirm(batch)
push DIR N SIZE PEER      send N messages of SIZE bytes to PEER, one per call; close
push-many DIR N SIZE B PEER  the same with send_many of B messages a call; print seconds
                          from the first call to the last one's return (before close),
                          then the process's CPU seconds over the same span
push-each DIR N SIZE B PEER  as push-many, one send per message (the same timing)
push-many-burst, push-each-burst DIR N SIZE B PEER  as above, but each call of B messages
                          (B sends) starts only once the link has credit for all of them;
                          print the seconds spent in those calls alone (no wait for credit
                          in them: the producer's own cost)
rep DIR N CREDITS         print the node address, answer N + N/10 requests
req DIR N SIZE PEER       N round trips after N/10 warm-up; print each in microseconds
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from exon.middleware.node import Node

#: ``SERVER_SECRET,CLIENT_SECRET`` (printable keys): every link of the run is encrypted
#: (``exon bench sockets --encrypted``); the server roles trust the client's key, the
#: client roles pin the server's
KEYS_ENV = "EXON_BENCH_KEYS"


def _policy(server_side: bool) -> Any:
    keys = os.environ.get(KEYS_ENV)
    if not keys:
        return None
    from exon.crypto import EncryptedPolicy, Keypair, key_from_text

    server, client = (Keypair(key_from_text(k)) for k in keys.split(","))
    if server_side:
        return EncryptedPolicy(server, trusted=[client.public])
    return EncryptedPolicy(client, peer_key=server.public)


def main(argv: list[str]) -> None:
    role, driver_dir, count = argv[0], argv[1], int(argv[2])
    server_side = role in ("pull", "pull-many", "pull-held", "rep")
    with Node("127.0.0.1:0", driver="embedded" if driver_dir == "-" else driver_dir) as node:
        node_socket = node.socket
        policy = _policy(server_side)

        def socket(kind: str, **options: Any) -> Any:
            return node_socket(kind, policy=policy, **options)

        if role == "pull":
            sock = socket("pull", tag=1, credits=int(argv[3]))
            print(f"{node.address}/1", flush=True)
            recv = sock.receive
            recv(timeout=60)
            start = time.perf_counter()
            for _ in range(count - 1):
                recv(timeout=60)
            print(time.perf_counter() - start, flush=True)
        elif role in ("pull-many", "pull-held"):
            sock = socket("pull", tag=1, credits=int(argv[3]))
            batch = int(argv[4])
            print(f"{node.address}/1", flush=True)
            if role == "pull-many":
                take = sock.receive_many
                left = count - len(take(batch, timeout=60))
                start = time.perf_counter()
                while left > 0:
                    left -= len(take(batch, timeout=60))
            else:
                hold, confirm = sock.receive_held, sock.confirm
                first = hold(batch, timeout=60)
                confirm(first)
                left = count - len(first)
                start = time.perf_counter()
                while left > 0:
                    held = hold(batch, timeout=60)
                    left -= len(held)
                    confirm(held)
            print(time.perf_counter() - start, flush=True)
        elif role == "push":
            size, peer = int(argv[3]), argv[4]
            sock = socket("push")
            sock.link(peer, timeout=10)
            payload = b"x" * size
            send = sock.send
            for _ in range(count):
                send(payload)
            sock.close(timeout=60)
        elif role in ("push-many", "push-each"):
            size, batch, peer = int(argv[3]), int(argv[4]), argv[5]
            sock = socket("push")
            sock.link(peer, timeout=10)
            payloads = [b"x" * size] * batch
            full, rest = divmod(count, batch)
            cpu = time.process_time()
            start = time.perf_counter()
            if role == "push-many":
                send_many = sock.send_many
                for _ in range(full):
                    send_many(payloads)
                send_many(payloads[:rest])
            else:
                send = sock.send
                for _ in range(full):
                    for payload in payloads:
                        send(payload)
                for payload in payloads[:rest]:
                    send(payload)
            print(time.perf_counter() - start, time.process_time() - cpu, flush=True)
            sock.close(timeout=60)
        elif role in ("push-many-burst", "push-each-burst"):
            size, batch, peer = int(argv[3]), int(argv[4]), argv[5]
            sock = socket("push")
            sock.link(peer, timeout=10)
            payloads = [b"x" * size] * batch
            # the bench peeks at the link's credit through the core (no public accessor)
            core, tag, lock = sock._core, sock.tag, sock._lock
            (link,) = core.established(tag)
            many = role == "push-many-burst"
            send, send_many = sock.send, sock.send_many
            spent = 0.0
            clock = time.perf_counter
            for _ in range(count // batch):
                give_up = clock() + 30
                while True:
                    with lock:
                        if core.credits(tag, link) >= batch:
                            break
                    if clock() > give_up:
                        raise SystemExit("no credit came back in 30 s")
                    time.sleep(0.0001)
                t0 = clock()
                if many:
                    send_many(payloads)
                else:
                    for payload in payloads:
                        send(payload)
                spent += clock() - t0
            send_many(payloads[:count % batch])
            print(spent, count // batch * batch, flush=True)
            sock.close(timeout=60)
        elif role == "rep":
            sock = socket("rep", tag=1, credits=int(argv[3]))
            print(f"{node.address}/1", flush=True)
            for _ in range(count + count // 10):
                sock.send(sock.receive(timeout=60).payload)
            sock.close(timeout=10)
        elif role == "req":
            size, peer = int(argv[3]), argv[4]
            sock = socket("req")
            sock.link(peer, timeout=10)
            payload = b"x" * size
            send, recv = sock.send, sock.receive
            for _ in range(count // 10):
                send(payload)
                recv(timeout=10)
            samples = []
            clock = time.perf_counter_ns
            for _ in range(count):
                t0 = clock()
                send(payload)
                recv(timeout=10)
                samples.append((clock() - t0) / 1000.0)
            print(" ".join(f"{s:.2f}" for s in samples), flush=True)
            sock.close(timeout=10)
        else:
            raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    import faulthandler
    import os
    import signal

    faulthandler.register(signal.SIGUSR1)  # a stuck run: `kill -USR1 PID` dumps the stacks

    if os.environ.get("EXON_BENCH_PROFILE"):
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.runcall(main, sys.argv[1:])
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        main(sys.argv[1:])
