"""Print the README's table of quantized-model errors: max quantization steps / % of output elements within 2
steps, per seed, for the default QDQ conversion run op by op, ONNX Runtime fully optimised ("fused"), and --exact-int;
then LiteRT's own optimized builtin kernels and XNNPACK delegate against its reference kernels (the same measure);
plus the ONNX file's size relative to the .tflite, how many Convs ONNX Runtime fuses into QLinearConv, and (--time)
ONNX Runtime's run time of both conversions (one thread, median of 20 runs).

    .venv/bin/python tools/quant_report.py --corpus ../shared/corpus [--time]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import make_inputs, validate

from float_drift import litert                      # tools/ is the script's directory

SEEDS = (0, 1, 2, 3, 4)
MODELS = ["keras/efficientnetb0_int8.tflite", "keras/mobilenetv2_int8.tflite", "keras/mobilenetv3small_int8.tflite",
          "ops/mobilenet_v1_0.25_128_quant.tflite", "ops/conv.uint8.tflite", "realworld/alexa.tflite",
          "onnx2tf/mobilenet_v2_w075_full_integer_quant.tflite", "onnx2tf/mnasnet0_75_full_integer_quant.tflite"]


def cell(v) -> str:
    e = max(v.outputs, key=lambda e: e.steps or 0)
    return f"{e.steps:g} / {100 * e.within:.1f}"


def worst(runs) -> str:
    """The worst run's cell, and how many runs pass when not all do."""
    runs = list(runs)
    cells = cell(max(runs, key=lambda v: max(e.steps or 0 for e in v.outputs)))
    passed = sum(v.ok for v in runs)
    return cells if passed == len(runs) else f"{cells} ({passed} of {len(runs)} pass)"


def litert_self(path: Path, graph) -> list[str]:
    """LiteRT's own optimized builtin kernels and its XNNPACK delegate against its reference kernels, worst of the
    seeds as max steps / % within 2 steps: how far TFLite's kernels disagree among themselves."""
    from ai_edge_litert.interpreter import OpResolverType as R
    cells = []
    for resolver in (R.BUILTIN_WITHOUT_DEFAULT_DELEGATES, R.AUTO):
        worst_steps, worst_within = 0.0, 1.0
        for s in SEEDS:
            x = make_inputs(graph, s)
            for a, r in zip(litert(path, resolver, x), litert(path, R.BUILTIN_REF, x)):
                d = np.abs(a - r)
                worst_steps, worst_within = max(worst_steps, d.max()), min(worst_within, (d <= 2).mean())
        cells.append(f"{worst_steps:g} / {100 * worst_within:.1f}")
    return cells


def run_ms(result) -> float:
    """ONNX Runtime's median run time on one thread, fully optimised, seed-0 inputs."""
    graph = result.graph
    feeds = {result.trace.tensor_values[t][0]: np.transpose(x, result.plan.perm(t, x.ndim))
             for t, x in zip(graph.main.inputs, make_inputs(graph))}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(result.model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def fused_convs(model) -> tuple[int, int]:
    """(QLinearConv nodes after ONNX Runtime's full optimisation, Conv nodes in our model)."""
    with tempfile.TemporaryDirectory() as d:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.optimized_model_filepath = str(Path(d) / "opt.onnx")
        ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        opt = onnx.load(opts.optimized_model_filepath)
    return (sum(n.op_type == "QLinearConv" for n in opt.graph.node),
            sum(n.op_type == "Conv" for n in model.graph.node))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="../shared/corpus")
    ap.add_argument("--time", action="store_true", help="add ONNX Runtime run times (ms) of QDQ and --exact-int")
    args = ap.parse_args()
    ort.set_default_logger_severity(3)
    head = [f"seed {s}" for s in SEEDS] + ["fused, seeds 0-4", "--exact-int, seeds 0-4",
                                           "LiteRT optimized, seeds 0-4", "LiteRT XNNPACK, seeds 0-4", "size vs .tflite",
                                           "Convs fused"] + (["ms QDQ fused / exact"] if args.time else [])
    print("| model | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    for rel in MODELS:
        graph = read_tflite(Path(args.corpus) / rel)
        qdq, exact = convert(graph), convert(graph, exact_int=True)
        row = [cell(validate(qdq, seed=s)) for s in SEEDS]                         # intermediates: unoptimised
        row.append(worst(validate(qdq, seed=s, intermediates=False) for s in SEEDS))   # outputs only: optimised
        row.append(worst(validate(exact, seed=s, intermediates=False) for s in SEEDS))
        row += litert_self(Path(args.corpus) / rel, graph)
        row.append(f"{len(qdq.model.SerializeToString()) / (Path(args.corpus) / rel).stat().st_size:.2f}")
        row.append("{} of {}".format(*fused_convs(qdq.model)))
        if args.time:
            row.append(f"{run_ms(qdq):.3g} / {run_ms(exact):.3g}")
        print(f"| {rel} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
