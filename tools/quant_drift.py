"""Where a quantized model's drift from LiteRT's reference kernels comes from, per op kind: every activation
tensor, in steps of its own scale, of the default QDQ conversion in ONNX Runtime (unoptimised), --exact-int, and
LiteRT's default kernels (XNNPACK, a plain Interpreter) against LiteRT's reference kernels.

Two measures per op: "global" (the whole model run on the seed's inputs: what reaches the tensor) and "local" (each
op fed the reference kernels' values of its inputs: the op's own error; inspector/core/proof/islands.py). Then how
the share of elements off grows along the net, and where our trajectory leaves XNNPACK's.

    .venv/bin/python tools/quant_drift.py --corpus ../shared/corpus keras/efficientnetb0_int8.tflite [...] [--seed 4]
"""
from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.islands import litert_values, onnx_outputs, onnx_values
from inspector.core.proof.validate import make_inputs, quant_step, run_tflite

from quant_report import step_errors                # tools/ is the script's directory


def main() -> None:
    from ai_edge_litert.interpreter import OpResolverType as R
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="+")
    ap.add_argument("--corpus", default="../shared/corpus")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for rel in args.model:
        graph = read_tflite(Path(args.corpus) / rel)
        report(graph, rel, args.seed, R)


def report(graph, rel: str, seed: int, R) -> None:
    sg = graph.main
    inputs = make_inputs(graph, seed)
    ref = run_tflite(graph, inputs)
    qdq, exact = convert(graph), convert(graph, exact_int=True)
    glob = {"XNNPACK": litert_values(graph, inputs, R.AUTO), "QDQ": onnx_values(qdq, inputs),
            "exact": onnx_values(exact, inputs)}
    local = {"XNNPACK": litert_values(graph, inputs, R.AUTO, ref),
             "optimized": litert_values(graph, inputs, R.BUILTIN_WITHOUT_DEFAULT_DELEGATES, ref),
             "QDQ": onnx_values(qdq, inputs, ref), "QDQ fused": onnx_values(qdq, inputs, ref, fused=True),
             "reference": litert_values(graph, inputs, R.BUILTIN_REF, ref)}     # 0 everywhere, or the rewrite is wrong
    size, off, mismatch, worst = Counter(), defaultdict(Counter), Counter(), defaultdict(Counter)
    for op in sg.ops:
        for t in op.outputs:
            if t not in ref or quant_step(sg, t) is None or not all(t in v for v in local.values()):
                continue
            size[op.opcode] += ref[t].size
            for k, v in local.items():
                off[k][op.opcode] += int(np.count_nonzero(v[t] != ref[t]))
            mismatch[op.opcode] += int(np.count_nonzero(local["QDQ"][t] != local["XNNPACK"][t]))
            for k, v in glob.items():
                if t in v:
                    worst[k][op.opcode] = max(worst[k][op.opcode], steps(sg, t, ref[t], v[t]))
    print(f"\n{rel}, seed {seed}. Local: elements off LiteRT's reference kernels with every op fed the reference's "
          "inputs; global: max steps on the seed's inputs")
    head = ["elements"] + [f"local {k}" for k in local] + ["local QDQ != XNNPACK"] + [f"global {k}" for k in glob]
    print("| op | " + " | ".join(head) + " |\n" + "|---" * (len(head) + 1) + "|")
    for kind in sorted(size):
        cells = [size[kind]] + [off[k][kind] for k in local] + [mismatch[kind]] + [f"{worst[k][kind]:g}" for k in glob]
        print(f"| {kind} | " + " | ".join(str(c) for c in cells) + " |")
    # Growth: share of each tensor's elements off the reference (global), and QDQ's off XNNPACK's, along the net.
    path = [op for op in sg.ops if op.outputs[0] in ref and quant_step(sg, op.outputs[0]) is not None
            and all(op.outputs[0] in v for v in glob.values())]
    marks = sorted({round(i * (len(path) - 1) / 10) for i in range(11)} | {next(
        (i for i, op in enumerate(path) if np.any(glob["QDQ"][op.outputs[0]] != glob["XNNPACK"][op.outputs[0]])), 0)})
    print("growth, % of elements off (global): op | XNNPACK vs reference | QDQ vs reference | QDQ vs XNNPACK")
    for i in marks:
        op, t = path[i], path[i].outputs[0]
        share = lambda a, b: 100 * np.count_nonzero(a != b) / a.size      # noqa: E731
        print(f"  {op.index} {op.opcode}: {share(glob['XNNPACK'][t], ref[t]):.3g} | {share(glob['QDQ'][t], ref[t]):.3g}"
              f" | {share(glob['QDQ'][t], glob['XNNPACK'][t]):.3g}")
    glob["QDQ fused"] = onnx_outputs(qdq, inputs, optimise=True)
    outs = {k: max(steps(sg, t, ref[t], v[t]) for t in sg.outputs if t in v) for k, v in glob.items()}
    itself = max(steps(sg, t, glob["QDQ"][t], glob["QDQ fused"][t]) for t in sg.outputs)
    print("outputs, max steps: " + ", ".join(f"{k} {v:g}" for k, v in outs.items())
          + f"; QDQ unoptimised vs fused (ONNX Runtime against itself): {itself:g}")


def steps(sg, t: int, ref: np.ndarray, got: np.ndarray) -> float:
    return float(step_errors(sg, t, ref, got).max()) if ref.size else 0.0


if __name__ == "__main__":
    main()
