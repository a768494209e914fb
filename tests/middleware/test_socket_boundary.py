"""The sockets use their node through its public API and ``node.socket_host`` only
(:mod:`exon.middleware.socket_host`): no module under ``exon/sockets`` reads or calls a
private attribute (``_name``) of a node, of its socket host, or of the objects the host
hands out (the core, the fast path)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

import exon.sockets

#: names under which the sockets hold the node and what it hands them
NODE_SIDE = frozenset({"node", "_node", "host", "_host", "socket_host", "core", "_core",
                       "fast", "_fast"})


def _path(expr: ast.expr) -> list[str]:
    """The dotted names of ``expr`` (``self.node.x`` -> ["self", "node", "x"]); [] when it
    is not a plain chain of names."""
    names: list[str] = []
    while isinstance(expr, ast.Attribute):
        names.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        names.append(expr.id)
        return names[::-1]
    return []


def private_node_accesses(source: str, filename: str = "<src>") -> list[tuple[int, str]]:
    """(line, expression) of every private attribute taken on the node side in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if NODE_SIDE.intersection(_path(node.value)):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_sockets_touch_nothing_private_of_their_node() -> None:
    root = Path(exon.sockets.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) >= 10
    bad = [(f.name, line, expr) for f in files
           for line, expr in private_node_accesses(f.read_text(), str(f))]
    assert bad == []


@pytest.mark.parametrize("package", ["exon.archive", "exon.spark", "exon.bench"])
def test_the_layers_above_touch_nothing_private_of_a_node(package: str) -> None:
    """The archive, the Spark source/sink and the benchmarks use nodes and sockets as an
    application does."""
    root = Path(importlib.util.find_spec(package).origin).parent  # type: ignore[union-attr, arg-type]
    files = sorted(root.rglob("*.py"))
    assert files
    bad = [(f.name, line, expr) for f in files
           for line, expr in private_node_accesses(f.read_text(), str(f))]
    assert bad == []


def test_the_scan_would_catch_one() -> None:
    source = (
        "def f(self, node):\n"
        "    self.node._lock.acquire()\n"
        "    node._await(None, None, None)\n"
        "    self._host.fast._tokens\n"
        "    self._core._out\n"
        "    self._host.flush()\n"  # public: fine
        "    self._queued += 1\n"  # the socket's own state: fine
        "    self.node.__class__\n"  # a dunder: fine
    )
    assert private_node_accesses(source) == [
        (2, "self.node._lock"), (3, "node._await"), (4, "self._host.fast._tokens"),
        (5, "self._core._out")]


def test_the_host_hands_out_the_nodes_own_objects(make_node) -> None:  # type: ignore[no-untyped-def]
    """The socket host is no copy: its objects are the node's, and a socket uses them."""
    node = make_node()
    host = node.socket_host
    sock = node.socket("pub")
    try:
        assert sock._lock is host.lock
        assert sock._core is host.core
        assert host.core.has_socket(sock.tag)
        assert sock._fast_slot >= 0
        before = host.activity
        sock.send(b"to nobody")  # no subscriber: sent to none, but a client call
        assert host.activity == before + 1  # what keeps the dispatcher off
    finally:
        sock.close()
    assert not host.core.has_socket(sock.tag)
