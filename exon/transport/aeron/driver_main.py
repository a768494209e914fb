"""Run a media driver in the foreground until SIGINT/SIGTERM (``exon driver --dir DIR``).

``python -m exon.transport.aeron.driver_main --dir DIR [--driver-timeout-ms N]
[--set field=value ...]`` does the same without the CLI.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from exon.errors import ExonError
from exon.transport.aeron.driver import DEFAULT_DRIVER_TIMEOUT_MS, MediaDriver
from exon.transport.aeron.settings import DriverSettings

__all__ = ["main", "run_driver"]


def run_driver(
    dir: str | None = None,
    settings_overrides: Mapping[str, Any] | None = None,
    *,
    driver_timeout_ms: int = DEFAULT_DRIVER_TIMEOUT_MS,
    ready: threading.Event | None = None,
    stop: threading.Event | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> int:
    """Launch a driver on ``dir`` (default: ``$EXON_DIR``, else the host driver's directory
    :func:`~exon.transport.aeron.settings.default_driver_dir`, ``/dev/shm/exon-<user>``),
    print its directory, run until SIGINT/SIGTERM (or ``stop`` is set, or a client sends
    TERMINATE_DRIVER), then close it cleanly. ``on_ready(dir)`` is called once the driver
    runs (``exon driver --health``: readiness, systemd's READY=1). Returns the exit status
    (0); a driver that cannot start (a live driver already owns the directory, say) raises."""
    overrides = dict(settings_overrides or {})
    if dir is not None:
        overrides["dir"] = dir
    settings = DriverSettings.from_env(**overrides)
    stop = stop or threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        with MediaDriver.launch(settings, driver_timeout_ms=driver_timeout_ms) as driver:
            print(driver.dir, flush=True)
            if ready is not None:
                ready.set()
            if on_ready is not None:
                on_ready(driver.dir)
            while not stop.wait(0.1):
                if driver.terminate_requested:
                    break
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exon-driver", description=__doc__)
    parser.add_argument("--dir", default=None,
                        help="driver directory (default $EXON_DIR, else /dev/shm/exon-USER)")
    parser.add_argument("--driver-timeout-ms", type=int, default=DEFAULT_DRIVER_TIMEOUT_MS)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="a DriverSettings field, e.g. threading_mode=SHARED")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set wants FIELD=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    try:
        return run_driver(args.dir, overrides, driver_timeout_ms=args.driver_timeout_ms)
    except ExonError as exc:  # one line, as `exon driver` says it
        print(f"Error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
