"""The noise floor over seeds (issue 31): validate every float corpus model at seeds 0-9, as `validate --seed N`
does (the floor measured for every output), and print per model the worst error/floor ratio, the verdicts and how
close the worst seed came to `fail` (error over the limit it was judged by; 1 would fail). Not a test: the full
sweep takes minutes; tests/test_noise_floor.py runs the models that come closest.

    .venv/bin/python bench/floor_sweep.py --corpus ../shared/corpus [--seeds 10] [--models 'keras/*_fp32*']
"""
from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Float models of every origin (quantized and dynamic-range ones are judged in steps, not by the float floor).
FLOAT_GLOBS = ["keras/*_fp32.tflite", "keras/*_fp16.tflite", "torch/*.tflite", "onnx2tf/*.tflite",
               "tfbuilt/*_fp32.tflite", "tfbuilt/*_fp16.tflite"]
NOT_FLOAT = ("_quant", "_int8", "_dynamic", "_dynq")


def float_models(corpus: Path, pattern: str | None) -> list[str]:
    found = sorted({str(p.relative_to(corpus)) for g in FLOAT_GLOBS for p in corpus.glob(g)})
    found = [f for f in found if not any(k in f for k in NOT_FLOAT)]
    return [f for f in found if pattern is None or fnmatch.fnmatch(f, pattern)]


def sweep(corpus: Path, rel: str, seeds: range, shapes: dict | None = None) -> list[tuple]:
    """(seed, verdict, worst error over its limit, worst error over its floor, worst floor over scale) per seed."""
    from inspector.core.emit.convert import convert
    from inspector.core.io.tflite_reader import read_tflite
    from inspector.core.proof.validate import validate
    result = convert(read_tflite(corpus / rel))
    rows = []
    for seed in seeds:
        v = validate(result, seed=seed, intermediates=False, floor=True, input_shapes=shapes)
        outs = [e for e in v.outputs if e.limit]
        closest = max((e.max_abs / e.limit for e in outs), default=0.0)
        ratio = max((e.ratio or 0.0 for e in outs), default=0.0)
        floor = max((e.floor / e.scale for e in outs if e.floor is not None and e.scale), default=0.0)
        rows.append((seed, v.verdict, closest, ratio, floor))
    return rows


# Models whose input has a dynamic size stored as a placeholder LiteRT cannot run: the size swept at.
SHAPES = {"tfbuilt/tf_melfront_dynlen_fp32.tflite": {"serving_default_wav:0": [1, 12000]}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared/corpus")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--models", default=None, help="a glob under the corpus")
    args = p.parse_args()
    print(f"{'model':<48} {'verdicts':<12} {'worst/limit':>11} {'worst/floor':>11} {'floor/scale':>11}  secs")
    bad = 0
    for rel in float_models(args.corpus, args.models):
        start = time.perf_counter()
        try:
            rows = sweep(args.corpus, rel, range(args.seeds), SHAPES.get(rel))
        except Exception as e:                   # a model that cannot be validated is reported, the sweep goes on
            print(f"{rel:<48} error: {str(e).splitlines()[0][:120]}", flush=True)
            continue
        kinds = "".join({"ok": ".", "suspicious": "s", "fail": "F"}[r[1]] for r in rows)
        bad += kinds.count("F")
        worst = max(rows, key=lambda r: r[2])
        print(f"{rel:<48} {kinds:<12} {worst[2]:>11.3g} {max(r[3] for r in rows):>11.3g} "
              f"{max(r[4] for r in rows):>11.3g}  {time.perf_counter() - start:.0f}  (closest: seed {worst[0]})",
              flush=True)
    print(f"fails: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
