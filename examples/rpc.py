"""Remote procedure calls over REQ/REP: two servers, one client, a call that times out.

    python examples/rpc.py [--calls 20]

Each server is a REP socket answering ``add A B`` with the sum (and ``slow`` after a
pause). The client's REQ is linked with both and sends each request to the next one
(round-robin); it accepts only the reply to its pending request. A call that times out is
abandoned: its late reply is dropped (``stale_dropped``) and the next call works as usual.

Uses the media driver of ``$EXON_NODE_DRIVER_DIR`` when set, else the host's (``exon
driver``) if one runs, else embeds one; it says which.
Prints ``ok`` and exits 0 when every answer was right.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import exon

TIMEOUT = 10.0


def make_node() -> exon.Node:
    """A node on the driver of ``$EXON_NODE_DRIVER_DIR``, else the host's (``exon
    driver``) if one runs, else a driver of its own; says which."""
    node = exon.Node("127.0.0.1:0", driver_dir=os.environ.get("EXON_NODE_DRIVER_DIR") or None)
    if node.driver_kind == "embedded":
        print("no media driver running here: this node embeds one of its own")
    else:
        print(f"using the media driver in {node.driver_dir}")
    return node


def serve(rep: exon.Socket, name: str, served: list[str], stop: threading.Event) -> None:
    """Answer requests until ``stop`` is set: receive, then send, strictly alternating."""
    while not stop.is_set():
        try:
            request = rep.receive(timeout=0.1)
        except exon.Timeout:
            continue
        words = request.payload.split()
        if words[0] == b"slow":
            time.sleep(0.5)
            rep.send(b"late", timeout=TIMEOUT)
        else:
            rep.send(b"%d" % (int(words[1]) + int(words[2])), timeout=TIMEOUT)
        served.append(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()

    stop = threading.Event()
    served: list[str] = []
    with make_node() as server, make_node() as client:
        reps = {"A": server.socket("rep", tag=1), "B": server.socket("rep", tag=2)}
        threads = [threading.Thread(target=serve, args=(rep, name, served, stop))
                   for name, rep in reps.items()]
        for t in threads:
            t.start()
        req = client.socket("req")
        req.link(f"{server.address}/1", timeout=TIMEOUT)
        req.link(f"{server.address}/2", timeout=TIMEOUT)

        def call(request: bytes, timeout: float = TIMEOUT) -> bytes:
            req.send(request, timeout=timeout)
            return req.receive(timeout=timeout).payload

        wrong = 0
        for i in range(args.calls):
            wrong += call(b"add %d %d" % (i, 2 * i)) != b"%d" % (3 * i)
        try:
            call(b"slow", timeout=0.1)
            timed_out = False
        except exon.Timeout as exc:
            print(f"a slow call: {type(exc).__name__}: {exc}")
            timed_out = True
        time.sleep(0.6)  # the late reply to "slow" arrives meanwhile
        after = call(b"add 40 2")  # this receive drops the late reply: it is not ours
        stale = req.stale_dropped
        stop.set()
        for t in threads:
            t.join(TIMEOUT)

    print(f"calls {args.calls}, wrong answers {wrong}, served by A {served.count('A')} "
          f"and by B {served.count('B')}")
    print(f"after the timeout: add 40 2 = {after.decode()}, stale replies dropped {stale}")
    ok = wrong == 0 and timed_out and after == b"42" and stale == 1
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
