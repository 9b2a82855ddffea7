"""Print the README's table of quantized-model errors: max quantization steps / % of output elements within 2
steps, per seed, for the default QDQ conversion run op by op, ONNX Runtime fully optimised ("fused"), and --exact-int;
then LiteRT's own optimized builtin kernels and XNNPACK delegate against its reference kernels (the same measure);
then issue 17's criterion: how many steps further from the reference kernels the default QDQ conversion is than
LiteRT's own default kernels (builtin + XNNPACK, a plain Interpreter) on the same inputs, worst output and seed, op by
op / fused (met when <= +1); plus the ONNX file's size relative to the .tflite, how many Convs ONNX Runtime fuses into
QLinearConv, and (--time) ONNX Runtime's run time of both conversions (one thread, median of 20 runs). Models: every
corpus model with a quantized integer output.

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
from inspector.core.proof.validate import make_inputs, own_kernel_steps, validate

from float_drift import litert                      # tools/ is the script's directory

SEEDS = (0, 1, 2, 3, 4)
MARGIN = 1                   # issue 17: no further from LiteRT's reference than its default kernels, + 1 step


def quantized_models(corpus: Path) -> list[str]:
    """Corpus models with a quantized integer output (the ones measured in steps)."""
    out = []
    for path in sorted(corpus.glob("*/*.tflite")):
        sg = read_tflite(path).main
        if any(sg.tensors[t].quantization is not None and sg.tensors[t].dtype in ("int8", "uint8", "int16")
               for t in sg.outputs):
            out.append(str(path.relative_to(corpus)))
    return out


def cell(v) -> str:
    e = max(v.outputs, key=lambda e: e.steps or 0)
    return f"{e.steps:g} / {100 * e.within:.1f}"


def worst(runs) -> str:
    """The worst run's cell, and how many runs pass when not all do."""
    runs = list(runs)
    cells = cell(max(runs, key=lambda v: max(e.steps or 0 for e in v.outputs)))
    passed = sum(v.ok for v in runs)
    return cells if passed == len(runs) else f"{cells} ({passed} of {len(runs)} pass)"


def excess(runs, own) -> int:
    """Worst over seeds and outputs of (our steps - LiteRT default kernels' steps) on the same inputs."""
    return max(int(e.steps - o) for v, per in zip(runs, own) for e, o in zip(v.outputs, per)
               if e.steps is not None and o is not None)


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
                                           "LiteRT optimized, seeds 0-4", "LiteRT XNNPACK, seeds 0-4",
                                           "QDQ - LiteRT default, op by op / fused", "size vs .tflite",
                                           "Convs fused"] + (["ms QDQ fused / exact"] if args.time else [])
    print("| model | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    broken = []
    for rel in quantized_models(Path(args.corpus)):
        graph = read_tflite(Path(args.corpus) / rel)
        qdq, exact = convert(graph), convert(graph, exact_int=True)
        op_by_op = [validate(qdq, seed=s) for s in SEEDS]                              # intermediates: unoptimised
        fused = [validate(qdq, seed=s, intermediates=False) for s in SEEDS]            # outputs only: optimised
        own = [own_kernel_steps(graph, s) for s in SEEDS]
        row = [cell(v) for v in op_by_op] + [worst(fused)]
        row.append(worst(validate(exact, seed=s, intermediates=False) for s in SEEDS))
        row += litert_self(Path(args.corpus) / rel, graph)
        gaps = excess(op_by_op, own), excess(fused, own)
        row.append(" / ".join(f"{g:+d}" for g in gaps))
        if max(gaps) > MARGIN:
            broken.append(f"{rel} ({' / '.join(f'{g:+d}' for g in gaps)})")
        row.append(f"{len(qdq.model.SerializeToString()) / (Path(args.corpus) / rel).stat().st_size:.2f}")
        row.append("{} of {}".format(*fused_convs(qdq.model)))
        if args.time:
            row.append(f"{run_ms(qdq):.3g} / {run_ms(exact):.3g}")
        print(f"| {rel} | " + " | ".join(row) + " |", flush=True)
    print(f"\nBeyond LiteRT's default kernels + {MARGIN} step: " + ("; ".join(broken) or "none"))


if __name__ == "__main__":
    main()
