"""`info MODEL [--json]`: what a model holds, without converting it."""
from __future__ import annotations

import json


def add_parser(sub):
    p = sub.add_parser("info", help="summarise a TFLite or ONNX model")
    p.add_argument("model")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--layers", action="store_true",
                   help="also the main graph's layers: its ops grouped by name scope, as a big model opens")
    p.set_defaults(run=run)


def _shape(t) -> list:
    """The shape, an ONNX symbolic dimension by its name ("batch"; "?" when unnamed) rather than the 1 it reads as."""
    if not t.dim_params:
        return list(t.shape)
    return [p or d for d, p in zip(t.shape, t.dim_params)]


def _io(sg, indices):
    return [{"name": sg.tensors[i].name, "shape": _shape(sg.tensors[i]), "dtype": sg.tensors[i].dtype}
            for i in indices if i >= 0]


def summary(graph) -> dict:
    sg = graph.main
    out = {
        "format": graph.format,
        "subgraphs": len(graph.subgraphs),
        "operators": sum(len(s.ops) for s in graph.subgraphs),
        "tensors": sum(len(s.tensors) for s in graph.subgraphs),
        "inputs": _io(sg, sg.inputs),
        "outputs": _io(sg, sg.outputs),
        "op_histogram": graph.op_histogram(),
        "metadata": {k: (v if isinstance(v, str) else len(v)) for k, v in graph.metadata.items()},
    }
    if graph.notes:                                  # what reading corrected (stale shapes)
        out["notes"] = list(graph.notes)
    if graph.format == "onnx":
        out["denotations"] = {
            t.name: {"type": t.denotation, "dims": list(t.dim_denotations)}
            for s in graph.subgraphs for t in s.tensors if t.denotation or any(t.dim_denotations)
        }
    return out


def layers(graph) -> list[dict]:
    """Each group of the main graph's layer tree, outermost first: id, label, depth, its ops and the groups in it;
    `open` for those a big model shows open at first."""
    from inspector.core.session.layers import graph_layers
    tree = graph_layers(graph.main, graph.format)
    out = []

    def walk(layer):
        if layer.id:
            out.append({"id": layer.id, "label": layer.label, "depth": layer.depth, "ops": layer.ops,
                        "children": layer.children, "open": layer.depth <= tree.default_depth})
        for c in layer.children:
            walk(tree.layers[c])
    walk(tree.root)
    return out


def run(args) -> int:
    from inspector.core.io.loader import load_model
    graph = load_model(args.model)
    s = summary(graph)
    if args.layers:
        s["layers"] = layers(graph)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{args.model}: {s['format']}, {s['subgraphs']} subgraph(s), {s['operators']} operators, "
          f"{s['tensors']} tensors")
    for kind in ("inputs", "outputs"):
        print(f"{kind}:")
        for t in s[kind]:
            print(f"  {t['name']}  [{', '.join(map(str, t['shape']))}]  {t['dtype']}")
    print("operators:")
    for name, n in s["op_histogram"].items():
        print(f"  {n:5d}  {name}")
    if s["metadata"]:
        print("metadata:")
        for k, v in s["metadata"].items():
            print(f"  {k}: {v if isinstance(v, str) else f'{v} bytes'}")
    for note in s.get("notes", []):
        print(f"note: {note}")
    if args.layers:
        print("layers (op count; + opens at first):")
        for g in s["layers"]:
            print(f"  {'  ' * (g['depth'] - 1)}{'+' if g['open'] else '-'} {g['label']}  {len(g['ops'])}")
    return 0
