"""How far float outputs may drift on chaotic models: our ONNX (ONNX Runtime) against LiteRT's reference kernels,
next to LiteRT's own optimized builtin kernels and its XNNPACK delegate against the same reference, per seed.
Errors are max |a - ref| / max |ref| of the worst output, the measure `validate` uses.

    .venv/bin/python tools/float_drift.py --corpus ../shared/corpus [--seeds 3]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import make_inputs, validate

MODELS = ["keras/efficientnetb0_fp16.tflite", "keras/mobilenetv2_fp16.tflite", "keras/mobilenetv2_dynamic.tflite",
          "keras/mobilenetv2_dynamic.tflite --exact-int"]


def litert(path: Path, resolver, inputs) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(str(path), experimental_op_resolver_type=resolver, num_threads=1)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).astype(np.float64) for d in it.get_output_details()]


def drift(outs, refs) -> float:
    return max(float(np.abs(o - r).max() / max(np.abs(r).max(), 1e-12)) for o, r in zip(outs, refs))


def main(argv=None) -> int:
    from ai_edge_litert.interpreter import OpResolverType as R
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpus"))
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    print("| model | seed | ours (ONNX Runtime) | LiteRT optimized builtins | LiteRT XNNPACK |")
    print("|---|---|---|---|---|")
    for rel in MODELS:
        path = args.corpus / rel.split()[0]
        graph = read_tflite(path)
        result = convert(graph, exact_int=rel.endswith("--exact-int"))
        for seed in range(args.seeds):
            inputs = make_inputs(graph, seed, None)
            ref = litert(path, R.BUILTIN_REF, inputs)
            ours = max(e.max_rel for e in validate(result, seed=seed, intermediates=False).outputs)
            cells = [ours, drift(litert(path, R.BUILTIN_WITHOUT_DEFAULT_DELEGATES, inputs), ref),
                     drift(litert(path, R.AUTO, inputs), ref)]
            print(f"| {rel} | {seed} | " + " | ".join(f"{c:.1e}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
