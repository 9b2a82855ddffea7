"""Google Model Explorer node data: per-node values (and colours) that Model Explorer overlays on a graph.

The format is one JSON object per graph and overlay, `{"results": {KEY: {"value": v, "bgColor"?: css}},
"gradient"?: [...]}`, where KEY is a node's id or one of its output tensor names and v a number or a label. A
TFLite node is keyed by its output tensor's name (Model Explorer's TFLite adapter lists those), an ONNX node by its
name (the ONNX adapter's node id: it lists no tensor names a key could match). `graph_data` is generic;
`error_data`, `category_data` and `conflict_data` make the overlays of a validation and of a conversion,
`mapping_data` the TFLite <-> ONNX mapping from the trace, and `write` puts a set of them in a folder, all or none
(session.model_explorer makes the whole folder Model Explorer opens).
"""
from __future__ import annotations

import math
from typing import Mapping

# Light = agrees, dark red = wrong (the window's error ramp, so both tools read alike).
ERROR_GRADIENT = [(0.0, "#ffffcc"), (0.5, "#fd8d3c"), (1.0, "#bd0026")]
INSERTED = "Inserted Transpose"     # the category label of a Transpose a conflict inserted


def graph_data(values: Mapping[str, float | str], colours: dict[str, str] | None = None,
               gradient: list[tuple[float, str]] | None = None) -> dict[str, object]:
    """Node data for one graph: each key's value, an explicit colour where given, else the gradient's."""
    colours = colours or {}
    results: dict[str, dict[str, float | str]] = {}
    for key, value in values.items():
        row: dict[str, float | str] = {"value": value}
        if key in colours:
            row["bgColor"] = colours[key]
        results[key] = row
    out: dict[str, object] = {"results": results}
    if gradient:
        out["gradient"] = [{"stop": stop, "bgColor": colour} for stop, colour in gradient]
    return out


def log_error(max_rel: float) -> float:
    """log10 of a relative error, floored at 1e-12 (Model Explorer's values must be finite JSON numbers)."""
    if not math.isfinite(max_rel):
        return 1.0
    return round(math.log10(max(max_rel, 1e-12)), 3)


def node_id(node, index: int) -> str:
    """An ONNX node's id in Model Explorer (the ONNX adapter names an unnamed node `<node_i>`)."""
    return node.name or f"<node_{index}>"


def error_data(graph, rows, model) -> tuple[dict, dict]:
    """(TFLite, ONNX) node data of a validation's compared tensors: log10 of each one's error relative to its
    scale, keyed by the TFLite tensor name and by the ONNX node that wrote the value it was compared with (the
    worst of a node's values)."""
    sg = graph.main
    writer = {v: node_id(n, i) for i, n in enumerate(model.graph.node) for v in n.output}
    tfl: dict[str, float] = {}
    onx: dict[str, float] = {}
    for e in rows:
        value = log_error(e.max_rel)
        tfl[sg.tensors[e.tensor].name] = value
        key = writer.get(e.onnx_name)
        if key is not None:
            onx[key] = max(value, onx.get(key, value))
    return graph_data(tfl, gradient=ERROR_GRADIENT), graph_data(onx, gradient=ERROR_GRADIENT)


def category_data(result, colours: dict[str, str]) -> tuple[dict, dict]:
    """(TFLite, ONNX) node data of the layout categories: each TFLite op's category on its first output, each ONNX
    node's (the category of the op it was emitted for; INSERTED for a conflict's Transpose).
    `colours`: category value (and INSERTED) -> CSS colour."""
    sg, trace = result.graph.main, result.trace
    tfl: dict[str, str] = {}
    onx: dict[str, str] = {}
    for k, cat in result.categories.items():
        if 0 <= k < len(sg.ops) and sg.ops[k].outputs:
            tfl[sg.tensors[sg.ops[k].outputs[0]].name] = _label(cat)
    for i, n in enumerate(result.model.graph.node):
        name = n.name or (n.output[0] if n.output else "")
        if name in trace.inserted:
            onx[node_id(n, i)] = INSERTED
        elif trace.node_op.get(name) in result.categories:
            onx[node_id(n, i)] = _label(result.categories[trace.node_op[name]])
    return (graph_data(tfl, {k: colours[v] for k, v in tfl.items() if v in colours}),
            graph_data(onx, {k: colours[v] for k, v in onx.items() if v in colours}))


def conflict_data(result, colour: str) -> tuple[dict, dict]:
    """(TFLite, ONNX) node data of the conflicts: each one's reason on the TFLite op that needed the Transpose
    (the tensor itself for a graph output) and on the Transpose node inserted for it."""
    sg, model = result.graph.main, result.model
    tfl: dict[str, str] = {}
    onx: dict[str, str] = {}
    ids = {n.name or (n.output[0] if n.output else ""): node_id(n, i) for i, n in enumerate(model.graph.node)}
    for c in result.plan.conflicts:
        if c.subgraph != 0:
            continue
        op = sg.ops[c.op] if c.op is not None and 0 <= c.op < len(sg.ops) else None
        key = sg.tensors[op.outputs[0]].name if op is not None and op.outputs else \
            sg.tensors[c.tensor].name if 0 <= c.tensor < len(sg.tensors) else None
        if key is not None:
            tfl[key] = f"{tfl[key]}; {c.reason}" if key in tfl else c.reason
        if c.node in ids:
            onx[ids[c.node]] = c.reason
    return (graph_data(tfl, dict.fromkeys(tfl, colour)), graph_data(onx, dict.fromkeys(onx, colour)))


def mapping_data(graph, trace) -> dict:
    """TFLite tensor -> ONNX values and TFLite op -> ONNX nodes, by name, from a conversion trace (or pairing)."""
    sg = graph.main
    return {"tensors": {sg.tensors[t].name: list(v) for t, v in trace.tensor_values.items()
                        if 0 <= t < len(sg.tensors)},
            "ops": {sg.ops[k].label: list(v) for k, v in trace.op_nodes.items() if 0 <= k < len(sg.ops)}}


def overlays(result, colours: dict[str, str], validation=None) -> dict[str, tuple[dict, dict]]:
    """What the window exports: name -> (TFLite, ONNX) node data of the categories and conflicts, and of the
    errors when a validation exists."""
    out = {"categories": category_data(result, colours),
           "conflicts": conflict_data(result, colours.get(INSERTED, "red"))}
    if validation is not None:
        out["errors"] = error_data(result.graph, list(validation.outputs) + list(validation.intermediates),
                                   result.model)
    return out


def _label(cat) -> str:
    return getattr(cat, "value", str(cat))
