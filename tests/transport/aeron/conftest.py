"""Shared fixtures of the Aeron transport tests (driver fixtures: driver_fixtures.py)."""

from __future__ import annotations

from .driver_fixtures import aeron, driver, driver_dir, stack  # noqa: F401
