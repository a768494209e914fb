"""The exon -> Spark -> Parquet pipeline, end to end, on this machine.

    python examples/pipeline.py [--producers 3] [--rate 2000] [--seconds 60] [--keep]

Starts an exon archive, producer processes pushing JSON events into it, and a Spark query
(local[2]) that reads them with format("exon"), counts and sums them per key in event-time
windows with a watermark, and writes Parquet with a checkpoint. Midway it kills the query's
driver with SIGKILL and restarts it from the checkpoint; at the end it checks that the
Parquet output counts every recorded event exactly once and prints the rates and the
latency. Needs `pip install 'exon[spark]'` and Java 17. The same as `exon pipeline demo`.
"""

from __future__ import annotations

import argparse
import sys

from exon.spark.demo import run_demo

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=2000.0, help="events/s per producer")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long producers run")
    parser.add_argument("--workdir", default=None, help="keep everything here")
    parser.add_argument("--keep", action="store_true", help="do not delete the work dir")
    args = parser.parse_args()
    sys.exit(run_demo(producers=args.producers, rate=args.rate, seconds=args.seconds,
                      workdir=args.workdir, keep=args.keep))
