"""The scrape bench's scraper: a child process that GETs a URL at a rate until stopped."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from exon.bench.scrape import _Scraper

BODY = b"# a metrics page\nexon_up 1\n" * 10


class _Page(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_scraper_process_reports_each_scrape_and_the_page_size(url: str) -> None:
    _Page.hits = 0
    scraper = _Scraper(url, rate=50.0)
    time.sleep(0.5)
    scraper.stop()
    assert scraper.bytes == len(BODY)
    assert len(scraper.durations) == _Page.hits
    assert 3 <= _Page.hits <= 40  # 50/s for about 0.5 s, with a child's start-up
    assert all(0 < d < 10 for d in scraper.durations)
