"""`convert MODEL.tflite -o OUT.onnx`: layout-propagating conversion, metadata pass, checked atomic export."""
from __future__ import annotations

import json
from pathlib import Path

from inspector.cli._metadata_args import add_metadata_arguments
from inspector.cli._session_args import prepare
from inspector.core.ir.errors import UnsupportedOpsError


def add_parser(sub):
    p = sub.add_parser("convert", help="convert a TFLite model to ONNX",
                       description="Convert a TFLite model to ONNX with layout propagation. Exit 1 (and no "
                                   "output file) when an operator is unsupported or the result fails the checker.")
    p.add_argument("model")
    p.add_argument("more", nargs="*", metavar="MODEL",
                   help="more models, folders (searched for .tflite files) or globs: batch mode, -o is a folder")
    p.add_argument("-o", "--output", required=True,
                   help="ONNX file to write (atomically); in batch mode the folder to write OUTDIR/NAME.onnx into")
    p.add_argument("--pin", action="append", default=[], metavar="TENSOR=LAYOUT",
                   help="force a tensor's layout: NHWC (convert to channels-first), keep (leave as TFLite), "
                        "a letter order such as NCHW, or a permutation such as 0,3,1,2")
    p.add_argument("--keep-io-layout", action="store_true",
                   help="keep TFLite's NHWC graph inputs/outputs (a Transpose at the boundary is then expected)")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (18..21, default 18)")
    p.add_argument("--report", metavar="REPORT.json", help="write a JSON report of the conversion")
    p.add_argument("--session", metavar="FILE", help="replay pins and metadata edits saved by the inspector window")
    p.add_argument("--allow-custom", action="store_true",
                   help="keep unknown custom ops as ai.layout_inspector.tflite nodes (options as attributes) "
                        "instead of failing")
    p.add_argument("--float-io", action="store_true",
                   help="float32 inputs/outputs for a quantized model (Quantize/Dequantize inside)")
    p.add_argument("--keep-fp16", action="store_true", help="keep float16 weights as float16 initializers + Cast")
    p.add_argument("--exact-int", action="store_true",
                   help="TFLite's integer arithmetic bit for bit instead of QDQ (ONNX Runtime cannot fuse it); "
                        "dynamic-range ops quantize their inputs as LiteRT does bit for bit (about 2x slower)")
    p.add_argument("--dynamic-as-float", action="store_true",
                   help="dynamic-range (hybrid) ops as float ops on weights dequantized once: runs as fast as a "
                        "float model, but without LiteRT's on-the-fly int8 quantization of the activations "
                        "(outputs differ from LiteRT's by that quantization's error, up to a fifth of the output's "
                        "scale on deep models)")
    p.add_argument("--model-explorer", metavar="DIR",
                   help="also write both models, their layout categories and conflicts as Google Model Explorer "
                        "node data and the TFLite-ONNX mapping into DIR (all or none), and say the command that "
                        "opens them")
    p.add_argument("--force", action="store_true", help="allow -o to replace the input model")
    p.add_argument("--no-ort-check", action="store_true",
                   help="skip loading and running the result in ONNX Runtime before it is written")
    add_metadata_arguments(p)
    from inspector.cli._batch_args import add_arguments
    add_arguments(p, validate=True)
    p.set_defaults(run=run)


def run(args) -> int:
    from inspector.cli._batch_args import is_batch
    from inspector.core.io.atomic import OutputSet
    if is_batch(args):
        from inspector.cli import batch
        return batch.convert_many(args, prepare)
    out = OutputSet([args.model, args.session])      # every target checked before any work; written all or none
    out.add(args.output, may_replace=args.model if args.force else None, hint=" unless you pass --force")
    if args.report:
        out.add(args.report)
    me_files = _model_explorer_names(args, out)
    ahead = None if args.no_ort_check else _ahead()
    try:
        return _convert(args, out, ahead, me_files)
    finally:
        if ahead is not None:
            ahead.close()


def _convert(args, out, ahead, me_files) -> int:
    session = prepare(args, args.model)
    try:
        session.convert(check=False)        # export checks the final model (after the metadata pass) once
    except UnsupportedOpsError as e:
        if args.report:
            with out:
                out.write(args.report, _json({"unsupported": e.ops, "transposes": None, "conflicts": [],
                                              "pins": dict(session.pins), "ok": False}))
        raise
    if ahead is not None:                   # the child loads the file staged while export runs the checker here
        from inspector.core.proof.ort_check import input_sizes, note_check
        out.when_staged(args.output, lambda tmp: ahead.submit(session.result.model, input_sizes(session.result), tmp))
    with out:
        session.export(args.output, overwrite_source=args.force, out=out)   # staged: renamed at commit
        if ahead is not None:
            note_check(session, ahead.verdict())
        report = session.report()
        if args.report:
            out.write(args.report, _json(report))
        if me_files:
            from inspector.core.session import model_explorer
            files = model_explorer.conversion_bundle(session.result, _palette())
            for name, data in files.items():
                out.write(me_files[name], data)
    print(f"wrote {args.output}: {report['nodes']} nodes, {report['transposes']} Transpose(s), "
          f"{len(report['conflicts'])} conflict(s)")
    for c in report["conflicts"]:
        print(f"  transpose at {c['tensor']}: {_without_name(c['reason'], c['tensor'])}")
    for note in report["notes"]:
        print(f"  note: {note}")
    if me_files:
        from inspector.core.session import model_explorer
        print(f"wrote both models and Model Explorer node data to {args.model_explorer}; open them with:\n  "
              + model_explorer.command(args.model_explorer, me_files))
    return 0


def _ahead():
    """The run check's ONNX Runtime, imported in a child process while this one converts."""
    from inspector.core.proof.ort_ahead import Ahead
    return Ahead()


def _model_explorer_names(args, out) -> dict[str, Path]:
    """The bundle's file name -> path in --model-explorer DIR, each checked as a target up front ({} without)."""
    if not args.model_explorer:
        return {}
    from inspector.core.session import model_explorer
    folder = Path(args.model_explorer)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in model_explorer.names(("categories", "conflicts"))}
    for path in paths.values():
        out.add(path)
    return paths


def _palette() -> dict[str, str]:
    """Category -> the window's (light) fill colour, and the inserted Transpose's, from the shipped palette."""
    from inspector.core.proof.node_data import INSERTED
    from inspector.resources import PALETTE, path as resource
    cats = json.loads(resource(PALETTE).read_text(encoding="utf-8"))["categories"]
    out = {k: v["fill"] for k, v in cats.items() if k[:1].isupper()}
    out[INSERTED] = cats["conflict/inserted"]["fill"]
    return out


def _without_name(reason: str, tensor: str) -> str:
    """The reason without its leading tensor name, which the line already gives (names run long)."""
    return reason[len(tensor) + 1:] if reason.startswith(tensor + " ") else reason


def _json(data) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()
