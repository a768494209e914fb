"""A pub/sub fan-out: one PUB, subscribers by topic prefix, and a slow subscriber.

    python examples/pubsub_fanout.py [--messages 200]

Part one: a PUB publishes price and news updates to three SUBs (one subscribed to
``price.``, one to ``news.``, one to everything). The PUB filters, so each SUB receives
exactly its topics, in order; with the default ``overflow="block"`` nothing is lost.

Part two: a PUB with ``overflow="drop"`` (ZeroMQ's behaviour) feeds a subscriber that
reads nothing until the end. Unlike ZeroMQ, the loss is never silent: the SUB finds an
``exon.Dropped(count)`` item where each gap is, and the PUB counts the drops, so what was
delivered plus what was dropped is what was sent.

Uses the media driver of ``$EXON_NODE_DRIVER_DIR`` when set, else the host's (``exon
driver``) if one runs, else embeds one; it says which. Every blocking call has a timeout;
the script exits 0 and prints ``ok`` when every count adds up.
"""

from __future__ import annotations

import argparse
import os
import sys

import exon

TIMEOUT = 10.0  # seconds for any single step


def make_node() -> exon.Node:
    """A node on the driver of ``$EXON_NODE_DRIVER_DIR``, else the host's (``exon
    driver``) if one runs, else a driver of its own; says which."""
    node = exon.Node("127.0.0.1:0", driver_dir=os.environ.get("EXON_NODE_DRIVER_DIR") or None)
    if node.driver_kind == "embedded":
        print("no media driver running here: this node embeds one of its own")
    else:
        print(f"using the media driver in {node.driver_dir}")
    return node


def by_topic(pub_node: exon.Node, sub_node: exon.Node, messages: int) -> bool:
    """Three subscribers, each gets exactly its topics, in order."""
    pub = pub_node.socket("pub", tag=1)
    prefixes = {"prices": b"price.", "news": b"news.", "all": b""}
    subs = {}
    for name, prefix in prefixes.items():
        sub = sub_node.socket("sub")
        sub.link(f"{pub_node.address}/1", timeout=TIMEOUT)
        sub.subscribe(prefix, timeout=TIMEOUT)  # returns once the PUB filters by it
        subs[name] = sub
    sent = [b"price.EURUSD %d" % i if i % 2 == 0 else b"news.item %d" % i
            for i in range(messages)]
    got: dict[str, list[bytes]] = {name: [] for name in subs}
    for start in range(0, messages, 20):  # a burst, then every subscriber reads its part
        burst = sent[start:start + 20]
        for payload in burst:
            pub.send(payload, timeout=TIMEOUT)  # "block": waits for credit, loses nothing
        for name, sub in subs.items():
            wanted = sum(1 for p in burst if p.startswith(prefixes[name]))
            got[name] += [sub.receive(timeout=TIMEOUT).payload for _ in range(wanted)]
    ok = True
    for name in subs:
        want = [p for p in sent if p.startswith(prefixes[name])]
        print(f"{name}: {len(got[name])}/{len(want)} in order: {got[name] == want}")
        ok = ok and got[name] == want
    return ok


def slow_subscriber(pub_node: exon.Node, sub_node: exon.Node, messages: int) -> bool:
    """overflow="drop": delivered + dropped == sent, and each gap is marked."""
    pub = pub_node.socket("pub", tag=2, overflow="drop")
    slow = sub_node.socket("sub", credits=16)
    slow.link(f"{pub_node.address}/2", timeout=TIMEOUT)
    slow.subscribe(b"", timeout=TIMEOUT)
    for i in range(messages):
        pub.send(b"tick %d" % i, timeout=TIMEOUT)  # never waits for the slow reader
    # the SUB reads only now. A gap is marked just before the next message that gets
    # through, so the PUB ends with an "end" message, again until one arrives
    delivered: list[int] = []
    dropped_items = gaps = 0
    for _attempt in range(20):
        pub.send(b"end", timeout=TIMEOUT)
        item: object = None
        while item is None or not (isinstance(item, exon.Message) and item.payload == b"end"):
            try:
                item = slow.receive(timeout=0.5)
            except exon.Timeout:
                break  # this "end" was dropped too: send another
            if isinstance(item, exon.Dropped):
                dropped_items += item.count
                gaps += 1
            elif isinstance(item, exon.Message) and item.payload != b"end":
                delivered.append(int(item.payload.split()[1]))
        else:
            break
    stats = pub.statistics()
    ends = stats.published - messages  # the "end" messages sent (one of them delivered)
    in_order = delivered == sorted(delivered)
    print(f"slow subscriber: {len(delivered)} ticks delivered + {dropped_items} dropped + 1 "
          f"end = {len(delivered) + dropped_items + 1} of {stats.published} sent "
          f"({messages} ticks, {ends} end); the PUB counted {stats.dropped} dropped; gaps "
          f"marked {gaps}; in order: {in_order}")
    return (len(delivered) + dropped_items + 1 == stats.published
            and stats.dropped == dropped_items and in_order and dropped_items > 0 < gaps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    with make_node() as pub_node, make_node() as sub_node:
        ok = by_topic(pub_node, sub_node, args.messages)
        ok = slow_subscriber(pub_node, sub_node, args.messages) and ok
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
