"""The C benchmark loops (``exon.native._bench``): ``exon bench``'s, not the library's.

They live in a module of their own so that the library's ``_exon`` carries no benchmark
code (see ``exon/native/build.py``). That module compiles the loops alone: the core's
functions they call (offer, poll, clean, the error text) are the library's own, bound here
by address (``ffi.addressof`` on ``exon.native``'s lib, as the fast door is bound), so
they work on the library's objects: :func:`handle` casts a publication or image pointer of
``exon.native`` into this module's type. Errors land in the library's error text, so
:func:`check` is :func:`exon.native.check`.

The module is a development build, in no install or wheel: importing this file builds it
in place first when it is missing or was built from other sources than those beside it
(a stale copy could read other layouts than the library's), once, in a few seconds.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

from exon import native
from exon.native import bench_stamp


def _load_bench() -> tuple[Any, Any]:
    """``(ffi, lib)`` of ``exon.native._bench``, built in place first if it is not current."""
    try:
        if not bench_stamp.is_current(pathlib.Path(__file__).parent):
            from exon.native import build

            print("exon: building the benchmark loops (exon.native._bench) in place, once",
                  file=sys.stderr)
            build.build_bench_in_place()
        from exon.native._bench import ffi, lib
    except Exception as exc:
        raise ImportError(
            "exon's benchmark loops (exon.native._bench) are a development build and could "
            f"not be built here ({type(exc).__name__}: {exc}): run `python "
            "exon/native/build.py` in a source tree (needs a C compiler, cffi and setuptools)"
        ) from exc
    return ffi, lib


ffi, lib = _load_bench()
lib.exon_bench_bind(*(int(native.ffi.cast("uintptr_t", native.ffi.addressof(native.lib, name)))
                      for name in ("exon_publication_offer", "exon_image_poll",
                                   "exon_image_poll_count", "exon_log_clean_to",
                                   "exon_set_error")))
check = native.check

__all__ = ["check", "ffi", "handle", "lib"]


def handle(pointer: Any, ctype: str) -> Any:
    """``pointer`` (a cdata of ``exon.native``, e.g. ``exon_publication_t *``) as this
    module's ``ctype``."""
    return ffi.cast(ctype, int(native.ffi.cast("uintptr_t", pointer)))
