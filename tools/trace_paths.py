"""The exon Python files a missed send and a receive cross, as JSON.

    python tools/trace_paths.py

Two nodes on one media driver (IPC), a PUSH linked to a PULL. A *missed send* is a
``push.send`` with a cookie (the C door leaves cookies to Python): every exon file a
Python frame of it runs in, on the sending thread, is listed (but for the work of a poll
the call may do for its node meanwhile, see ``_in_poll_work``). A *receive* is one message
from its arrival to ``pull.receive()`` returning, with the receiving thread waiting in
``receive()`` first: the files of each thread meanwhile (the receiving thread takes the
node's poll role while it waits; a node's own thread also does its housekeeping).
Profiling hooks (``sys.setprofile``, ``threading.setprofile``) see Python frames only; the
C files a path crosses are counted by reading (the doors of ``exon/native/fastpath`` and
``exon_link_table.c``). Issue #26 reports these before and after.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from types import FrameType
from typing import Any

import exon
from exon.transport.aeron import MediaDriver

_ROOT = os.path.dirname(os.path.abspath(exon.__file__))
_seen: dict[str, set[str]] = {}
_label: list[str | None] = [None]


def _profile(frame: FrameType, event: str, _arg: Any) -> None:
    label = _label[0]
    if label is None or event not in ("call", "c_call"):
        return
    path = frame.f_code.co_filename
    if path.startswith(_ROOT) and (label != "send" or not _in_poll_work(frame)):
        where = "exon/" + os.path.relpath(path, _ROOT)
        _seen.setdefault(f"{label}:{threading.current_thread().name}", set()).add(where)


def _in_poll_work(frame: FrameType) -> bool:
    """The frame runs under a poll of the node (``node_polling.py``) that the traced call
    happened to do for the node meanwhile (the poll role is the waiting threads' turn):
    not the path itself, left out so that the count does not depend on timing."""
    caller = frame.f_back
    while caller is not None:
        if caller.f_code.co_filename.endswith("node_polling.py"):
            return True
        caller = caller.f_back
    return False


def _trace(label: str, action: Any) -> None:
    _label[0] = label
    try:
        action()
    finally:
        _label[0] = None


def main() -> None:
    threading.setprofile(_profile)
    sys.setprofile(_profile)
    work = tempfile.mkdtemp(prefix="exon-trace-")
    try:
        with MediaDriver.launch(dir=f"{work}/driver", threading_mode="SHARED"), \
                exon.Node("127.0.0.1:0", driver_dir=f"{work}/driver") as a, \
                exon.Node("127.0.0.1:0", driver_dir=f"{work}/driver") as b:
            pull = b.socket("pull", tag=1)
            push = a.socket("push")
            push.link(f"{b.address}/1")
            for _ in range(20):  # warm up: links established, doors bound
                push.send(b"warm", timeout=5)
                pull.receive(timeout=5)
            _trace("send", lambda: push.send(b"missed", cookie="c", timeout=5))
            _seen.clear()  # the send's own frames only from here on
            _trace("send", lambda: push.send(b"missed", cookie="c", timeout=5))
            sends = sorted(set().union(*(v for k, v in _seen.items() if k.startswith("send:"))))
            for _ in range(2):
                pull.receive(timeout=5)
            time.sleep(0.2)  # the cookies' FLOWs settle
            _seen.clear()
            receiver = threading.Thread(target=lambda: pull.receive(timeout=5), name="receiver")
            _label[0] = "receive"
            receiver.start()
            time.sleep(0.2)  # the receiver waits in receive() before the message goes out
            push.send(b"plain", timeout=5)
            receiver.join(5)
            _label[0] = None
            threads = {k: sorted(v) for k, v in _seen.items()}
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"missed_send": {"count": len(sends), "files": sends},
                      "receive_by_thread": threads}, indent=1))


if __name__ == "__main__":
    main()
