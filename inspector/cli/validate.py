"""`validate MODEL.tflite MODEL.onnx`: run both on the same seeded inputs and compare every output."""
from __future__ import annotations

import json

from inspector.core.errors import InspectorError


def add_parser(sub):
    p = sub.add_parser("validate", help="compare a TFLite model with an ONNX model numerically",
                       description="Exit 0 when every output is within tolerance, 1 otherwise.")
    p.add_argument("tflite")
    p.add_argument("onnx")
    p.add_argument("--json", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=None, help="batch size for models with a dynamic batch")
    p.add_argument("--rtol", type=float, default=None, help="tolerance relative to each output's scale")
    p.set_defaults(run=run)


def run(args) -> int:
    from inspector.core.loader import load_model
    from inspector.core.validate import validate_files
    graph = load_model(args.tflite)
    if graph.format != "tflite":
        raise InspectorError(f"{args.tflite}: the first model must be TFLite")
    v = validate_files(graph, args.onnx, seed=args.seed, batch=args.batch, rtol=args.rtol)
    if args.json:
        out = v.to_json()
        out.pop("intermediates", None)
        print(json.dumps(out, indent=2))
    else:
        from inspector.core.validate import STEPS_MAX, STEPS_OK, STEPS_SHARE
        stepped = False
        for e in v.outputs:
            line = f"{'ok  ' if e.ok else 'FAIL'} {e.name}: max_abs {e.max_abs:.3g}, max_rel {e.max_rel:.3g}"
            if getattr(e, "steps", None) is not None:
                stepped = True
                line += f", max {e.steps:.3g} quantization steps, {100 * e.within:.2f}% within {STEPS_OK:g}"
            print(line)
        rule = (f"quantized outputs: >= {100 * STEPS_SHARE:g}% within {STEPS_OK:g} steps, none beyond {STEPS_MAX:g}"
                if stepped else f"tolerance {v.rtol:g} of each output's scale")
        print("pass" if v.ok else "fail", f"({rule})")
    return 0 if v.ok else 1
