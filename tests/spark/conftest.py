"""Spark tests: one SparkSession for the whole test session, and an archive service.

Everything under tests/spark is marked ``spark``. The session (local[2], no UI, two shuffle
partitions, the running interpreter for the Python workers) starts once, on first use; the
archive services are subprocesses (``python -m exon.cli archive serve``) on 127.0.0.1.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.sockets.helpers import driver, make_node  # noqa: F401 (push_rows' nodes)
from tests.spark.helpers import ArchiveService, require_java

HERE = pathlib.Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in pathlib.Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    require_java()
    from exon.spark.clients import sweep_stale_dirs
    from exon.spark.session import local_session

    session = local_session("exon-tests", cores=2, conf={
        # C1 only: the JVM starts faster, and these tests are short
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"})
    yield session
    session.stop()
    # Spark ends its Python workers with os._exit or SIGKILL: remove the driver
    # directories their nodes left (any later exon.spark node would, too)
    sweep_stale_dirs()


#: recordings of the shared archive service; each test takes fresh ones
POOL = [f"r{i}" for i in range(40)]


@pytest.fixture(scope="session")
def archive_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArchiveService]:
    # small segments: replays and plans cross segment files, and truncation has some to drop
    service = ArchiveService(tmp_path_factory.mktemp("archive") / "dir",
                             ingest={name: 100 + i for i, name in enumerate(POOL)},
                             segment_length=64 * 1024)
    with service:
        yield service


@pytest.fixture(scope="session")
def _pool() -> list[str]:
    return list(POOL)


@pytest.fixture
def archive(archive_service: ArchiveService) -> ArchiveService:
    """The session's archive service (one for every test: recordings keep the tests apart)."""
    return archive_service


@pytest.fixture
def fresh(_pool: list[str]) -> Callable[[], str]:
    """``fresh()`` -> the name of an empty recording no other test uses."""

    def take() -> str:
        if not _pool:
            raise RuntimeError("the test archive ran out of fresh recordings: grow POOL")
        return _pool.pop(0)

    return take
