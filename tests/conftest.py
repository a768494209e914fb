"""Suite-wide setup.

Nodes of the test suite embed their own driver unless a test asks otherwise: a host
driver someone left running at /dev/shm/exon-<user> (``exon driver``) must not be picked
up by ``exon.Node()``'s default (``driver="auto"``). Set at import time, so the worker
processes the tests start inherit it. Tests of the choice itself pass ``driver=`` or
change the variable with ``monkeypatch``.
"""

from __future__ import annotations

import os

os.environ["EXON_NODE_DRIVER"] = "embedded"

# Hypothesis' per-example deadline (200 ms) measures the machine, not the code: on a shared,
# loaded CI host it fails tests that are correct. Speed is measured by the benchmarks.
from hypothesis import settings

settings.register_profile("exon-suite", deadline=None)
settings.load_profile("exon-suite")
