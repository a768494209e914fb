"""A producer of the replicated-archive chaos cases, in its own namespace, driven over
stdin/stdout like :mod:`tests.chaos.agent` (one JSON object per line each way, answers
carry the command's ``id``).

``python -m tests.chaos.archive_producer --endpoint HOST:PORT`` prints ``{"ready": true}``
once its node is up, then answers:

* ``produce`` ``peer`` ``first``: a PUSH links to ``peer`` (an ingest socket) and sends
  ids ``first, first + 1, ...`` (8 bytes little-endian, repeated to 64 bytes), each with
  its id as the cookie, until ``halt``; the cookies that come back are the confirmed ids,
  kept in the order they came;
* ``halt``: stops the stream (a broken link or a dead primary ends it too); answers
  ``sent`` and ``confirmed`` (every confirmed id so far, in order);
* ``count``: how many ids are confirmed so far;
* ``promote`` / ``info`` / ``stop_position``: the archive control requests of
  :class:`~exon.archive.client.ArchiveClient` on ``endpoint``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

import exon
from exon.archive.client import ArchiveClient

PAYLOAD_REPEAT = 8  # 8-byte id x 8: 64-byte messages


class Producer:
    def __init__(self, node: exon.Node) -> None:
        self.node = node
        self.confirmed: list[int] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error = ""

    def start(self, peer: str, first: int) -> None:
        self.halt()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(peer, first, self._stop),
                                        daemon=True)
        self._thread.start()

    def halt(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(30)
            self._thread = None

    def _run(self, peer: str, first: int, stop: threading.Event) -> None:
        push = self.node.socket("push")
        try:
            push.link(peer, timeout=10)
            i = first
            while not stop.is_set():
                try:
                    push.send(i.to_bytes(8, "little") * PAYLOAD_REPEAT, cookie=i, timeout=0.2)
                    i += 1
                    self.sent += 1
                except exon.Timeout:
                    pass  # no credit: the primary waits for its replicas
                self._drain(push, 0)
            self._drain(push, 0.5)
        except (exon.BrokenLink, exon.ClosedError, exon.Timeout) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            push.close(timeout=0)

    def _drain(self, push: Any, wait: float) -> None:
        while True:
            try:
                item = push.receive(timeout=wait)
            except (exon.Timeout, exon.ClosedError, exon.BrokenLink, exon.StateError):
                return  # StateError: no cookie pending
            if isinstance(item, exon.Cookie):
                self.confirmed.append(item.value)


def answer(node: exon.Node, producer: Producer, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd["op"]
    if op == "produce":
        producer.start(cmd["peer"], int(cmd["first"]))
        return {}
    if op == "halt":
        producer.halt()
        return {"sent": producer.sent, "confirmed": list(producer.confirmed),
                "error": producer.error}
    if op == "count":
        return {"count": len(producer.confirmed)}
    with ArchiveClient(cmd["endpoint"], node=node, timeout=float(cmd.get("timeout", 5))) as ac:
        if op == "promote":
            return {"epoch": ac.promote()}
        if op == "info":
            return {"info": ac.info()}
        if op == "stop_position":
            return {"stop": ac.stop_position(cmd["recording"])}
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    args = parser.parse_args()
    node = exon.Node(endpoint=args.endpoint)
    producer = Producer(node)
    out_lock = threading.Lock()

    def reply(obj: dict[str, Any]) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    def run(cmd: dict[str, Any]) -> None:
        try:
            reply({"id": cmd.get("id"), "ok": True, **answer(node, producer, cmd)})
        except Exception as exc:
            reply({"id": cmd.get("id"), "ok": False, "error": f"{type(exc).__name__}: {exc}"})

    reply({"ready": True, "address": node.address})
    try:
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd.get("op") == "exit":
                break
            threading.Thread(target=run, args=(cmd,), daemon=True).start()
    finally:
        producer.halt()
        node.close()


if __name__ == "__main__":
    main()
