"""exon.spark.session: the environment Spark's Python workers get (no Spark started)."""

from __future__ import annotations

import os
import pathlib

import pytest

import exon
from exon.spark.session import spark_env


def test_workers_import_this_exon_first_and_keep_the_rest_of_the_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(pathlib.Path(os.path.abspath(exon.__file__)).parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/elsewhere", root, "/more"]))
    path = spark_env()["PYTHONPATH"].split(os.pathsep)
    assert path == [root, "/elsewhere", "/more"]  # once, in front
    monkeypatch.delenv("PYTHONPATH")
    assert spark_env()["PYTHONPATH"] == root
