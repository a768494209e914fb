"""The layers of the package, checked on its source: exon.core is sans-IO (no socket,
thread, clock, asyncio or native import anywhere in it), and each part of exon imports only
the parts below it (LAYERS; docs/internals.md draws them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import exon.core

PACKAGE_ROOT = Path(exon.__file__).parent.parent  # the directory that holds exon/

#: the standard-library modules exon.core never imports (it is sans-IO)
FORBIDDEN = ("socket", "threading", "time", "asyncio", "select", "selectors",
             "multiprocessing", "subprocess", "_thread", "concurrent")

_PUBLIC = ("exon", "exon.errors", "exon.sockets")  # exon.Node(...), the sockets, the errors
_ALL = ("exon", "exon.errors", "exon.core", "exon.native", "exon.transport",
        "exon.middleware", "exon.sockets", "exon.crypto", "exon.archive", "exon.spark")

#: what each part of exon may import besides itself: a part is a subpackage or a module
#: directly under exon/ (``exon`` itself is ``exon/__init__.py``); an entry allows that
#: module and everything under it (``exon``: only its public names, ``exon.Node``, ...).
#: Arrows point down only.
LAYERS: dict[str, tuple[str, ...]] = {
    "exon.errors": (),
    "exon.core": ("exon.errors",),
    "exon.native": ("exon.errors",),
    "exon.transport": ("exon.errors", "exon.native"),
    # encrypted links: a link policy of the core's (keys, the Noise handshake), sealing in C
    "exon.crypto": ("exon.errors", "exon.core", "exon.native"),
    "exon.middleware": ("exon.errors", "exon.core", "exon.native", "exon.transport"),
    # C only through the middleware: no exon.native, no exon.transport
    "exon.sockets": ("exon.errors", "exon.core", "exon.middleware"),
    # applications of exon: its public API only (never the middleware or the transport);
    # the archive's record codec is its own C extension, exon.native._archive; a link
    # policy is public API (exon.core.SharedSecretPolicy, exon.EncryptedPolicy); its
    # service runs as the other long-running commands do (health endpoints, systemd):
    # exon.ops.lifecycle and exon.ops.probes
    "exon.archive": (*_PUBLIC, "exon.native._archive", "exon.core.policy",
                     "exon.ops.lifecycle", "exon.ops.probes"),
    "exon.spark": (*_PUBLIC, "exon.archive"),
    # the public names, imported lazily (exon/__init__.py)
    "exon": ("exon.errors", "exon.middleware", "exon.sockets", "exon.crypto"),
    # operating exon: the CnC's counters (driver, nodes, sockets, archives) as Prometheus
    # metrics, health endpoints, systemd; reads what the layers below publish
    "exon.ops": ("exon.errors", "exon.core", "exon.transport", "exon.middleware",
                 "exon.archive.metrics"),
    # tools over everything: benchmarks and the command line
    "exon.bench": _ALL,
    "exon.cli": (*_ALL, "exon.bench", "exon.ops"),
}


def imported_modules(path: Path) -> list[str]:
    """The modules ``path`` imports, as written (``from X import y``: ``X``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def module_of(root: Path, path: Path) -> str:
    """``exon/a/b.py`` -> ``exon.a.b``; ``exon/a/__init__.py`` -> ``exon.a``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(root: Path, name: str) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def exon_imports(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, module) of each exon module ``path`` imports, anywhere in it (in functions and
    under TYPE_CHECKING too). Relative imports are resolved; ``from exon import errors``
    is ``exon.errors`` (a module), ``from exon import Node`` is ``exon`` (a name)."""
    module = module_of(root, path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if is_module(root, sub) else base))
    return sorted({(line, name) for line, name in found
                   if name == "exon" or name.startswith("exon.")})


def part_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def parts_of(root: Path) -> list[str]:
    """The parts of the exon tree under ``root``: its subpackages and top-level modules."""
    exon_dir = root / "exon"
    found = {"exon"}
    for child in exon_dir.iterdir():
        if (child / "__init__.py").is_file() or (child.suffix == ".py"
                                                  and child.name != "__init__.py"):
            found.add(f"exon.{child.stem}")
    return sorted(found)


def allows(entry: str, module: str) -> bool:
    """Whether a LAYERS entry allows importing ``module``: the entry's module and those
    under it, but ``exon`` (the public names of exon/__init__.py) allows only itself."""
    return module == entry or (entry != "exon" and module.startswith(entry + "."))


