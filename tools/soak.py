#!/usr/bin/env python3
"""The long soak of issue #13: 30 minutes (by default) of push/pull plus req/rep between
two exon nodes in network namespaces, under faults that change every round; RSS, file
descriptors and threads of both nodes must stay flat after the warm-up.

    sudo python tools/soak.py [--minutes 30] [--seed 1] [--logdir DIR]

Needs root, iproute2 and nftables (as the chaos suite: tests/chaos). Prints one line per
round and a JSON summary at the end; exit status 0 when everything arrived once, in order,
every reply matched, and nothing grew beyond tests/chaos/soak.py's LIMITS; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.netns import Lab, missing_requirements
from tests.chaos.soak import SoakFailure, run_soak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--logdir", type=Path, default=None,
                        help="where the nodes' and the relay's stderr go (default: a temp dir)")
    args = parser.parse_args()
    reason = missing_requirements(nft=True)
    if reason:
        print(f"soak: {reason}", file=sys.stderr)
        return 2
    logdir = args.logdir or Path(tempfile.mkdtemp(prefix="exon-soak-"))
    logdir.mkdir(parents=True, exist_ok=True)
    lab = Lab(logdir)
    try:
        lab.build()
        report = run_soak(lab, args.minutes * 60, seed=args.seed,
                          log=lambda line: print(line, flush=True))
    except SoakFailure as exc:
        print(f"soak FAILED: {exc} (logs in {logdir})", flush=True)
        return 1
    finally:
        lab.close()
    print(json.dumps(report.summary(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
