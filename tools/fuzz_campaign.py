#!/usr/bin/env python3
"""A fuzz campaign: about a million mutated inputs per decoder against a build of the C core
with AddressSanitizer and UndefinedBehaviorSanitizer (issue 13).

    python tools/fuzz_campaign.py                      # build, then 1,000,000 per decoder
    python tools/fuzz_campaign.py --inputs 100000 --targets exon_frames,cnc_file
    python tools/fuzz_campaign.py --no-sanitize        # the plain build, in this tree

What it does:

1. copies ``exon/``, ``setup.py`` and ``pyproject.toml`` into a work directory and builds
   the three extensions there with ``EXON_NATIVE_SANITIZE=1`` (exon/native/build.py): the
   shared tree's modules stay as they are;
2. runs one worker process per target (``tests/fuzz/targets.py``) with the ASan runtime
   preloaded (``LD_PRELOAD=$(gcc -print-file-name=libasan.so)``, leak detection off: the
   interpreter's own allocations look like leaks) and UBSan halting on the first report;
3. a worker feeds ``--inputs`` inputs from the mutator (seeded: input i of a target is the
   same on every run) and reports every exception that is not the target's typed error,
   with the input saved under ``--out``;
4. a worker that dies (a sanitizer report, a signal) is rerun on its last chunk saving each
   input before running it, so the input that killed it is on disk; the report names it.

The summary (one JSON line per target, then a table) says how many inputs ran, how many
decoded, how many were refused with the typed error, and what was found.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 100_000


def build(work: Path, *, sanitize: bool) -> Path:
    """A copy of the tree with the native modules built (sanitized or not); returns it."""
    tree = work / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    shutil.copytree(ROOT / "exon", tree / "exon",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.tmp"))
    shutil.copytree(ROOT / "tests" / "fuzz", tree / "tests" / "fuzz",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "tests" / "__init__.py").write_text("")
    for name in ("setup.py", "pyproject.toml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, tree / name)
    env = {**os.environ, "EXON_NATIVE_SANITIZE": "1" if sanitize else "0"}
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                   env=env, check=True, stdout=subprocess.DEVNULL)
    return tree


def sanitizer_env(tree: Path, *, sanitize: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    if sanitize:  # Python objects from malloc, so ASan sees the end of each buffer
        env["PYTHONMALLOC"] = "malloc"
    if sanitize:
        libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        env["LD_PRELOAD"] = libasan
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
        env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    return env


# ---- the worker (runs inside the sanitized tree) -------------------------------------------


def _input(target_seeds: list[bytes], seed: int, index: int) -> bytes:
    from tests.fuzz.targets import mutate

    return mutate(random.Random(seed * 1_000_003 + index), target_seeds)


def worker(name: str, start: int, count: int, seed: int, out: Path, save_each: bool) -> int:
    from tests.fuzz.targets import TARGETS

    target = TARGETS[name]
    seeds = target.seeds()
    out.mkdir(parents=True, exist_ok=True)
    stats = {"target": name, "start": start, "inputs": 0, "decoded": 0, "refused": 0,
             "findings": []}
    last = out / f"{name}.last-input"
    t0 = time.perf_counter()
    for index in range(start, start + count):
        data = _input(seeds, seed, index)
        if save_each:
            last.write_bytes(data)
        try:
            target.run(data)
            stats["decoded"] += 1
        except target.expected:
            stats["refused"] += 1
        except Exception as exc:  # a finding: save it, go on
            path = out / f"{name}-{index}.bin"
            path.write_bytes(data)
            if len(stats["findings"]) < 20:
                stats["findings"].append({
                    "index": index, "input": str(path), "error": repr(exc)[:300],
                    "where": traceback.format_exc().splitlines()[-3:]})
        stats["inputs"] += 1
    stats["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(stats), flush=True)
    return 0


# ---- the driver ---------------------------------------------------------------------------


def run_target(tree: Path, env: dict[str, str], name: str, inputs: int, seed: int,
               out: Path) -> dict[str, object]:
    total = {"target": name, "inputs": 0, "decoded": 0, "refused": 0, "findings": [],
             "crash": None, "seconds": 0.0}
    for start in range(0, inputs, CHUNK):
        count = min(CHUNK, inputs - start)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name,
               "--start", str(start), "--count", str(count), "--seed", str(seed),
               "--out", str(out)]
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=3600)
        if proc.returncode != 0:
            # rerun the chunk saving each input first: the one that killed it stays on disk
            again = subprocess.run([*cmd, "--save-each"], cwd=tree, env=env,
                                   capture_output=True, text=True, timeout=3600)
            last = out / f"{name}.last-input"
            crash = out / f"{name}-crash-{start}.bin"
            if last.exists():
                shutil.copy2(last, crash)
            report = [line for line in (again.stderr or proc.stderr).splitlines()
                      if "ERROR" in line or "runtime error" in line or "SUMMARY" in line
                      or line.strip().startswith("#")][:25]
            total["crash"] = {"chunk_start": start, "returncode": proc.returncode,
                              "input": str(crash), "report": report}
            break
        stats = json.loads(proc.stdout.strip().splitlines()[-1])
        for key in ("inputs", "decoded", "refused"):
            total[key] += stats[key]
        total["seconds"] = round(float(total["seconds"]) + stats["seconds"], 1)
        total["findings"].extend(stats["findings"][: 20 - len(total["findings"])])
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000, help="inputs per decoder")
    parser.add_argument("--targets", default="", help="comma-separated names (default: all)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--work", default="", help="work directory (default: a temporary one)")
    parser.add_argument("--out", default="fuzz-findings", help="where findings are saved")
    parser.add_argument("--no-sanitize", action="store_true", help="plain build, this tree")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--save-each", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if args.worker:
        sys.path.insert(0, os.getcwd())
        return worker(args.worker, args.start, args.count, args.seed, out, args.save_each)

    sanitize = not args.no_sanitize
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="exon-fuzz-"))
    t0 = time.perf_counter()
    tree = build(work, sanitize=sanitize) if sanitize else ROOT
    print(f"# tree {tree} (sanitized: {sanitize}), built in {time.perf_counter() - t0:.0f} s",
          flush=True)
    env = sanitizer_env(tree, sanitize=sanitize)
    sys.path.insert(0, str(ROOT))
    from tests.fuzz.targets import TARGETS

    names = [n for n in args.targets.split(",") if n] or sorted(TARGETS)
    results = []
    for name in names:
        result = run_target(tree, env, name, args.inputs, args.seed, out)
        results.append(result)
        print(json.dumps(result), flush=True)
    print(f"\n{'target':22} {'inputs':>9} {'decoded':>9} {'refused':>9} {'per s':>7}  found")
    bad = 0
    for r in results:
        found = len(r["findings"]) + (1 if r["crash"] else 0)
        bad += found
        rate = r["inputs"] / r["seconds"] if r["seconds"] else 0
        print(f"{r['target']:22} {r['inputs']:9d} {r['decoded']:9d} {r['refused']:9d} "
              f"{rate:7.0f}  {'crash' if r['crash'] else ''}{found or '-'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
