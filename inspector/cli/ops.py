"""`ops [--json] [--markdown] [--builtin]`: the supported-operator table, straight from the op registry."""
from __future__ import annotations

import json

from inspector.core.io.tflite_schema import BUILTIN_OPERATORS

BUILTINS = frozenset(BUILTIN_OPERATORS.values())


def add_parser(sub):
    p = sub.add_parser("ops", help="list the TFLite operators the converter supports")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help='a list of {"op", "category", "onnx"}')
    fmt.add_argument("--markdown", action="store_true", help="a Markdown table (docs/operators.md's)")
    p.add_argument("--builtin", action="store_true", help="only TFLite builtin operators (no custom ops)")
    p.set_defaults(run=run)


def support_table(builtin_only: bool = False) -> list[dict]:
    from inspector.core.emit.ops.table import load_all
    rows = []
    for name, rule in sorted(load_all().items()):
        builtin = name in BUILTINS
        if builtin_only and not builtin:
            continue
        notes = rule.notes
        if not builtin and "custom op" not in notes.lower():
            notes = "custom op" + (f"; {notes}" if notes else "")
        rows.append({"op": name, "category": rule.category.value, "onnx": list(rule.onnx), "notes": notes})
    return rows


def run(args) -> int:
    rows = support_table(args.builtin)
    if args.json:
        print(json.dumps([{k: r[k] for k in ("op", "category", "onnx")} for r in rows], indent=1))
        return 0
    if args.markdown:
        print("| TFLite op | Category | ONNX op(s) | Notes |")
        print("|---|---|---|---|")
        for r in rows:
            print(f"| {r['op']} | {r['category']} | {', '.join(r['onnx'])} | {r['notes'].replace('|', '/')} |")
        return 0
    w_op = max(len(r["op"]) for r in rows)
    w_cat = max(len(r["category"]) for r in rows)
    w_onnx = max(len(", ".join(r["onnx"])) for r in rows)
    for r in rows:
        print(f"{r['op']:<{w_op}}  {r['category']:<{w_cat}}  {', '.join(r['onnx']):<{w_onnx}}  {r['notes']}".rstrip())
    n_builtin = sum(1 for r in rows if r["op"] in BUILTINS)
    print(f"\n{len(rows)} operators ({n_builtin} TFLite builtins)")
    return 0
