"""`validate MODEL.tflite MODEL.onnx`: run both on the same seeded inputs and compare every output, each against
the noise floor the model shows by itself in the same run."""
from __future__ import annotations

import argparse
import json

from inspector.core.ir.errors import InspectorError

MAX_BATCH = 4096


def seed_arg(text: str) -> int:
    value = int(text) if text.lstrip("+").isdigit() else -1
    if value < 0 or value >= 2**63:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def batch_arg(text: str) -> int:
    value = int(text) if text.lstrip("+").isdigit() else 0
    if not 1 <= value <= MAX_BATCH:
        raise argparse.ArgumentTypeError(f"must be an integer in 1..{MAX_BATCH}, got {text!r}")
    return value


def add_common(p) -> None:
    """The options validate and compare share, range-checked by argparse."""
    p.add_argument("--json", action="store_true")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the random inputs (>= 0)")
    p.add_argument("--batch", type=batch_arg, default=None,
                   help=f"batch size for models with a dynamic batch (1..{MAX_BATCH})")
    p.add_argument("--rtol", type=float, default=None, help="tolerance relative to each output's scale")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                   help="the sizes an input is fed at, for its dynamic dimensions (repeatable; NAME: the TFLite "
                        "or ONNX input's name)")


def add_parser(sub):
    p = sub.add_parser("validate", help="compare a TFLite model with an ONNX model numerically",
                       description="Verdicts: ok, suspicious (within tolerance, but far above the model's own "
                                   "noise floor), fail. Exit 0 when every output is ok, 1 otherwise. When LiteRT "
                                   "cannot run an op (a custom op without a kernel), every tensor before it is "
                                   "compared and the outputs are not: exit 1.")
    p.add_argument("tflite", help="a TFLite model; a folder or glob of them validates each (batch mode)")
    p.add_argument("onnx", help="its ONNX model; in batch mode the folder `convert … -o OUTDIR/` wrote")
    add_common(p)
    p.add_argument("--no-floor", action="store_true",
                   help="measure the noise floor only where it could change a verdict (faster)")
    p.add_argument("--steps", type=batch_arg, default=1, metavar="N",
                   help="streaming models: N calls, each step's state_out:* fed back as state:* (1..4096)")
    p.add_argument("--model-explorer", metavar="DIR",
                   help="also write both models, Google Model Explorer node data (each tensor's error, both "
                        "graphs) and the tensor/op mapping into DIR, and say the command that opens them")
    from inspector.cli._batch_args import add_arguments
    add_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from inspector.cli._batch_args import is_validate_batch
    if is_validate_batch(args):
        from inspector.cli import batch
        return batch.validate_many(args)
    from inspector.core.io.loader import load_model
    from inspector.core.proof.validate import validate_files
    graph = load_model(args.tflite)
    if graph.format != "tflite":
        raise InspectorError(f"{args.tflite}: the first model must be TFLite")
    if args.steps > 1:
        return run_steps(args, graph)
    v = validate_files(graph, args.onnx, seed=args.seed, batch=args.batch, rtol=args.rtol,
                       floor=None if args.no_floor else True, mapper=paired_values,
                       input_shapes=parsed_shapes(args))
    if args.model_explorer:
        from pathlib import Path

        from inspector.core.pairing.pair import open_pair
        from inspector.core.session import model_explorer
        pair = open_pair(args.tflite, args.onnx)    # maps every tensor, so each one's error has a place
        pv = pair.validate(seed=args.seed, batch=args.batch, rtol=args.rtol, input_shapes=parsed_shapes(args))
        Path(args.model_explorer).mkdir(parents=True, exist_ok=True)
        files = model_explorer.pair_bundle(graph, pair, pv.tensors)
        model_explorer.write(args.model_explorer, files)
        v.notes.append(f"Model Explorer: both models and each of {len(pv.tensors)} tensors' error in "
                       f"{args.model_explorer}; open them with: {model_explorer.command(args.model_explorer, files)}")
    if args.json:
        out = v.to_json()
        if v.cut is None:
            out.pop("intermediates", None)      # compared only when the reference was cut
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(report(v)))
    return 0 if v.ok else 1


def parsed_shapes(args) -> dict | None:
    from inspector.core.proof.input_shapes import parse
    return parse(args.input_shape) or None


def paired_values(graph, model) -> dict[int, list[str]]:
    """TFLite tensor -> ONNX values as `compare` pairs them (names, then copies and position: a model made
    elsewhere); imported only when a reference is cut and tensors before the cut need their ONNX values."""
    from inspector.core.pairing.mapping import match
    return match(graph, model).tensor_values


def run_steps(args, graph) -> int:
    """One line per step (its headline), or --json {"steps": [...], "ok"}; exit 0 when every step is ok."""
    from inspector.core.proof.steps import validate_file_steps
    from inspector.core.proof.validate import headline
    steps = validate_file_steps(graph, args.onnx, args.steps, seed=args.seed, rtol=args.rtol)
    ok = all(v.ok for v in steps)
    if args.json:
        print(json.dumps({"steps": [v.to_json() for v in steps], "ok": ok}, indent=2))
    else:
        for k, v in enumerate(steps):
            print(f"step {k + 1}: {headline(v)}")
    return 0 if ok else 1


# A reference cut early lists the tensors it compared one per line up to this many, else only those not ok.
MAX_CUT_LINES = 20


def report(v) -> list[str]:
    """One line per output (error, floor, their ratio) and, when the reference was cut before an op LiteRT cannot
    run, per tensor compared before it; the I/O layouts that had to be guessed; the headline."""
    from inspector.core.proof.validate import headline
    lines = [_line(e, v.cut) for e in v.outputs]
    if v.cut is not None:
        mids = v.intermediates
        bad = [e for e in mids if not e.ok]
        shown = mids if len(mids) <= MAX_CUT_LINES else bad[:MAX_CUT_LINES]
        lines += [_line(e) for e in shown]
        if len(shown) < len(mids):
            lines.append(f"... and {len(mids) - len(shown)} more tensors before op {v.cut.op}"
                         + (", all ok" if len(bad) <= MAX_CUT_LINES else ""))
    for row in v.io:
        if row.get("layout") == "ambiguous":
            lines.append(f"note: {row['kind']} '{row['onnx']}' fits several layouts ({', '.join(row['tried'])}); "
                         f"compared as {row['perm']}")
    lines += [f"note: {n}" for n in v.notes]
    lines.append(headline(v))
    return lines


def _line(e, cut=None) -> str:
    """A tensor's verdict, error, floor and limit (or steps) in one line."""
    line = f"{e.verdict or ('ok' if e.ok else 'fail'):<10} {e.name}: "
    if not e.compared:
        line += "not compared" + (f" (computed after op {cut.op}, {cut.opcode})" if cut is not None else "")
    elif e.steps is not None:
        line += f"{e.steps:g} quantization steps max, {100 * e.within:.2f}% within 2"
        if e.floor is not None:
            line += f"; LiteRT's default kernels {e.floor:g} steps, {100 * e.floor_within:.2f}% within 2"
    else:
        line += f"error {e.max_abs:.3g} ({e.max_rel:.3g} of scale {e.scale:.3g})"
        if e.floor is not None:
            ratio = f", ratio {e.ratio:.3g}" if e.ratio is not None else ""
            line += f", floor {e.floor:.3g}{ratio}"
        if e.limit is not None:
            line += f", limit {e.limit:.3g}"
    return line
