"""`check MODEL.onnx [--json]`: denotation findings (image metadata consistency, dimension denotations)."""
from __future__ import annotations

import json

from inspector.core.metadata.denotation import check

from ._metadata_args import load_onnx


def add_parser(sub):
    p = sub.add_parser(
        "check", help="verify an ONNX model's denotations and image metadata",
        description="Propagate dimension denotations through the graph and report contradictions: an op that "
                    "expects [DATA_BATCH, DATA_CHANNEL, DATA_FEATURE...] fed something else, inputs whose axes "
                    "disagree, IMAGE tensors that do not match the Image.* metadata. Unknown denotations are not "
                    "findings. Exit status: 0 when there are no findings, 1 when there are (or on an error).")
    p.add_argument("model", help="an ONNX model")
    p.add_argument("--json", action="store_true", help='print {"findings": [{"node", "message"}]}')
    p.set_defaults(run=run)


def run(args) -> int:
    findings = check(load_onnx(args.model))
    if args.json:
        print(json.dumps({"findings": [f.to_dict() for f in findings]}, indent=2))
    elif findings:
        print(f"{args.model}: {len(findings)} finding(s)")
        for f in findings:
            print(f"  {f.message}")
    else:
        print(f"{args.model}: no findings")
    return 1 if findings else 0
