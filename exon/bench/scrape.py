"""``exon bench sockets --scrape``: what Prometheus scraping costs a push/pull run.

The exporter runs as it is deployed, its own ``exon stat --serve`` process on the bench's
driver, and a scraper thread of the bench asks it for ``/metrics`` ``rate`` times a second
(10: far more often than any Prometheus, whose default is every 15 s) for the whole of
every scraped run. Each round runs push/pull without the scraper and with it, in turns
(the order alternates between rounds, so a drift of the machine falls on both); the line
gives the medians, each round's figures, and how many scrapes ran and what they took.
Ratio = scraped / not scraped: 1 means scraping costs nothing (goal: >= 0.97).
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from exon.bench.report import emit
from exon.bench.sockets import _DRIVER, exon_push_pull
from exon.transport.aeron.settings import fresh_driver_dir

__all__ = ["run_scrape_bench"]


@contextmanager
def _exporter(directory: str) -> Iterator[str]:
    """``exon stat --serve 127.0.0.1:0 --dir DIRECTORY`` as a child process: its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "exon.cli", "stat", "--serve",
                             "127.0.0.1:0", "--dir", directory], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if len(line) < 2 or line[0] != "serving":
            raise RuntimeError("exon stat --serve did not start")
        yield line[1]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class _Scraper:
    """GET ``url`` ``rate`` times a second from a thread until :meth:`stop`."""

    def __init__(self, url: str, rate: float) -> None:
        self.url = url
        self.period = 1.0 / rate
        self.durations: list[float] = []
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-scraper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            t = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                self.bytes = len(answer.read())
            self.durations.append(time.perf_counter() - t)
            next_at = max(next_at + self.period, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def run_scrape_bench(*, sizes: tuple[int, ...] = (64,), messages: int = 2_000_000,
                     credits: int | None = None, runs: int = 5,
                     rate: float = 10.0) -> list[dict[str, object]]:
    from exon.transport.aeron import MediaDriver

    if credits is None:
        from exon.core import LinkSettings

        credits = LinkSettings().initial_credits
    directory = fresh_driver_dir("exon-bench-scrape")
    lines = []
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(MediaDriver.launch(dir=directory, **_DRIVER))
            url = stack.enter_context(_exporter(directory))
            for size in sizes:
                plain: list[float] = []
                scraped: list[float] = []
                durations: list[float] = []
                scrape_bytes = 0
                for round_ in range(runs):
                    for scraping in ((False, True) if round_ % 2 == 0 else (True, False)):
                        scraper = _Scraper(url, rate) if scraping else None
                        try:
                            result = exon_push_pull(directory, size, messages, credits)
                        finally:
                            if scraper is not None:
                                scraper.stop()
                        if scraper is None:
                            plain.append(result.rate)
                        else:
                            scraped.append(result.rate)
                            durations += scraper.durations
                            scrape_bytes = scraper.bytes
                durations.sort()
                lines.append(emit(
                    f"push_pull_{size}B_scraped", exon=statistics.median(scraped),
                    peer=statistics.median(plain), peer_name="not-scraped", unit="msgs/s",
                    higher_is_better=True, messages=messages, credits=credits, runs=runs,
                    scrape_rate=rate, scrapes=len(durations),
                    scrape_ms_p50=round(1e3 * durations[len(durations) // 2], 2)
                    if durations else None,
                    scrape_bytes=scrape_bytes, scraped_runs=[round(r) for r in scraped],
                    plain_runs=[round(r) for r in plain]))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return lines
