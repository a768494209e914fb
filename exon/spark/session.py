"""A local SparkSession set up for exon: what the tests, the demo and the bench share."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["local_session", "spark_env"]


def _exon_path() -> str:
    """PYTHONPATH with the directory this process imports exon from in front: Spark's
    Python workers (local, or a cluster's executors on this machine, which get the
    environment of the worker JVM that starts them) then import the same exon, not
    whatever the interpreter's site-packages hold."""
    import exon

    root = os.path.dirname(os.path.dirname(os.path.abspath(exon.__file__)))
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return os.pathsep.join([root, *rest])


def spark_env() -> dict[str, str]:
    """Environment for Spark's Python workers and JVM: this interpreter and this exon,
    loopback only."""
    return {
        "PYTHONPATH": _exon_path(),
        # the workers must run this interpreter (pyarrow, exon), not the `python3` on PATH
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # keep Spark's own sockets on loopback (its hostname may resolve elsewhere)
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
    }


def local_session(app: str, *, cores: int = 2, master: str | None = None,
                  shuffle_partitions: int = 2, conf: dict[str, str] | None = None) -> Any:
    """A SparkSession (``local[cores]``, or ``master``) with the UI off, few shuffle
    partitions, and ``format("exon")`` registered."""
    os.environ.update(spark_env())
    from pyspark.sql import SparkSession

    from exon.spark import ExonDataSource

    builder = (
        SparkSession.builder.appName(app)
        .master(master or f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(ExonDataSource)
    return session
