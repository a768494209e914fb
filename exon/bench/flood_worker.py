"""The garbage flooder of ``exon bench sockets --flood`` (and its test): a process of its
own that publishes on a node's IPC stream (found in its driver's node registry,
docs/protocol.md 2.15), HELLO first, then ``rate`` messages a second
that are no exon frame (random bytes) and, one in ten, well-formed DATA frames for
sockets that do not exist, until stdin closes or ``seconds`` pass. Prints ``ready`` once
its publication is connected, then at the end the number of messages it offered.

    python -m exon.bench.flood_worker DRIVER_DIR NODE_ADDRESS RATE SECONDS
"""

from __future__ import annotations

import random
import sys
import time

from exon.core.frames import encode_data
from exon.middleware.node_transport import encode_hello, registry_path
from exon.transport.aeron import Aeron

__all__ = ["flood", "garbage"]


def garbage(rng: random.Random) -> list[bytes]:
    """The flood's messages: 9 in 10 random bytes, 1 in 10 DATA for made-up sockets."""
    junk = [rng.randbytes(rng.randrange(1, 64)) for _ in range(900)]
    junk += [encode_data(rng.randrange(100, 200), rng.randrange(1000, 2000), 1, b"x")
             for _ in range(100)]
    rng.shuffle(junk)
    return junk


def flood(driver_dir: str, address: str, rate: float, seconds: float) -> int:
    """Offer the garbage to the node at ``address`` (of the driver in ``driver_dir``) at
    ``rate`` a second for ``seconds``; the messages offered."""
    with open(registry_path(driver_dir, address)) as f:
        stream_id = int(f.read().split()[0])
    junk = garbage(random.Random(32))
    sent = 0
    with Aeron.connect(driver_dir) as aeron:
        pub = aeron.add_exclusive_publication("aeron:ipc", stream_id)
        deadline = time.monotonic() + 10
        while pub.offer(encode_hello("127.0.0.1:9")) < 0:
            if time.monotonic() > deadline:
                raise SystemExit("the target node never connected")
            time.sleep(0.001)
        print("ready", flush=True)
        start = time.monotonic()
        end = start + seconds
        while (now := time.monotonic()) < end:
            due = int((now - start) * rate)
            while sent < due:
                if pub.offer(junk[sent % len(junk)]) < 0:
                    break  # back pressure: the node reads what it reads
                sent += 1
            time.sleep(0.0002)
        pub.close()
    return sent


def main(argv: list[str]) -> None:
    driver_dir, address, rate, seconds = argv
    print(flood(driver_dir, address, float(rate), float(seconds)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
