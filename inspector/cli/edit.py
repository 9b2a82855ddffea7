"""`edit IN.onnx -o OUT.onnx [metadata flags]`: set denotations and metadata on an existing ONNX model."""
from __future__ import annotations

import sys

from inspector.core.io.atomic import OutputSet
from inspector.core.metadata.denotation import check
from inspector.core.ir.errors import InspectorError

from ._metadata_args import add_metadata_arguments, check_and_save, edits_from_args, load_onnx


def add_parser(sub):
    p = sub.add_parser(
        "edit", help="set type/dimension denotations and metadata on an ONNX model",
        description="Edit an ONNX model's denotations and metadata_props without touching its graph. Existing "
                    "metadata entries are kept. The result passes onnx.checker before it is written atomically; "
                    "denotation findings are printed as warnings (see `check`).")
    p.add_argument("model", help="the ONNX model to read")
    p.add_argument("-o", "--output", required=True, help="where to write the edited model")
    p.add_argument("--force", action="store_true", help="allow -o to be the input file (overwrite it)")
    add_metadata_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    edits = edits_from_args(args)
    if edits.is_empty():
        raise InspectorError("nothing to edit: give --denote, --dims, --pixel-format, --gamma, --pixel-range, "
                             "--metadata, --doc-string or --model-version")
    out = OutputSet([args.model])                    # checked before any work
    out.add(args.output, may_replace=args.model if args.force else None, hint=" unless you pass --force")
    model = load_onnx(args.model)
    for note in edits.apply(model):
        print(note if note.startswith("warning:") else f"note: {note}", file=sys.stderr)
    check_and_save(model, args.output, out)
    for f in check(model):
        print(f"warning: {f.message}", file=sys.stderr)
    print(f"wrote {args.output}")
    return 0
