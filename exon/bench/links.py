"""Cost per message as links grow: one PULL fed by K PUSH sockets on another node.

One sending thread goes round-robin over the K PUSH sockets (64 B messages); the PULL's
application takes batches. Both nodes share one driver (IPC), so the figure is the sockets'
own cost. Each K is reported as a JSON line whose peer is the 1-link figure of the same run
(ratio = K links / 1 link; the goal is >= 0.8 at 1,000 links: nothing per message may walk
every link).
"""

from __future__ import annotations

import tempfile
import threading
import time

from exon.bench.report import emit
from exon.middleware.node import Node
from exon.transport.aeron import MediaDriver


def _rate(driver_dir: str, links: int, messages: int, size: int) -> float:
    """Messages per second through ``links`` PUSH->PULL links, first send to last receive."""
    with Node(endpoint="127.0.0.1:0", driver_dir=driver_dir) as sender, \
            Node(endpoint="127.0.0.1:0", driver_dir=driver_dir) as receiver:
        # the node's memory budget counts each link's window at the socket's max message
        # size: saying the messages are small keeps 1,000 links at full credit
        pull = receiver.socket("pull", max_message_size=max(size, 1024))
        pushes = [sender.socket("push") for _ in range(links)]
        for push in pushes:
            push.link(f"{receiver.address}/{pull.tag}", timeout=30)
        received = 0
        failed: list[BaseException] = []

        def take() -> None:
            nonlocal received
            try:
                while received < messages:
                    received += len(pull.receive_many(4096, timeout=30))
            except BaseException as exc:  # reported by the caller
                failed.append(exc)

        thread = threading.Thread(target=take, name="bench-links-pull")
        payload = b"x" * size
        started = time.perf_counter()
        thread.start()
        for i in range(messages):
            pushes[i % links].send(payload, timeout=30)
        thread.join(timeout=120)
        seconds = time.perf_counter() - started
        if failed:
            raise failed[0]
        if thread.is_alive() or received != messages:
            raise RuntimeError(f"received {received} of {messages} messages")
        return messages / seconds


def run_links_bench(*, links: tuple[int, ...] = (1, 10, 100, 1000), messages: int = 200_000,
                    size: int = 64, repeats: int = 3) -> list[dict[str, object]]:
    """Best of ``repeats`` runs per link count; one JSON line per count."""
    counts = sorted(set(links) | {1})
    with tempfile.TemporaryDirectory(prefix="exon-bench-links-", dir="/dev/shm") as work:
        driver_dir = f"{work}/driver"
        best: dict[int, float] = {}
        with MediaDriver.launch(dir=driver_dir, dir_delete_on_shutdown=True):
            for _ in range(repeats):  # interleaved, so drift on a shared machine hits all K
                for k in counts:
                    best[k] = max(best.get(k, 0.0), _rate(driver_dir, k, messages, size))
    lines = []
    for k in counts:
        if k == 1 and 1 not in links:
            continue
        lines.append(emit(
            f"links_{k}_{size}", exon=best[k], peer=best[1], peer_name="exon with 1 link",
            unit="msgs/s", higher_is_better=True,
            note=f"one PULL fed by {k} PUSH sockets on another node (one driver), one sending "
                 f"thread round-robin, {messages} x {size} B, best of {repeats}; "
                 f"goal: ratio >= 0.8 at 1000 links"))
    return lines
