"""The one rule for a blocking call's ``timeout``, shared by the sync and async faces."""

from __future__ import annotations

import math
import time

from exon import errors

__all__ = ["check_timeout", "deadline"]


def check_timeout(timeout: float | None) -> float | None:
    """A blocking call's ``timeout``: seconds (int or float, >= 0), or None / ``math.inf``
    for no limit (None returned). ArgumentTypeError for a non-number, ConfigurationError
    (a ValueError) for nan or a negative."""
    if timeout is None:
        return None
    cls = type(timeout)
    if cls is not float and cls is not int and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise errors.ArgumentTypeError(
            f"timeout must be a number of seconds or None, not {cls.__name__}")
    if not timeout >= 0:  # negative, or nan
        raise errors.ConfigurationError(f"timeout must be >= 0 or None, not {timeout!r}")
    if timeout == math.inf:
        return None
    return float(timeout)


def deadline(timeout: float | None) -> float | None:
    """The monotonic deadline of ``timeout`` (see :func:`check_timeout`); None: no limit."""
    seconds = check_timeout(timeout)
    return None if seconds is None else time.monotonic() + seconds
