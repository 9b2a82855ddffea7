"""`check MODEL.onnx… [--target T] [--json]`: metadata and denotation findings for a consumer."""
from __future__ import annotations

import json

from ._metadata_args import add_target_argument


def add_parser(sub):
    p = sub.add_parser(
        "check", help="verify an ONNX model's denotations and image metadata for a consumer",
        description="Report what a consumer would ignore or mis-read (error) and what is legal but suspicious "
                    "(warning): IMAGE tensors against the Image.* metadata, spellings, dimension denotations "
                    "propagated through the graph, and the rules of the consumer --target names. "
                    "Exit status: 0 when there is no error finding, 1 when there is one (or on an error).")
    p.add_argument("model", nargs="+", help="an ONNX model; several, folders or globs check each (batch mode)")
    add_target_argument(p)
    p.add_argument("--json", action="store_true",
                   help='print {"target", "findings": [{"code", "severity", "source", "node", "message", ...}]}')
    from inspector.cli._batch_args import add_arguments
    add_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from inspector.cli._batch_args import is_check_batch
    if is_check_batch(args):
        from inspector.cli import batch
        return batch.check_many(args)
    from inspector.core.metadata.lint import lint

    from ._metadata_args import load_onnx
    args.model = args.model[0]
    findings = lint(load_onnx(args.model), args.target)
    errors = sum(f.severity == "error" for f in findings)
    if args.json:
        print(json.dumps({"target": args.target, "findings": [f.to_dict() for f in findings]}, indent=2))
    elif findings:
        print(f"{args.model}: {errors} error(s), {len(findings) - errors} warning(s) for {args.target}")
        for f in findings:
            print(f"  {f.severity}: {f.message} [{f.code}]")
            if f.fix_text or f.manual:
                print(f"    {'fix (edit --fix)' if f.fix_text else 'to decide'}: {f.fix_text or f.manual}")
    else:
        print(f"{args.model}: no findings for {args.target}")
    return 1 if errors else 0
