"""The documentation site (mkdocs.yml: the user guide and the API reference generated from
the docstrings) builds in strict mode: a broken reference, a broken link or a public name
without a docstring fails it."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _require_mkdocs() -> None:
    missing = [m for m in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python", "material")
               if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        pytest.skip(f"the docs extra is not installed (pip install -e '.[docs]'): no "
                    f"{', '.join(missing)}")


def test_mkdocs_build_strict(tmp_path: pathlib.Path) -> None:
    _require_mkdocs()
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                             "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    site = tmp_path / "site"
    # the guide and the reference are both there, the reference rendered from docstrings
    assert (site / "guide" / "concepts" / "index.html").exists()
    sockets = (site / "reference" / "sockets" / "index.html").read_text()
    assert "receive_held" in sockets
    assert "Count the delivery of every message of" in sockets  # PullSocket.confirm's doc


def test_the_hook_finds_public_names_without_docstrings(tmp_path: pathlib.Path) -> None:
    _require_mkdocs()
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from mkdocs_hooks import missing_docstrings
    finally:
        sys.path.remove(str(ROOT / "tools"))
    package = tmp_path / "pkgdoc"
    package.mkdir()
    (package / "__init__.py").write_text('"""A package."""\n')
    (package / "mod.py").write_text(
        '"""A module."""\n\n'
        "class Documented:\n"
        '    """Has one."""\n\n'
        "    def method(self) -> None:\n"
        "        pass\n\n"
        "    def _private(self) -> None:\n"
        "        pass\n\n"
        "    @property\n"
        "    def size(self) -> int:\n"
        "        return 1\n\n"
        "def function() -> None:\n"
        '    """Has one."""\n\n'
        "def bare() -> None:\n"
        "    pass\n")
    assert missing_docstrings(["pkgdoc.mod"], str(tmp_path)) == [
        "pkgdoc.mod.Documented.method", "pkgdoc.mod.Documented.size", "pkgdoc.mod.bare"]
    assert missing_docstrings(["pkgdoc.mod.function"], str(tmp_path)) == []


def test_a_broken_reference_fails_the_build(tmp_path: pathlib.Path) -> None:
    _require_mkdocs()
    config = (ROOT / "mkdocs.yml").read_text()
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "reference" / "core.md").write_text("# Core\n\n::: exon.core.policy.NoSuchPolicy\n")
    (tmp_path / "mkdocs.yml").write_text(
        config.replace("docs_dir: docs", f"docs_dir: {docs}")
        .replace('paths: ["."]', f'paths: ["{ROOT}"]')
        .replace("  - tools/mkdocs_hooks.py", f"  - {ROOT}/tools/mkdocs_hooks.py")
        .replace('base_path: ["."]', f'base_path: ["{ROOT}"]'))
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                             "-f", str(tmp_path / "mkdocs.yml"), "--site-dir",
                             str(tmp_path / "site")], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode != 0
    assert "NoSuchPolicy" in result.stdout + result.stderr
