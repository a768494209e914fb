"""The pipeline demo on a cluster of two workers, its driver killed and restarted.

A Spark standalone cluster on localhost: a master and two workers of one core each, started
with the ``spark-class`` script pyspark ships (its wheel has no ``sbin/start-master.sh``).
``exon pipeline demo --master`` runs on it (``exon.spark.demo.run_demo``): producers PUSH
events into an archive; the query's executors, JVMs of both workers apart from the driver,
replay them over exon (never through a path), count and sum them per key and event-time
window, and append the windows to Parquet; the driver is SIGKILLed while a batch is between
the offset log and the commit log, and restarted on the cluster from its checkpoint; and the
Parquet windows count every recorded event exactly once.

(The archive sink across a killed driver: ``test_failover.py``, in local mode.)"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.spark.helpers import StandaloneCluster, require_java


def _apps(cluster: StandaloneCluster) -> dict[str, set[str]]:
    """Application id -> the workers (``work<i>``) that ran one of its executors."""
    apps: dict[str, set[str]] = {}
    for log in cluster.executor_logs():  # work<i>/app-<id>/<executor>/stderr
        apps.setdefault(log.parts[-3], set()).add(log.parts[-4])
    return apps


@pytest.mark.slow
def test_the_pipeline_demo_on_two_workers_counts_each_event_once_across_a_killed_driver(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    require_java()
    # the JVMs here (the drivers, and the executors through their conf) run C1 only: they
    # start faster, and run short
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1\n"
        "spark.executor.extraJavaOptions -XX:TieredStopAtLevel=1\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    from exon.spark.demo import run_demo

    with StandaloneCluster(tmp_path / "cluster", workers=2, cores=1) as cluster:
        # a short run of few events: the kill, the restart and the check are the same
        # (keep: its logs stay in tmp_path, which pytest cleans)
        code = run_demo(producers=1, rate=250.0, seconds=4.0, workdir=str(tmp_path / "demo"),
                        keep=True, master=cluster.url, timeout=240.0)
        apps = _apps(cluster)
    steps = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("{"):
            step = json.loads(line)
            steps[step["step"]] = step
    assert steps["query"]["master"] == cluster.url
    assert steps["killed"]["signal"] == "SIGKILL"
    assert steps["recovered"]["committed"]
    check = steps["check"]
    assert check["events"] > 0
    assert (check["counted"], check["duplicate_windows"], check["missing"],
            check["wrong"]) == (check["events"], 0, 0, 0), check
    assert code == 0
    # the killed query and its restart each ran executors on both workers
    assert list(apps.values()) == [{"work0", "work1"}] * 2, apps
