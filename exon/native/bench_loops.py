"""The C benchmark loops (``exon.native._bench``): ``exon bench``'s, not the library's.

They live in a module of their own so that the library's ``_exon`` carries no benchmark
code (see ``exon/native/build.py``). That module holds a private copy of the core's C
functions the loops call, compiled from the same sources with the same flags, so it
works on the library's objects: :func:`handle` casts a publication or image pointer of
``exon.native`` into this module's type. :func:`check` raises as :func:`exon.native.check`
does, with this module's error text.
"""

from __future__ import annotations

from typing import Any

from exon import native

try:
    from exon.native._bench import ffi, lib
except ImportError as exc:  # pragma: no cover - only when the package was not built
    raise ImportError(
        "exon's benchmark loops are not built: install the package with `pip install -e .` "
        "(or run `python exon/native/build.py`)"
    ) from exc

__all__ = ["check", "ffi", "handle", "lib"]


def handle(pointer: Any, ctype: str) -> Any:
    """``pointer`` (a cdata of ``exon.native``, e.g. ``exon_publication_t *``) as this
    module's ``ctype``."""
    return ffi.cast(ctype, int(native.ffi.cast("uintptr_t", pointer)))


def check(rc: int, what: str = "") -> int:
    """Return ``rc`` if it is ``>= 0``; otherwise raise the matching exon error."""
    if rc >= 0:
        return rc
    detail = ""
    if lib.exon_last_error_code() == rc:
        detail = ffi.string(lib.exon_last_error()).decode("utf-8", "replace")
    raise native.error_for(rc, what, detail)
