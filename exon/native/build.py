"""cffi build script for exon's C core (API mode, out of line).

Every ``src/**/*.c`` file is compiled into one extension, ``exon.native._exon``; the
benchmark loops (``bench/*.c``, declarations in ``bench/cdef/*.h``) into another,
``exon.native._bench``, that only ``exon bench`` loads and that calls the core through
pointers into ``_exon`` (it does not compile the core a second time). ``_bench`` is a
development build: not in ``setup.py`` (an install or a wheel compiles the core once), but
built in place by ``python exon/native/build.py`` or on first use
(:func:`build_bench_in_place`, called by ``exon/native/bench_loops.py`` when the module is
missing or was built from other sources: ``bench_stamp.py``). The cffi
declarations are the concatenation of ``cdef/*.h`` (declarations only, one file per
concern, read in name order). ``src/`` is laid out as Aeron's C driver is (common/,
concurrent/, uri/, media/, driver/, client/, link/: see docs/internals.md); a source
includes another's header by its path under ``src/`` (``#include "concurrent/exon_ring.h"``),
the one include directory. Every public header (``src/**/*.h`` but the ``*_internal.h``
ones, private to their folder) is included into the generated module, so each must be
self-contained. Nothing but ``exon/native/__init__.py`` imports the
compiled module.

Run ``python exon/native/build.py`` to rebuild in place during development; ``pip install``
runs ``ffibuilder`` through setuptools (``cffi_modules`` in setup.py).

Sanitizers: ``EXON_NATIVE_SANITIZE=1`` builds all three extensions (``_exon``, ``_fast``,
``_archive``) with AddressSanitizer and UndefinedBehaviorSanitizer (``-O1 -g
-fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined``).
The Python interpreter is not instrumented, so the ASan runtime must be loaded first::

    EXON_NATIVE_SANITIZE=1 python setup.py -q build_ext --inplace   # in a copy of the tree
    LD_PRELOAD=$(gcc -print-file-name=libasan.so) \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 python -m pytest tests/fuzz

(``detect_leaks=0``: CPython's own allocations look like leaks at exit.) Do it in a copy of
the tree, not the shared worktree: the sanitized modules only load with the runtime
preloaded. ``tools/fuzz_campaign.py`` makes such a copy and runs the decoders under it.
``EXON_NATIVE_DEBUG=1`` is the older switch: ``_exon`` alone, at ``-O0``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tempfile

from cffi import FFI
from setuptools import Extension

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE / "src"
CDEF = HERE / "cdef"
BENCH = HERE / "bench"  #: the benchmark loops: their own module, exon.native._bench
FASTPATH = HERE / "fastpath"  #: the GIL-holding door, exon.native._fast (CPython API)


def _relative(path: pathlib.Path) -> str:
    # setuptools wants source paths relative to the project root (where setup.py lives).
    root = HERE.parent.parent
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


def sanitize() -> bool:
    """True when EXON_NATIVE_SANITIZE=1 asks for an ASan/UBSan build (see the module doc)."""
    return os.environ.get("EXON_NATIVE_SANITIZE") == "1"


def _opt_flags() -> list[str]:
    return ["-O1", "-g", "-fno-omit-frame-pointer", *SANITIZE_FLAGS] if sanitize() else ["-O3"]


def _cflags() -> tuple[list[str], list[str]]:
    """(compile flags, link flags) of the cffi modules."""
    debug = os.environ.get("EXON_NATIVE_DEBUG") == "1"
    cflags = [
        "-std=gnu11",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
        "-Wno-address-of-packed-member",
        "-Wno-missing-field-initializers",
        "-fno-strict-aliasing",
    ]
    if sanitize():
        cflags += ["-O1", "-g", "-fno-omit-frame-pointer", *SANITIZE_FLAGS]
    else:
        cflags += ["-O0", "-g", "-fsanitize=address,undefined"] if debug else ["-O3", "-g"]
    ldflags = SANITIZE_FLAGS if sanitize() else ["-fsanitize=address,undefined"] if debug else []
    return cflags, ldflags


def core_sources() -> list[pathlib.Path]:
    """The C core's sources, every ``.c`` under ``src/`` (in path order)."""
    return sorted(SRC.rglob("*.c"))


def core_headers() -> list[str]:
    """The core's public headers, as ``#include`` names (paths under ``src/``): every
    ``.h`` under ``src/`` but the private ``*_internal.h`` ones."""
    return sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.h")
                  if not p.name.endswith("_internal.h"))


def make_ffibuilder(*, absolute_paths: bool = False) -> FFI:
    ffi = FFI()
    ffi.cdef("\n".join(p.read_text() for p in sorted(CDEF.glob("*.h"))))
    headers = core_headers()
    sources = core_sources()
    cflags, ldflags = _cflags()
    ffi.set_source(
        "exon.native._exon",
        "\n".join(f'#include "{name}"' for name in headers),
        sources=[str(p) if absolute_paths else _relative(p) for p in sources],
        include_dirs=[str(SRC)],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=["pthread", "rt", "m", "dl"],
        define_macros=[("_GNU_SOURCE", "1")],
    )
    return ffi


