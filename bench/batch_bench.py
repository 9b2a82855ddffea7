"""Wall time of batch conversion over a corpus folder at several --jobs values (figures, not a test).

    .venv/bin/python bench/batch_bench.py [--corpus ../shared/corpus] [--folder ops] [--jobs 1 4] [--validate]

Each run is `layout-inspector convert FOLDER -o TMP/ --jobs N` in a fresh process, so start-up is counted as a
user sees it; the summary's counts must agree between runs (they are printed, and a disagreement is an error).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--folder", default="ops")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--validate", action="store_true")
    a = ap.parse_args()
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
