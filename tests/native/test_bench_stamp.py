"""The benchmark loops' module (exon.native._bench) is a development build, rebuilt in place
when it was built from other sources than those beside it (exon/native/bench_stamp.py)."""

from __future__ import annotations

import pathlib
import shutil

import pytest

import exon.native
from exon.native import bench_stamp

NATIVE = pathlib.Path(exon.native.__file__).parent


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of what _bench is built from: exon/native's build script, src/ and bench/."""
    root = tmp_path / "native"
    root.mkdir()
    shutil.copy2(NATIVE / "build.py", root / "build.py")
    for folder in ("src", "bench"):
        shutil.copytree(NATIVE / folder, root / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_stamp_names_the_sources_it_was_built_from(tree: pathlib.Path) -> None:
    assert not bench_stamp.is_current(tree)  # never built here
    bench_stamp.write_stamp(tree, bench_stamp.sources_digest(tree))
    assert bench_stamp.is_current(tree)
    assert (tree / bench_stamp.STAMP_NAME).read_text().strip() == bench_stamp.sources_digest(
        tree)


@pytest.mark.parametrize("changed", ["src/client/exon_publication.h", "src/common/exon_layout.h",
                                     "bench/exon_bench_ipc.c", "bench/cdef/10_bench_ipc.h",
                                     "build.py"])
def test_a_changed_source_makes_the_build_stale(tree: pathlib.Path, changed: str) -> None:
    bench_stamp.write_stamp(tree, bench_stamp.sources_digest(tree))
    path = tree / changed
    path.write_bytes(path.read_bytes() + b"\n/* changed */\n")
    assert not bench_stamp.is_current(tree)


def test_a_new_core_header_or_a_build_switch_makes_it_stale(
        tree: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench_stamp.write_stamp(tree, bench_stamp.sources_digest(tree))
    monkeypatch.setenv("EXON_NATIVE_SANITIZE", "1")
    assert not bench_stamp.is_current(tree)
    monkeypatch.delenv("EXON_NATIVE_SANITIZE")
    assert bench_stamp.is_current(tree)
    (tree / "src" / "driver" / "exon_new.h").write_text("int exon_new(void);\n")
    assert not bench_stamp.is_current(tree)


def test_a_changed_core_source_leaves_it_current(tree: pathlib.Path) -> None:
    # _bench calls the core's functions through _exon (exon_bench_core.h): it compiles
    # only the core's headers, so a change to a core .c file does not make it stale
    bench_stamp.write_stamp(tree, bench_stamp.sources_digest(tree))
    path = tree / "src" / "client" / "exon_publication.c"
    path.write_bytes(path.read_bytes() + b"\n/* changed */\n")
    assert bench_stamp.is_current(tree)


def test_the_loaded_bench_module_is_the_current_build() -> None:
    """Importing the loops (exon bench transport does) leaves a current, stamped build."""
    from exon.native import bench_loops

    assert bench_stamp.is_current(NATIVE)
    assert hasattr(bench_loops.lib, "exon_bench_ipc_throughput")
