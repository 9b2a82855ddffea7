"""`edit IN.onnx -o OUT.onnx [metadata flags] [--fix [--target T]]`: set denotations and metadata on an existing
ONNX model, or apply the metadata check's safe fixes."""
from __future__ import annotations

import sys

from inspector.core.io.atomic import OutputSet
from inspector.core.ir.errors import InspectorError

from ._metadata_args import add_metadata_arguments, add_target_argument, check_and_save, edits_from_args, load_onnx


def add_parser(sub):
    p = sub.add_parser(
        "edit", help="set type/dimension denotations and metadata on an ONNX model",
        description="Edit an ONNX model's denotations and metadata_props without touching its graph. Existing "
                    "metadata entries are kept. The result passes onnx.checker and the metadata check for "
                    "--target (errors: exit 1, nothing written; warnings printed) before it is written "
                    "atomically.")
    p.add_argument("model", help="the ONNX model to read")
    p.add_argument("-o", "--output", required=True, help="where to write the edited model")
    p.add_argument("--force", action="store_true", help="allow -o to be the input file (overwrite it)")
    p.add_argument("--fix", action="store_true",
                   help="apply every safe fix of the metadata check (canonical spelling, Rgba8 -> Rgb8 on 3 "
                        "channels, dimension denotations an unambiguous shape implies, unused Image.* keys "
                        "removed) and list the findings left with the choice each needs")
    add_target_argument(p)
    add_metadata_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from inspector.core.metadata.lint import fix, gate
    edits = edits_from_args(args)
    if edits.is_empty() and not args.fix:
        raise InspectorError("nothing to edit: give --fix, --denote, --dims, --pixel-format, --gamma, "
                             "--pixel-range, --metadata, --doc-string or --model-version")
    out = OutputSet([args.model])                    # checked before any work
    out.add(args.output, may_replace=args.model if args.force else None, hint=" unless you pass --force")
    model = load_onnx(args.model)
    for note in edits.apply(model):
        print(note if note.startswith("warning:") else f"note: {note}", file=sys.stderr)
    if args.fix:
        done, left = fix(model, args.target)
        for f in done:
            print(f"fixed: {f.message} -> {f.fix_text} [{f.code}]")
        for f in left:
            if f.severity == "error" or f.manual:
                print(f"left ({f.severity}): {f.message} [{f.code}]" + (f"; to decide: {f.manual}" if f.manual
                                                                        else ""), file=sys.stderr)
    warnings = gate(model, args.target, dims=True)
    check_and_save(model, args.output, out)
    for f in warnings:
        print(f"warning: {f.message} [{f.code}]", file=sys.stderr)
    print(f"wrote {args.output}")
    return 0
