"""exon for Spark: ``format("exon")``, a PySpark data source and sink (``pip install
'exon[spark]'``).

```python
from exon.spark import ExonDataSource
spark.dataSource.register(ExonDataSource)
events = (spark.readStream.format("exon")
          .option("archive", "127.0.0.1:PORT").option("recording", "orders").load())
```

Reads replay recordings of an exon archive (``exon archive serve``) by position, so a
query restarted from its checkpoint re-reads exactly its uncommitted range; writes PUSH
rows to a PULL socket (at-least-once) or record them through the archive's keyed ingest
(exactly-once). ``docs/spark.md`` has every option. exon itself never imports pyspark; this
package does, on first use of ``ExonDataSource``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DataLossError", "ExonDataSource"]


def __getattr__(name: str) -> Any:
    if name == "DataLossError":  # no pyspark needed
        from exon.spark.plan import DataLossError

        globals()[name] = DataLossError
        return DataLossError
    if name == "ExonDataSource":
        from exon.spark.source import ExonDataSource

        globals()[name] = ExonDataSource
        return ExonDataSource
    raise AttributeError(f"module 'exon.spark' has no attribute {name!r}")