def make_bench_ffibuilder(*, absolute_paths: bool = False) -> FFI:
    """``exon.native._bench``: the C benchmark loops of ``exon bench`` (``bench/*.c``), kept
    out of the library's module. The loops alone are compiled: the core's functions they
    call (offer, poll, clean, the error text) are the library's, bound by address at import
    (``exon_bench_core.h``, ``exon/native/bench_loops.py``), and the handles they take are
    the library's, cast. The core's headers give them its layouts (``bench_stamp.py`` tells
    when a build is older than those). Only ``exon.bench`` loads it."""
    ffi = FFI()
    ffi.cdef("\n".join(p.read_text() for p in sorted((BENCH / "cdef").glob("*.h"))))
    headers = sorted(p.name for p in BENCH.glob("*.h"))
    sources = sorted(BENCH.glob("*.c"))
    cflags, ldflags = _cflags()
    ffi.set_source(
        "exon.native._bench",
        "\n".join(f'#include "{name}"' for name in ["common/exon_common.h", *headers]),
        sources=[str(p) if absolute_paths else _relative(p) for p in sources],
        include_dirs=[str(SRC), str(BENCH)],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=["pthread"],
        define_macros=[("_GNU_SOURCE", "1")],
    )
    return ffi


ffibuilder = make_ffibuilder()

def build_bench_in_place(*, verbose: bool = False) -> pathlib.Path:
    """Compile ``exon.native._bench`` next to this file (objects in a temporary directory)
    and stamp it with its sources' digest (``bench_stamp.py``); returns the module's path."""
    import importlib

    # a sibling module: exon.native's when imported from the package, else (run as a
    # script) the one beside this file, on sys.path
    stamp = importlib.import_module("exon.native.bench_stamp" if __package__ else "bench_stamp")
    digest = stamp.sources_digest(HERE)
    builder = make_bench_ffibuilder(absolute_paths=True)
    with tempfile.TemporaryDirectory(prefix="exon-bench-build-") as tmpdir:
        built = pathlib.Path(builder.compile(tmpdir=tmpdir, verbose=verbose))
        for stale in HERE.glob("_bench*.so"):
            if stale.name != built.name:
                stale.unlink()  # an older build under another suffix would shadow it
        target = _install(built)
    stamp.write_stamp(HERE, digest)
    return target


def fast_extension(*, absolute_paths: bool = False) -> Extension:
    """``exon.native._fast``: the GIL-holding door for non-blocking hot calls (offer, the
    sockets' send and receive).

    Four sources (``fastpath/exon_fast*.c``, each its own translation unit, sharing the
    private ``exon_fast_internal.h``). It calls the cffi module's C functions through
    pointers it is handed at import, so the core is compiled once, in ``_exon``; its own C
    is the CPython side of the sockets' hot calls (see ``fastpath/exon_fast.c``). Built
    with ``-fvisibility=hidden``: the functions its files share stay inside the module,
    called directly, and only ``PyInit__fast`` is exported."""
    sources = sorted(FASTPATH.glob("exon_fast*.c"))
    headers = [*sorted(FASTPATH.glob("*.h")), SRC / "link" / "exon_link_table.h"]
    return Extension(
        "exon.native._fast",
        sources=[str(p) if absolute_paths else _relative(p) for p in sources],
        depends=[str(p) if absolute_paths else _relative(p) for p in headers],
        include_dirs=[str(SRC) if absolute_paths else _relative(SRC)],
        extra_link_args=SANITIZE_FLAGS if sanitize() else [],
        extra_compile_args=[*_opt_flags(), "-std=gnu11", "-Wall", "-Wextra",
                            "-Wno-unused-parameter", "-fvisibility=hidden",
                            "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
    )


def archive_extension(*, absolute_paths: bool = False) -> Extension:
    """``exon.native._archive``: the archive's record codec in batches (CPython API; the
    checksum function comes from the crc32c package at call time)."""
    source = HERE / "archive" / "exon_archive.c"
    return Extension(
        "exon.native._archive",
        sources=[str(source) if absolute_paths else _relative(source)],
        extra_link_args=SANITIZE_FLAGS if sanitize() else [],
        extra_compile_args=[*_opt_flags(), "-std=gnu11", "-Wall", "-Wextra",
                            "-Wno-unused-parameter",
                            "-Wno-missing-field-initializers"],
    )


def _build_fast_in_place() -> pathlib.Path:
    from setuptools import Distribution
    from setuptools.command.build_ext import build_ext

    ext = fast_extension(absolute_paths=True)
    dist = Distribution({"ext_modules": [ext]})
    cmd = build_ext(dist)
    cmd.build_temp = "build/fast-temp"
    cmd.build_lib = "build/fast-lib"
    cmd.ensure_finalized()
    cmd.run()
    return _install(pathlib.Path(cmd.get_ext_fullpath(ext.name)))


def _install(built: pathlib.Path) -> pathlib.Path:
    """Copy a built module next to this file, replacing the old one atomically: a running
    process has the old .so mapped, and overwriting it in place (copy2 truncates) crashes
    that process with SIGBUS."""
    target = HERE / built.name
    staging = target.with_name(target.name + f".{os.getpid()}.tmp")
    shutil.copy2(built, staging)
    os.replace(staging, target)
    return target


if __name__ == "__main__":
    # In-place development build: python exon/native/build.py
    os.chdir(HERE.parent.parent)
    built = pathlib.Path(make_ffibuilder(absolute_paths=True).compile(
        tmpdir="build/cffi", verbose="-v" in sys.argv))
    for stale in HERE.glob("_exon*.so"):
        if stale.name != built.name:
            stale.unlink()  # an older build under another suffix would shadow or confuse
    print(_install(built))
    print(build_bench_in_place(verbose="-v" in sys.argv))
    print(_build_fast_in_place())
