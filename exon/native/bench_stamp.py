"""Whether the in-place ``exon.native._bench`` was built from the sources beside it.

``_bench`` compiles the benchmark loops against the core's headers in ``src/`` (it calls
the library's ``_exon`` through pointers): built from other headers, it would read other
layouts than those of the ``_exon`` whose objects it takes. Its build
(``exon/native/build.py``) writes the digest of what it compiled into ``_bench.sources``;
``exon/native/bench_loops.py`` rebuilds when the digest of the sources now differs.
Standard library only: the check runs at every import of the loops, without the build
machinery (cffi's parser, setuptools).
"""

from __future__ import annotations

import hashlib
import os
import pathlib

__all__ = ["STAMP_NAME", "is_current", "sources_digest", "write_stamp"]

#: the stamp beside the built module
STAMP_NAME = "_bench.sources"
#: the environment switches of build.py that change the compile flags
_SWITCHES = ("EXON_NATIVE_DEBUG", "EXON_NATIVE_SANITIZE")


def sources_digest(root: pathlib.Path) -> str:
    """The digest of everything ``_bench`` is compiled from under ``root`` (exon/native):
    the core's headers, the loops and their declarations, the build script (its flags)
    and the switches of its environment."""
    digest = hashlib.sha256(repr([os.environ.get(name) for name in _SWITCHES]).encode())
    bench = root / "bench"
    paths = [root / "build.py", *(root / "src").rglob("*.h"), *bench.glob("*.[ch]"),
             *(bench / "cdef").glob("*.h")]
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def is_current(root: pathlib.Path) -> bool:
    """Whether the stamp in ``root`` names the digest of the sources there now (False
    without a stamp: never built in place, or by an older build)."""
    try:
        return (root / STAMP_NAME).read_text().strip() == sources_digest(root)
    except OSError:
        return False


def write_stamp(root: pathlib.Path, digest: str) -> None:
    """Record ``digest`` as what the ``_bench`` in ``root`` was built from (atomically)."""
    staging = root / f"{STAMP_NAME}.{os.getpid()}.tmp"
    staging.write_text(digest + "\n")
    os.replace(staging, root / STAMP_NAME)
