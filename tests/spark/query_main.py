"""A streaming query in its own process, for the tests that kill it hard:
``python -m tests.spark.query_main ARCHIVE SOURCE OUT CHECKPOINT [--slow SECONDS_PER_ROW]``.

Reads recording SOURCE (at most 400 records per micro-batch), passes each payload through a
Python UDF that sleeps ``--slow`` seconds per row (so that a batch takes long enough for the
test to catch it between the offset log and the commit log), and records the payloads into
recording OUT through the archive sink (exactly-once). Prints ``started`` once the query
runs, then runs until killed or until everything is read (availableNow)."""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("archive")
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("checkpoint")
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--per-trigger", default="400")
    parser.add_argument("--master", default=None)
    args = parser.parse_args()

    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    from exon.spark.session import local_session

    spark = local_session("exon-kill-test", master=args.master,
                          conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"})
    delay = args.slow

    @F.udf(BinaryType())
    def slow(payload: bytes) -> bytes:
        if delay:
            time.sleep(delay)
        return payload

    df = (spark.readStream.format("exon").option("archive", args.archive)
          .option("recording", args.source).option("maxRecordsPerTrigger", args.per_trigger)
          .option("maxRecordsPerPartition", "200").load())
    query = (df.select(slow("payload").alias("payload")).writeStream.format("exon")
             .option("archive", args.archive).option("recording", args.out)
             .option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True).start())
    print("started", query.id, flush=True)
    query.awaitTermination()
    print("finished", flush=True)


if __name__ == "__main__":
    main()
