"""Release hygiene: the version comes from the package metadata, the package ships its
types, and a wheel with the C core builds from the sdist alone.

The build test runs the repository's own ``setup.py`` through ``python -m build`` twice:
``--sdist`` from a clean copy of the tree, then ``--wheel`` from the unpacked sdist
(nothing of the tree beside it), and imports the built C core from the wheel's contents
in a fresh interpreter. It builds without isolation (``--no-isolation``): the suite stays
offline and uses the setuptools and cffi installed with the ``test`` extra.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import exon

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _project_version() -> str:
    # (a regex, not tomllib: the package supports Python 3.10)
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"$', text, re.MULTILINE)
    assert found, "pyproject.toml has no [project] version line"
    return found.group(1)


_VERSION_PROBE = """
import importlib.metadata, sys
real = importlib.metadata.version
if len(sys.argv) > 1:  # pretend another version of exon is installed
    importlib.metadata.version = lambda name: sys.argv[1] if name == "exon" else real(name)
from exon.cli import main
main(["--version"], prog_name="exon")
"""


def _version_output(*fake: str) -> str:
    # A fresh interpreter: click remembers the version after the first --version.
    proc = subprocess.run([sys.executable, "-c", _VERSION_PROBE, *fake], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_version_option_reads_the_package_metadata() -> None:
    installed = importlib.metadata.version("exon")
    assert installed == _project_version() == exon.__version__
    assert _version_output() == f"exon, version {installed}"
    # It asks importlib.metadata when called: another installed version shows through.
    assert _version_output("9.8.7") == "exon, version 9.8.7"


def test_the_package_is_marked_typed() -> None:
    # PEP 561: the marker beside exon/__init__.py (the wheel test checks that it ships)
    assert pathlib.Path(exon.__file__).with_name("py.typed").is_file()


def _build(*args: str, cwd: pathlib.Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, (
        f"python -m build {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


@pytest.mark.slow
def test_a_wheel_with_the_c_core_builds_from_the_sdist_alone(tmp_path) -> None:
    pytest.importorskip("build", reason="the test extra's `build` package is not installed")
    # A clean checkout: the tree's own exon.egg-info (from an editable install) lists the
    # files of the last build, and setuptools would put them in the sdist whatever
    # pyproject.toml says; build/ and the compiled modules must not leak in either.
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "exon", checkout / "exon", ignore=shutil.ignore_patterns(
        "__pycache__", "*.so", "*.o", "_exon.c"))
    for name in ("pyproject.toml", "setup.py", "README.md", "CHANGELOG.md", "MANIFEST.in"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, checkout / name)
    dist = tmp_path / "dist"
    _build("--sdist", "--outdir", str(dist), cwd=checkout)
    (sdist,) = dist.glob("exon-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="data")
    top = f"exon-{_project_version()}"
    # Everything the C build reads is in the sdist: sources, headers, cffi declarations.
    for folder, suffix in (("src", ".c"), ("src", ".h"), ("cdef", ".h"), ("fastpath", ".c"),
                           ("fastpath", ".h"), ("archive", ".c")):
        base = ROOT / "exon" / "native" / folder  # src/ has folders (common/, driver/, ...)
        tree = sorted(p.relative_to(base).as_posix() for p in base.rglob(f"*{suffix}"))
        shipped = sorted(n.removeprefix(f"{top}/exon/native/{folder}/") for n in names
                         if n.startswith(f"{top}/exon/native/{folder}/") and n.endswith(suffix))
        assert tree, f"no {suffix} files in exon/native/{folder}"
        assert shipped == tree, f"exon/native/{folder}/*{suffix} differs in the sdist"
    assert f"{top}/exon/py.typed" in names
    for shipped_file in ("exon/ops/dashboard.json", "exon/ops/alerts.yml"):  # issue #31
        assert f"{top}/{shipped_file}" in names, shipped_file
    assert f"{top}/CHANGELOG.md" in names
    assert not [n for n in names if n.endswith(".so")], "a compiled module leaked into the sdist"

    wheels = tmp_path / "wheels"
    _build("--wheel", "--outdir", str(wheels), cwd=tmp_path / "unpacked" / top)
    (wheel,) = wheels.glob("exon-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        members = zf.namelist()
        zf.extractall(tmp_path / "site")
    for module in ("_exon", "_fast", "_archive"):
        assert [m for m in members
                if m.startswith(f"exon/native/{module}.") and m.endswith(".so")], module
    # the benchmark loops are a development build (bench_loops.py builds them in place)
    assert not [m for m in members if m.startswith("exon/native/_bench")], "_bench in the wheel"
    assert "exon/py.typed" in members
    assert {"exon/ops/dashboard.json", "exon/ops/alerts.yml"} <= set(members)

    # The built core loads and answers from the wheel's files, not from this tree.
    probe = ("import exon.native as n, exon.archive.codec as c; "
             "print(n.__file__); print(n._fast is not None, c.NATIVE); "
             "print(n.lib.exon_nano_clock_ns() > 0)")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    where, doors, clock = out.stdout.split("\n")[:3]
    assert where.startswith(str(tmp_path / "site"))
    assert doors == "True True"
    assert clock == "True"
