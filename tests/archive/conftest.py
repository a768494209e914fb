from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from exon.archive import Archive

SEGMENT = 64 * 1024
PRODUCER = b"127.0.0.1:4000/7"


@pytest.fixture
def owned(tmp_path) -> Iterator[Archive]:
    ar = Archive(str(tmp_path / "arch"), owner=True)
    ar.create_recording("orders", segment_length=SEGMENT)
    yield ar
    ar.close()


def fill(ar: Archive, name: str, payloads: list[bytes], batch: int = 50) -> None:
    w = ar.writer(name)
    for i in range(0, len(payloads), batch):
        chunk = payloads[i:i + batch]
        w.append(chunk, [PRODUCER] * len(chunk), time.time_ns())


def random_payloads(n: int, seed: int = 1, max_size: int = 5000) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randrange(0, max_size)) for _ in range(n)]
