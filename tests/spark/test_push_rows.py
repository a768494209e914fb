"""The sink's peer mode without Spark: push_rows sends chunks with send_many and returns
only once every row was taken."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from exon.spark.sink import SinkError, push_rows


def _rows(n: int) -> list[bytes]:
    return [b"row%d" % i for i in range(n)]


def _reader(pull: Any, count: int, got: list[bytes]) -> threading.Thread:
    def run() -> None:
        for _ in range(count):
            got.append(pull.receive(timeout=5).payload)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_rows_go_in_chunks_and_return_once_all_were_taken(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=3, credits=5)  # less than a chunk: credit runs out midway
    got: list[bytes] = []
    reader = _reader(pull, 23, got)
    rows = _rows(23)
    assert push_rows(a, f"{b.address}/3", iter(rows), timeout=10, chunk=7) == 23
    assert got == rows  # every row taken before push_rows returned, in order
    reader.join(5)


def test_no_rows_sends_nothing(make_node) -> None:
    a, b = make_node(), make_node()
    b.socket("pull", tag=3)
    assert push_rows(a, f"{b.address}/3", [], timeout=5) == 0


def test_a_broken_link_fails_naming_the_rows(make_node) -> None:
    a, b = make_node(), make_node()
    pull = b.socket("pull", tag=3, credits=64)
    threading.Timer(0.3, lambda: pull.close(timeout=0)).start()
    with pytest.raises(SinkError, match=r"rows 0\.\.9 .*link broken"):
        push_rows(a, f"{b.address}/3", _rows(20), timeout=5, chunk=10)


def test_rows_not_taken_in_time_fail(make_node) -> None:
    a, b = make_node(), make_node()
    b.socket("pull", tag=3, credits=64)  # never receives
    with pytest.raises(SinkError, match=r"waiting for the cookies.*Timeout"):
        push_rows(a, f"{b.address}/3", _rows(8), timeout=0.5, chunk=4)
