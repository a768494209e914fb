"""One exon multicast peer (its own media driver) in a network namespace, driven by JSON lines.

Run by :mod:`tests.transport.aeron.multicast_lab` with ``ip netns exec NS python -m
tests.transport.aeron.multicast_peer pub|sub --channel C --stream S [--driver key=value]``.
It prints ``{"ready": true, "pid": ..., ...}`` once the publication or subscription exists,
then answers one JSON line per command line (``{"id": n, "op": ...}``):

* ``pub``: ``connect`` (wait until some receiver sent an SM), ``send`` (offer messages
  ``start..start+count-1`` of :func:`tests.interop.peer.message` until done or
  ``timeout``, then answer with how many went and the counters); it stays up, serving
  NAKs, until ``exit`` or stdin closes.
* ``sub``: a thread polls from the start and checks every message against the pattern, in
  order; ``joined`` blocks until the subscription has its image and its driver has sent
  the publisher a status message (or ``timeout``) and answers with the position it joined
  at; ``wait`` blocks until ``count`` arrived (or
  ``timeout``) and answers with the tally, the join position and the driver's counters;
  ``pause`` stops polling (a consumer that stalls).

Every loop is bounded by the timeout the command carries.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from exon.transport.aeron import Aeron, MediaDriver
from exon.transport.aeron.counters import SystemCounter
from tests.interop.peer import message

COUNTERS = {
    "naks_sent": SystemCounter.NAK_MESSAGES_SENT,
    "naks_received": SystemCounter.NAK_MESSAGES_RECEIVED,
    "retransmits_sent": SystemCounter.RETRANSMITS_SENT,
    "status_messages_received": SystemCounter.STATUS_MESSAGES_RECEIVED,
    "invalid_packets": SystemCounter.INVALID_PACKETS,
}


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _value(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


class Tally:
    """Messages checked against the pattern as they arrive (the poll thread's)."""

    def __init__(self) -> None:
        self.received = 0
        self.bad = 0
        self.first_bad: int | None = None
        #: the subscription's first image appeared at this position (the poll thread's)
        self.join_position: int | None = None
        self.joined = threading.Event()
        #: the driver's STATUS_MESSAGES_SENT when the image was first seen
        self.sms_at_join = 0
        self.lock = threading.Lock()

    def on_message(self, data: Any, _header: Any) -> None:
        with self.lock:
            if bytes(data) != message(self.received):
                self.bad += 1
                if self.first_bad is None:
                    self.first_bad = self.received
            self.received += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("pub", "sub"))
    parser.add_argument("--channel", required=True)
    parser.add_argument("--stream", type=int, default=1001)
    parser.add_argument("--driver", action="append", default=[], help="key=value driver setting")
    args = parser.parse_args()
    settings = {k: _value(v) for k, _, v in (item.partition("=") for item in args.driver)}
    driver_dir = f"/dev/shm/exon-mcpeer-{os.getpid()}-{time.time_ns()}"
    with MediaDriver.launch(dir=driver_dir, dir_delete_on_shutdown=True, **settings) as driver, \
            Aeron.connect(driver.dir, timeout=10.0) as client:

        def counters() -> dict[str, int]:
            return {name: client.counter_value(c) for name, c in COUNTERS.items()}

        stop = threading.Event()
        poller: threading.Thread | None = None
        if args.mode == "pub":
            pub = client.add_publication(args.channel, args.stream)
            _say({"ready": True, "pid": os.getpid(), "session_id": pub.session_id})
        else:
            sub = client.add_subscription(args.channel, args.stream)
            tally = Tally()

            paused = threading.Event()

            def poll() -> None:
                while not stop.is_set():
                    if not tally.joined.is_set() and sub.image_count:
                        # read before the first poll: where the image began
                        tally.join_position = sub.images[0].position
                        tally.sms_at_join = client.counter_value(
                            SystemCounter.STATUS_MESSAGES_SENT)
                        tally.joined.set()
                    if paused.is_set():
                        time.sleep(0.01)
                    elif sub.poll(tally.on_message, 256) == 0:
                        sub.wait(0.01)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            _say({"ready": True, "pid": os.getpid(), "bound": sub.bound_endpoint})
        for line in sys.stdin:
            cmd = json.loads(line)
            op, ident = cmd.get("op"), cmd.get("id")
            deadline = time.monotonic() + float(cmd.get("timeout", 30.0))
            if op == "exit":
                break
            if op == "connect":
                while not pub.is_connected and time.monotonic() < deadline:
                    time.sleep(0.005)
                _say({"id": ident, "connected": pub.is_connected})
            elif op == "send":
                start, count, i = int(cmd.get("start", 0)), int(cmd["count"]), 0
                while i < count and time.monotonic() < deadline:
                    if pub.offer(message(start + i)) > 0:
                        i += 1
                    else:
                        time.sleep(0.0002)
                _say({"id": ident, "sent": i, **counters()})
            elif op == "pause":
                paused.set()
                _say({"id": ident, "paused": True})
            elif op == "joined":
                tally.joined.wait(max(0.0, deadline - time.monotonic()))
                # the image exists once the conductor made it; the receiver agent tells
                # the publisher with its SMs, the first of which may come later on a loaded
                # host: wait for one sent after the image was seen (one goes at least every
                # status message timeout; an SM before it may have asked for a SETUP only)
                while (tally.joined.is_set()
                       and client.counter_value(SystemCounter.STATUS_MESSAGES_SENT)
                       <= tally.sms_at_join and time.monotonic() < deadline):
                    time.sleep(0.005)
                sms = client.counter_value(SystemCounter.STATUS_MESSAGES_SENT)
                _say({"id": ident, "joined": tally.joined.is_set(),
                      "join_position": tally.join_position,
                      "sm_sent_since": sms - tally.sms_at_join})
            elif op == "wait":
                count = int(cmd["count"])
                while tally.received < count and time.monotonic() < deadline:
                    time.sleep(0.01)
                with tally.lock:
                    _say({"id": ident, "received": tally.received, "bad": tally.bad,
                          "first_bad": tally.first_bad, "join_position": tally.join_position,
                          **counters()})
            else:
                _say({"id": ident, "error": f"unknown op {op!r}"})
        stop.set()
        if poller is not None:
            poller.join(timeout=10)  # no poll may run on a closing client


if __name__ == "__main__":
    main()
