"""Worker processes for exon's side of the benchmarks (``python -m exon.bench.exon_worker``).

offer DIR CHANNEL STREAM N SIZE   connect to the driver of DIR, offer N messages of SIZE bytes,
                                  one ``offer`` call per message (retrying on back pressure),
                                  then hold the publication open until stdin closes
"""

from __future__ import annotations

import sys
import time

from exon.transport.aeron import Aeron
from exon.transport.aeron.publication import BACK_PRESSURED, NOT_CONNECTED


def offer(directory: str, channel: str, stream_id: int, count: int, size: int) -> None:
    with Aeron.connect(dir=directory) as aeron:
        pub = aeron.add_publication(channel, stream_id)
        deadline = time.monotonic() + 10.0
        while not pub.is_connected:
            if time.monotonic() > deadline:
                raise SystemExit("publication never connected")
            time.sleep(0.001)
        payload = b"x" * size
        send = pub.offer
        sent = 0
        while sent < count:
            rc = send(payload)
            if rc >= 0:
                sent += 1
            elif rc not in (BACK_PRESSURED, NOT_CONNECTED, -3):
                raise SystemExit(f"offer failed: {rc}")
        # keep the publication open until the parent has read everything (stdin closes)
        sys.stdin.read()


def main(argv: list[str]) -> None:
    role = argv[0]
    if role == "offer":
        offer(argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
