"""Record a stream with the archive, restart the archive, then replay it by position.

    python examples/archive_replay.py [--orders 100] [--dir DIR]

An :class:`~exon.archive.ArchiveService` records what PUSH sockets send to its ingest PULL
(tag 10, recording ``orders``). A producer's cookie comes back once its message is on disk
(``fsync="data"``), so "every cookie came back" means "everything is recorded". The service
is then stopped and started again on the same directory (recovery), more orders are
recorded, and an :class:`~exon.archive.ArchiveClient` replays the recording from the start
and from the position of a record in the middle; :class:`~exon.archive.Archive` reads the
same files in-process. Prints ``ok`` and exits 0 when every replay returned exactly the
orders sent, in order.

The nodes use the host's media driver (``exon driver``) if one runs, else embed one; the
script says which.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile

import exon
from exon.archive import Archive, ArchiveClient, ArchiveService

TIMEOUT = 10.0


def produce(address: str, first: int, count: int) -> int:
    """Push orders ``first .. first+count-1`` with a cookie each; the cookies confirmed."""
    with exon.Node() as node:
        push = node.socket("push")
        push.link(f"{address}/10", timeout=TIMEOUT)
        for i in range(first, first + count):
            push.send(b"order %d" % i, cookie=i, timeout=TIMEOUT)
        cookies = [push.receive(timeout=TIMEOUT) for _ in range(count)]
    return sum(isinstance(c, exon.Cookie) for c in cookies)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=100)
    parser.add_argument("--dir", default=None, help="archive directory (default: a temp one)")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="exon-archive-example-")
    half = args.orders // 2
    try:
        with ArchiveService(directory, ingest={"orders": 10}, fsync="data") as service:
            node = service.node
            print("no media driver running here: the archive's node embeds one"
                  if node.driver_kind == "embedded"
                  else f"the archive uses the media driver in {node.driver_dir}")
            durable = produce(service.address, 0, half)
        print(f"first service: {durable}/{half} orders durable; service stopped")

        with ArchiveService(directory, ingest={"orders": 10}, fsync="data") as service:
            durable += produce(service.address, half, args.orders - half)
            with ArchiveClient(service.address, timeout=TIMEOUT) as client:
                info = client.recording("orders")
                records = list(client.replay("orders", start=0))
                middle = records[half]
                tail = list(client.replay("orders", start=middle.position))
        print(f"second service: {durable}/{args.orders} orders durable in all; "
              f"recording 'orders' ends at position {info.stop_position}")

        with Archive(directory) as local:  # the same files, read in-process
            local_payloads = [r.payload for r in local.replay("orders")]
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)

    expected = [b"order %d" % i for i in range(args.orders)]
    payloads = [r.payload for r in records]
    print(f"replayed {len(payloads)} records from position 0, in order: {payloads == expected}")
    print(f"replayed {len(tail)} records from position {middle.position} (record {half}): "
          f"first {tail[0].payload.decode()!r}")
    print(f"read {len(local_payloads)} records locally, same as replayed: "
          f"{local_payloads == payloads}")
    ok = (durable == args.orders and payloads == expected and local_payloads == expected
          and [r.payload for r in tail] == expected[half:])
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
