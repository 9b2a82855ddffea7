"""Batch conversion figures (not a test): wall time over a corpus folder at several --jobs values, and the
start-up of a batch of many tiny models before its first worker starts.

    .venv/bin/python bench/batch_bench.py [--corpus ../shared/corpus] [--folder ops] [--jobs 1 4] [--validate]
    .venv/bin/python bench/batch_bench.py --startup 10000          # only the start-up figure (what `make bench` runs)

Each --jobs run is `layout-inspector convert FOLDER -o TMP/ --jobs N` in a fresh process, so start-up is counted as
a user sees it; the summary's counts must agree between runs (they are printed, and a disagreement is an error).
The start-up run converts a folder of N tiny models (folders of 100 same-named ones, so each keeps its folder) in a
fresh process that stops when the first worker would start: the time from main() to then (target: 2 s for 10,000
models), and from the process's start (imports included).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TARGET = 2.0            # seconds from main() to the first worker, for 10,000 models
# Runs in a fresh process: the first worker's start ends it, with the two figures printed.
STARTUP_DRIVER = """
import os, sys, time
started = float(sys.argv[3])
from multiprocessing import context
import inspector.cli, inspector.cli.convert, inspector.core.session.session
def start(self):
    now = time.time()
    print(now - t0, now - started, flush=True)
    os._exit(0)
context.ForkProcess.start = start
t0 = time.time()
sys.exit(inspector.cli.main(["convert", sys.argv[1], "-o", sys.argv[2] + "/", "--jobs", "1"]))
"""


def startup(n: int, runs: int = 3) -> int:
    """Median time before the first worker of a batch of `n` tiny models; prints it with the target met or missed."""
    sys.path.insert(0, str(ROOT))
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    x, y = b.input("x", [1, 3, 5, 7]), b.tensor("y", [1, 3, 5, 7])
    b.op("RELU", [x], [y])
    b.output(y)
    data = b.build()
    in_main, in_process = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(n):
            folder = Path(tmp, "models", f"f{k // 100:04d}")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"m{k % 100:02d}.tflite").write_bytes(data)
        for r in range(runs):
            proc = subprocess.run([sys.executable, "-c", STARTUP_DRIVER, str(Path(tmp, "models")),
                                   str(Path(tmp, f"out{r}")), repr(time.time())], capture_output=True, text=True,
                                  env=os.environ | {"PYTHONPATH": str(ROOT)}, timeout=1800)
            try:
                after_main, after_start = map(float, proc.stdout.split())
            except ValueError:
                print(f"error: the start-up run failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}",
                      file=sys.stderr)
                return 1
            in_main.append(after_main)
            in_process.append(after_start)
    t = statistics.median(in_main)
    target = STARTUP_TARGET * n / 10_000
    print(f"batch start-up, {n:,} tiny models in folders of 100 same-named: first worker {t:.2f} s after main() "
          f"(target {target:g} s: {'met' if t <= target else 'MISSED'}), "
          f"{statistics.median(in_process):.2f} s after the process started (imports included); median of {runs}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--folder", default="ops")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--startup", type=int, default=None, metavar="N",
                    help="only the start-up figure for a batch of N tiny models (default: the --jobs runs, then "
                         "the start-up of 10,000)")
    a = ap.parse_args()
    if a.startup is not None:
        return startup(a.startup)
    folder = Path(a.corpus) / a.folder
    results = {}
    for jobs in a.jobs:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "inspector", "convert", str(folder), "-o", tmp + "/out/", "--jobs",
                   str(jobs), "--summary", tmp + "/s.json"] + (["--validate"] if a.validate else [])
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
            wall = time.perf_counter() - t0
            rows = json.loads(Path(tmp, "s.json").read_text())["models"]
        results[jobs] = {(r["model"], r["ok"], r["nodes"], r["transposes"], r["verdict"]) for r in rows}
        ok = sum(r["ok"] for r in rows)
        print(f"{a.folder}/ --jobs {jobs}{' --validate' if a.validate else ''}: {len(rows)} models, {ok} ok, "
              f"{wall:.1f} s wall (exit {proc.returncode}, {os.cpu_count()} CPUs)")
    if len({frozenset(v) for v in results.values()}) != 1:
        print("error: the runs disagree on the results", file=sys.stderr)
        return 1
    return startup(10_000)


if __name__ == "__main__":
    raise SystemExit(main())
