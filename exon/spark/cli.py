"""``exon pipeline ...``: the exon -> Spark -> Parquet pipeline (needs ``exon[spark]``).

``pipeline_group`` is a click group for ``exon/cli.py`` to add; nothing here imports
pyspark until a command runs.
"""

from __future__ import annotations

import sys

import click


@click.group("pipeline")
def pipeline_group() -> None:
    """The data pipeline on Spark: format("exon") end to end."""


@pipeline_group.command("demo")
@click.option("--producers", default=3, show_default=True, help="producer processes")
@click.option("--rate", default=2000.0, show_default=True, help="events/s per producer")
@click.option("--seconds", default=60.0, show_default=True, help="how long producers run")
@click.option("--workdir", default=None, help="work directory (default: a temporary one)")
@click.option("--keep", is_flag=True, help="keep the work directory")
@click.option("--master", default=None,
              help="Spark master URL of the query, e.g. spark://HOST:7077 (default: local[2])")
def demo_command(producers: int, rate: float, seconds: float, workdir: str | None,
                 keep: bool, master: str | None) -> None:
    """Archive, producers, a Spark query killed midway and restarted; checks exactly-once."""
    from exon.spark.demo import run_demo

    sys.exit(run_demo(producers=producers, rate=rate, seconds=seconds, workdir=workdir,
                      keep=keep, master=master))
