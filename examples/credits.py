"""Credits: a slow receiver bounds how much a sender may have in flight.

    python examples/credits.py

The PULL grants its PUSH ``credits=4``: the PUSH may have four messages that the PULL's
application has not taken yet. ``send_nowait`` then raises ``exon.BackPressured`` (a
blocking ``send`` would wait, up to its timeout, and raise ``exon.Timeout``). Each
``receive()`` on the PULL gives credit back; the PUSH can send again once the grant reached
it. Cookies report, per message, that the receiving application took it.

Uses the media driver of ``$EXON_NODE_DRIVER_DIR`` when set, else the host's (``exon
driver``) if one runs, else embeds one; it says which.
Prints ``ok`` and exits 0 when the counts are as described.
"""

from __future__ import annotations

import os
import sys

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


def main() -> int:
    # --8<-- [start:credits]
    with make_node() as receiver, make_node() as sender:
        pull = receiver.socket("pull", tag=1, credits=4)
        push = sender.socket("push")
        push.link(f"{receiver.address}/1", timeout=TIMEOUT)

        sent = 0
        try:
            while sent < 100:
                push.send_nowait(b"m%d" % sent, cookie=sent)
                sent += 1
        except exon.BackPressured as exc:
            print(f"sent {sent} without waiting, then {type(exc).__name__}: {exc}")
        try:
            push.send(b"one more", timeout=0.2)
            blocked = False
        except exon.Timeout:
            blocked = True
            print("a blocking send() waited 0.2 s for credit and raised Timeout")

        taken = [pull.receive(timeout=TIMEOUT).payload for _ in range(2)]
        print(f"the PULL took {taken}: two credits go back")
        push.send(b"after the grant", timeout=TIMEOUT)  # waits for the grant, then goes
        print("send() went through once the grant arrived")
        cookies = [push.receive(timeout=TIMEOUT) for _ in range(2)]
        print(f"cookies back for the messages taken: {[c.value for c in cookies]}")
        rest = [pull.receive(timeout=TIMEOUT).payload for _ in range(3)]
        print(f"the PULL took the rest: {rest}")
    # --8<-- [end:credits]
    ok = (sent == 4 and blocked and taken == [b"m0", b"m1"]
          and [c.value for c in cookies] == [0, 1]
          and rest == [b"m2", b"m3", b"after the grant"])
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