def violations(root: Path, layers: dict[str, tuple[str, ...]]) -> list[str]:
    """Every import under ``root``/exon that ``layers`` does not allow, as
    ``"path:line: part imports module (part may import: ...)"``."""
    bad: list[str] = []
    for path in sorted((root / "exon").rglob("*.py")):
        part = part_of(module_of(root, path))
        allowed = (part, *layers.get(part, ()))
        for line, name in exon_imports(root, path):
            if part == "exon" and name == "exon":
                continue
            if not any(allows(entry, name) for entry in allowed):
                bad.append(f"{path.relative_to(root)}:{line}: {part} imports {name} "
                           f"({part} may import: {', '.join(allowed[1:]) or 'nothing of exon'})")
    return bad


# ==== exon.core is sans-IO ================================================================

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


def test_the_checker_would_catch_one(tmp_path: Path) -> None:
    path = tmp_path / "planted.py"
    path.write_text("import time\nfrom threading import Lock\n")
    assert imported_modules(path) == ["time", "threading"]


# ==== the layers of the whole package =====================================================

def test_every_part_of_exon_has_a_row_in_the_layer_table() -> None:
    """A new subpackage or top-level module says where it stands before it lands."""
    missing = [part for part in parts_of(PACKAGE_ROOT) if part not in LAYERS]
    assert missing == [], f"add these parts of exon to LAYERS: {missing}"
    assert len(parts_of(PACKAGE_ROOT)) >= 10


def test_no_import_crosses_a_layer() -> None:
    """Each import names its file, line and the allowed parts when it fails."""
    assert len(list((PACKAGE_ROOT / "exon").rglob("*.py"))) >= 100
    bad = violations(PACKAGE_ROOT, LAYERS)
    assert bad == [], "imports against the layers:\n" + "\n".join(bad)


def test_the_archive_client_and_service_share_only_the_protocol() -> None:
    """The client talks to the service over the wire: it imports exon.archive.protocol
    for what the wire says, never the service's module. (A service of a replicated archive
    is itself a client of the other members, promoting or following them: it may use the
    client, as an application would.)"""
    archive = PACKAGE_ROOT / "exon" / "archive"
    client = {name for _, name in exon_imports(PACKAGE_ROOT, archive / "client.py")}
    service = {name for _, name in exon_imports(PACKAGE_ROOT, archive / "service.py")}
    assert "exon.archive.protocol" in client & service
    assert "exon.archive.service" not in client


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(("path", "text", "line", "imported"), [
    # the one spark had (clients.py swept directories through the middleware)
    ("exon/spark/bad.py", "def f():\n    from exon.middleware.node_transport import x\n", 2,
     "exon.middleware.node_transport"),
    # a module imported by name from its package is that module, not the package
    ("exon/sockets/bad.py", "from exon import native\n", 1, "exon.native"),
    ("exon/sockets/bad.py", "import exon.transport.aeron\n", 1, "exon.transport.aeron"),
    ("exon/archive/bad.py", "from ..middleware import node\n", 1, "exon.middleware.node"),
    ("exon/core/bad.py", "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                         "    from exon.sockets.socket import Socket\n", 4, "exon.sockets.socket"),
])
def test_the_layer_checker_catches_a_planted_import(tmp_path: Path, path: str, text: str,
                                                    line: int, imported: str) -> None:
    _plant(tmp_path, {
        "exon/__init__.py": "from exon.errors import ExonError\n",
        "exon/errors.py": "",
        "exon/native/__init__.py": "from exon import errors\n",
        "exon/transport/__init__.py": "",
        "exon/transport/aeron/__init__.py": "from exon.native import lib\n",
        "exon/middleware/__init__.py": "",
        "exon/middleware/node.py": "from exon.transport import aeron\n",
        "exon/middleware/node_transport.py": "",
        "exon/sockets/__init__.py": "",
        "exon/sockets/socket.py": "from exon.middleware import node\nfrom exon import errors\n",
        "exon/core/__init__.py": "",
        "exon/archive/__init__.py": "import exon\nfrom exon import ExonError\n",
        "exon/spark/__init__.py": "from exon.archive import x\n",
    })
    assert violations(tmp_path, LAYERS) == []  # the planted tree is clean without the bad one
    _plant(tmp_path, {path: text})
    part = part_of(module_of(tmp_path, tmp_path / path))
    assert violations(tmp_path, LAYERS) == [
        f"{path}:{line}: {part} imports {imported} ({part} may import: "
        f"{', '.join(LAYERS[part]) or 'nothing of exon'})"]
