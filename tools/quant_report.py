"""Print the README's table of quantized-model errors: max quantization steps / % of output elements within 2
steps, per seed, for the default QDQ conversion run op by op, ONNX Runtime fully optimised ("fused"), and --exact-int;
plus the ONNX file's size relative to the .tflite and how many Convs ONNX Runtime fuses into QLinearConv.

    .venv/bin/python tools/quant_report.py --corpus ../shared/corpus
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import onnx
import onnxruntime as ort

from inspector.core.convert import convert
from inspector.core.tflite_reader import read_tflite
from inspector.core.validate import validate

MODELS = ["keras/efficientnetb0_int8.tflite", "keras/mobilenetv2_int8.tflite", "keras/mobilenetv3small_int8.tflite",
          "ops/mobilenet_v1_0.25_128_quant.tflite", "ops/conv.uint8.tflite", "realworld/alexa.tflite"]


def cell(v) -> str:
    e = max(v.outputs, key=lambda e: e.steps or 0)
    return f"{e.steps:g} / {100 * e.within:.1f}"


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
    args = ap.parse_args()
    print("| model | seed 0 | seed 1 | seed 2 | fused, seed 0 | --exact-int, seeds 0-2 | size vs .tflite | "
          "Convs fused |")
    print("|---|---|---|---|---|---|---|---|")
    for rel in MODELS:
        graph = read_tflite(Path(args.corpus) / rel)
        qdq, exact = convert(graph), convert(graph, exact_int=True)
        row = [cell(validate(qdq, seed=s)) for s in (0, 1, 2)]          # intermediates read: ORT unoptimised
        row.append(cell(validate(qdq, seed=0, intermediates=False)))   # outputs only: ORT fully optimised
        worst = max((validate(exact, seed=s, intermediates=False) for s in (0, 1, 2)),
                    key=lambda v: max(e.steps or 0 for e in v.outputs))
        row.append(cell(worst))
        row.append(f"{len(qdq.model.SerializeToString()) / (Path(args.corpus) / rel).stat().st_size:.2f}")
        row.append("{} of {}".format(*fused_convs(qdq.model)))
        print(f"| {rel} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
