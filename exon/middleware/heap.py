"""Giving freed heap memory back to the system after a drain (glibc ``malloc_trim``).

The payloads of queued messages above 512 bytes live in malloc's heap (pymalloc keeps only
small objects). When a backlog is taken, glibc keeps most of the freed pages: only the top
of a heap is trimmed by itself, so a process would stay as large as its largest queue.
:meth:`HeapTrimmer.maybe_trim`, which the Node calls when it is idle, asks malloc how many
bytes lie free in its arenas (``mallinfo2``) and, above a threshold, has it return every
whole free page (``malloc_trim(0)`` madvises them away; the addresses stay usable). Where
the C library is not glibc (or too old for ``mallinfo2``) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

__all__ = ["HeapTrimmer"]

_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
           "fordblks", "keepcost")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _FIELDS]


def _load_libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        info, trim = libc.mallinfo2, libc.malloc_trim
    except (OSError, AttributeError):
        return None
    info.restype = _Mallinfo2
    info.argtypes = []
    trim.restype = ctypes.c_int
    trim.argtypes = [ctypes.c_size_t]
    return libc


class HeapTrimmer:
    """``maybe_trim()``: trim when at least ``threshold`` bytes lie free in malloc's arenas.
    ``available`` is False where the C library offers no way (then nothing happens)."""

    def __init__(self, threshold: int = 4 << 20) -> None:
        self.threshold = threshold
        self._libc = _load_libc()
        self.trims = 0  #: how often malloc_trim ran

    @property
    def available(self) -> bool:
        return self._libc is not None

    def free_bytes(self) -> int:
        """Bytes free inside malloc's arenas (0 when unknown)."""
        if self._libc is None:
            return 0
        return int(self._libc.mallinfo2().fordblks)

    def maybe_trim(self) -> bool:
        """True if it trimmed."""
        if self._libc is None or self.free_bytes() < self.threshold:
            return False
        self._libc.malloc_trim(0)
        self.trims += 1
        return True
