"""exon.core is sans-IO: no socket, thread, clock, asyncio or native import anywhere in it."""

from __future__ import annotations

import ast
from pathlib import Path

import exon.core

FORBIDDEN = ("socket", "threading", "time", "asyncio", "exon.native", "select", "selectors",
             "multiprocessing", "subprocess", "exon.transport", "exon.middleware",
             "exon.sockets", "_thread", "concurrent")


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_core_imports_nothing_forbidden() -> None:
    root = Path(exon.core.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) >= 8
    bad = [
        (f.name, name)
        for f in files
        for name in imported_modules(f)
        if any(name == x or name.startswith(x + ".") for x in FORBIDDEN)
    ]
    assert bad == []


def test_the_checker_would_catch_one() -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as tmp:
        tmp.write("import time\nfrom threading import Lock\n")
    assert imported_modules(Path(tmp.name)) == ["time", "threading"]


def test_transport_and_native_stay_below_the_core_and_the_middleware() -> None:
    """exon.transport (the Aeron driver and client) and exon.native are the bottom layers:
    they never import exon.core, exon.middleware, exon.sockets or the layers built on them."""
    import exon.native
    import exon.transport

    above = ("exon.core", "exon.middleware", "exon.sockets", "exon.archive", "exon.spark",
             "exon.cli")
    files = [f for pkg in (exon.transport, exon.native)
             for f in sorted(Path(pkg.__file__).parent.rglob("*.py"))]
    assert len(files) >= 15
    bad = [(f.name, name) for f in files for name in imported_modules(f)
           if any(name == x or name.startswith(x + ".") for x in above)]
    assert bad == []


def test_the_middleware_never_imports_the_sockets() -> None:
    """The Node hosts sockets through exon.middleware.hosted (a protocol and a factory the
    sockets register), so exon.middleware has no import of exon.sockets: no circle."""
    import exon.middleware

    above = ("exon.sockets", "exon.archive", "exon.spark", "exon.cli")
    files = sorted(Path(exon.middleware.__file__).parent.rglob("*.py"))
    bad = [(f.name, name) for f in files for name in imported_modules(f)
           if any(name == x or name.startswith(x + ".") for x in above)]
    assert bad == []
