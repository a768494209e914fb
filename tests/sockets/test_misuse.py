"""Misuse of the public socket and Node API raises exon errors (issue #13).

``send(12345)`` used to send 12,345 zero bytes (``bytes(int)``), ``timeout=nan`` was
accepted, and some wrong types escaped as bare TypeError/ValueError. Every case here must
raise an :class:`exon.ExonError` (payload types also a ``TypeError``, bad timeout values
also a ``ValueError``) and send nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import exon

BAD_PAYLOADS = [12345, 0, -1, "text", None, 1.5, ["a"], {"a": 1}, object(), True]
BAD_TIMEOUTS = [math.nan, -1, -0.001, -math.inf, "1", b"1", [1], object()]


@pytest.fixture
def sockets(make_node) -> dict[str, Any]:
    a, b = make_node(), make_node()
    pull = a.socket("pull", tag=1)
    rep = a.socket("rep", tag=2)
    push = b.socket("push")
    req = b.socket("req")
    push.link(f"{a.address}/1", timeout=5)
    req.link(f"{a.address}/2", timeout=5)
    return {"node": b, "pull": pull, "rep": rep, "push": push, "req": req, "address": a.address}


def _calls(s: dict[str, Any]) -> list[tuple[str, Callable[..., Any], type[BaseException]]]:
    """(name, call taking the bad value, the built-in it must also be)."""
    push, req, pull, node = s["push"], s["req"], s["pull"], s["node"]
    out: list[tuple[str, Callable[..., Any], type[BaseException]]] = []
    for bad in BAD_PAYLOADS:
        out += [
            (f"push.send({bad!r})", lambda v=bad: push.send(v, timeout=1), TypeError),
            (f"push.send_nowait({bad!r})", lambda v=bad: push.send_nowait(v), TypeError),
            (f"push.send({bad!r}, cookie)", lambda v=bad: push.send(v, cookie=1), TypeError),
            (f"req.send({bad!r})", lambda v=bad: req.send(v, timeout=1), TypeError),
        ]
    for bad in BAD_TIMEOUTS:
        kind = ValueError if isinstance(bad, (int, float)) else TypeError
        out += [
            (f"push.send(timeout={bad!r})", lambda v=bad: push.send(b"x", timeout=v), kind),
            (f"pull.receive(timeout={bad!r})", lambda v=bad: pull.receive(timeout=v), kind),
            (f"req.receive(timeout={bad!r})", lambda v=bad: req.receive(timeout=v), kind),
            (f"push.link(timeout={bad!r})",
             lambda v=bad: push.link(f"{s['address']}/1", timeout=v), kind),
            (f"pull.wait_for_links(timeout={bad!r})",
             lambda v=bad: pull.wait_for_links(1, timeout=v), kind),
            (f"pull.receive_held(timeout={bad!r})",
             lambda v=bad: pull.receive_held(timeout=v), kind),
        ]
    for bad in (12345, None, b"127.0.0.1:1/1", ["127.0.0.1:1/1"]):
        # a peer or socket that is no address / name: ConfigurationError (a ValueError)
        out.append((f"push.link({bad!r})", lambda v=bad: push.link(v, timeout=0.1), ValueError))
    for bad in ("many", None, 1.5):
        out.append((f"pull.receive_held({bad!r})", lambda v=bad: pull.receive_held(v, timeout=0.1),
                    TypeError))
    for bad in (math.nan, -1, "5"):
        kind = TypeError if isinstance(bad, str) else ValueError
        out.append((f"node.close(timeout={bad!r})", lambda v=bad: node.close(timeout=v), kind))
    out.append(("node.socket(12345)", lambda: node.socket(12345), ValueError))
    out.append(("node.socket('push', tag='x')", lambda: node.socket("push", tag="x"), ValueError))
    return out


def test_every_misuse_raises_an_exon_error_and_sends_nothing(sockets) -> None:
    pull = sockets["pull"]
    wrong: list[str] = []
    for name, call, builtin in _calls(sockets):
        try:
            call()
        except exon.ExonError as exc:
            if not isinstance(exc, builtin):
                wrong.append(f"{name}: {type(exc).__name__} is not a {builtin.__name__}")
        except BaseException as exc:
            wrong.append(f"{name}: {type(exc).__name__}: {exc}")
        else:
            wrong.append(f"{name}: no error")
    assert wrong == []
    with pytest.raises(exon.Timeout):  # nothing went out
        pull.receive(timeout=0.2)


def test_bytes_like_payloads_are_sent_as_is(sockets) -> None:
    push, pull = sockets["push"], sockets["pull"]
    for data in (b"b", bytearray(b"ba"), memoryview(b"xmvx")[1:3], b"", memoryview(b"abcd")[::2]):
        push.send(data, timeout=5)
    assert [pull.receive(timeout=5).payload for _ in range(5)] == [b"b", b"ba", b"mv", b"", b"ac"]


def test_infinite_timeout_means_no_limit_as_none_does(sockets) -> None:
    push, pull = sockets["push"], sockets["pull"]
    push.send(b"forever", timeout=math.inf)
    assert pull.receive(timeout=math.inf).payload == b"forever"
