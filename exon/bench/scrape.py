"""``exon bench sockets --scrape``: what Prometheus scraping costs a push/pull run.

The exporter runs as it is deployed, its own ``exon stat --serve`` process on the bench's
driver, and a scraper process (as Prometheus is) asks it for ``/metrics`` ``rate`` times
a second (10: far more often than any Prometheus, whose default is every 15 s) for the
whole of every scraped run. Each round runs push/pull without the scraper and with it, in turns
(the order alternates between rounds, so a drift of the machine falls on both); the line
gives the medians, each round's figures, and how many scrapes ran and what they took.
Ratio = scraped / not scraped: 1 means scraping costs nothing (goal: >= 0.97).
"""

from __future__ import annotations

import contextlib
import json
import select
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from exon.bench.report import emit
from exon.bench.sockets import _DRIVER, exon_push_pull
from exon.transport.aeron.settings import fresh_driver_dir

__all__ = ["run_scrape_bench", "scrape_loop"]


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
    """GET ``url`` ``rate`` times a second until :meth:`stop`, from a child process (as
    Prometheus scrapes: a scraper thread in the bench's own process would take the GIL
    from the push/pull threads it measures, a cost no deployment has)."""

    def __init__(self, url: str, rate: float) -> None:
        self.durations: list[float] = []
        self.bytes = 0
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from exon.bench.scrape import scrape_loop; "
                                   "scrape_loop(sys.argv[1], float(sys.argv[2]))",
             url, str(rate)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":  # scraping from here on
            self._proc.kill()
            self._proc.wait(10)
            raise RuntimeError("the bench's scraper did not start")

    def stop(self) -> None:
        try:
            out, _ = self._proc.communicate("", timeout=15)  # EOF on stdin: stop
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.communicate()
            raise RuntimeError("the bench's scraper did not stop") from None
        found = json.loads(out)
        self.durations, self.bytes = found["durations"], found["bytes"]


def scrape_loop(url: str, rate: float) -> None:
    """The scraper process: print ``ready``, GET ``url`` ``rate`` times a second until
    stdin ends, then print ``{"durations": [s, ...], "bytes": N}`` (the last answer's
    size)."""
    period = 1.0 / rate
    durations: list[float] = []
    size = 0
    print("ready", flush=True)
    next_at = time.monotonic()
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], max(0.0, next_at - time.monotonic()))
        if ready:  # the bench closed stdin
            break
        t = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as answer:
            size = len(answer.read())
        durations.append(time.perf_counter() - t)
        next_at = max(next_at + period, time.monotonic())
    print(json.dumps({"durations": durations, "bytes": size}), flush=True)


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
