"""The ``exon node``, ``exon request`` and ``exon push`` commands (see ``exon/cli.py``)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from exon import errors

__all__ = ["push_once", "request_once", "run_node"]


def run_node(endpoint: str, echo: tuple[int, ...], sink: tuple[int, ...],
             driver_dir: str | None, stop: threading.Event | None = None,
             on_ready: Callable[[Any], None] | None = None) -> int:
    """Run a node until SIGINT/SIGTERM (or ``stop``); prints its address first.
    ``on_ready(node)`` is called once its sockets are open (``exon node --health``)."""
    from exon.middleware.node import Node

    stop = stop or threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    counts: dict[int, int] = {}
    threads: list[threading.Thread] = []
    try:
        with Node(endpoint, driver_dir=driver_dir) as node:
            print(node.address, flush=True)

            def echo_loop(rep: Any) -> None:
                while not stop.is_set():
                    try:
                        msg = rep.receive(timeout=0.2)
                    except errors.Timeout:
                        continue
                    except errors.ExonError:
                        if node.closed or rep.closed:
                            return
                        continue
                    try:
                        rep.send(msg.payload, timeout=5)
                    except errors.ExonError:
                        pass

            def sink_loop(tag: int, pull: Any) -> None:
                while not stop.is_set():
                    try:
                        pull.receive(timeout=0.2)
                    except errors.Timeout:
                        continue
                    except errors.ExonError:
                        if node.closed or pull.closed:
                            return
                        continue
                    counts[tag] += 1

            # the sockets open here, before on_ready: ready means they take work
            for tag in echo:
                threads.append(threading.Thread(
                    target=echo_loop, args=(node.socket("rep", tag=tag),), daemon=True))
            for tag in sink:
                counts[tag] = 0
                threads.append(threading.Thread(
                    target=sink_loop, args=(tag, node.socket("pull", tag=tag)), daemon=True))
            for t in threads:
                t.start()
            for tag in echo:
                print(f"echo {node.address}/{tag}", flush=True)
            for tag in sink:
                print(f"sink {node.address}/{tag}", flush=True)
            if on_ready is not None:
                on_ready(node)
            while not stop.wait(0.2):
                pass
            for t in threads:
                t.join(2.0)
        for tag, n in counts.items():
            print(f"sink {tag} received {n}", flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _client_node(driver_dir: str | None, endpoint: str) -> Any:
    from exon.middleware.node import Node

    return Node(endpoint, driver_dir=driver_dir)


def request_once(peer: str, data: bytes, *, timeout: float, driver_dir: str | None,
                 endpoint: str = "127.0.0.1:0") -> int:
    """Link a REQ to ``peer``, send ``data``, print the reply. Exit status."""
    try:
        with _client_node(driver_dir, endpoint) as node:
            req = node.socket("req")
            req.link(peer, timeout=timeout)
            req.send(data, timeout=timeout)
            reply = req.receive(timeout=timeout)
            payload = reply.payload
            try:
                print(payload.decode())
            except UnicodeDecodeError:
                print(repr(payload))
            req.close(timeout=timeout)
        return 0
    except errors.ExonError as exc:
        print(f"exon request: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def push_once(peer: str, data: bytes, *, count: int, timeout: float, driver_dir: str | None,
              endpoint: str = "127.0.0.1:0") -> int:
    """Link a PUSH to ``peer`` and send ``data`` ``count`` times; close delivers them all."""
    try:
        with _client_node(driver_dir, endpoint) as node:
            push = node.socket("push")
            push.link(peer, timeout=timeout)
            for _ in range(count):
                push.send(data, timeout=timeout)
            push.close(timeout=timeout)
            print(f"sent {count}")
        return 0
    except errors.ExonError as exc:
        print(f"exon push: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
