"""Google Model Explorer node data: per-node values (and colours) that Model Explorer overlays on a graph.

The format is one JSON object per graph and overlay, `{"results": {KEY: {"value": v, "bgColor"?: css}},
"gradient"?: [...]}`, where KEY is one of a node's output tensor names (what Model Explorer matches for both TFLite
and ONNX graphs) and v a number or a label. `graph_data` is generic; `error_data`, `category_data` and
`conflict_data` make the overlays of a validation and of a conversion, `mapping_data` the TFLite <-> ONNX mapping
from the trace, and `write` puts a set of them in a folder, all or none.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

# Light = agrees, dark red = wrong (the window's error ramp, so both tools read alike).
ERROR_GRADIENT = [(0.0, "#ffffcc"), (0.5, "#fd8d3c"), (1.0, "#bd0026")]
INSERTED = "Inserted Transpose"     # the category label of a Transpose a conflict inserted


def graph_data(values: dict[str, float | str], colours: dict[str, str] | None = None,
               gradient: list[tuple[float, str]] | None = None) -> dict:
    """Node data for one graph: each key's value, an explicit colour where given, else the gradient's."""
    colours = colours or {}
    results = {}
    for key, value in values.items():
        row = {"value": value}
        if key in colours:
            row["bgColor"] = colours[key]
        results[key] = row
    out = {"results": results}
    if gradient:
        out["gradient"] = [{"stop": stop, "bgColor": colour} for stop, colour in gradient]
    return out


def log_error(max_rel: float) -> float:
    """log10 of a relative error, floored at 1e-12 (Model Explorer's values must be finite JSON numbers)."""
    if not math.isfinite(max_rel):
        return 1.0
    return round(math.log10(max(max_rel, 1e-12)), 3)


def error_data(graph, rows) -> tuple[dict, dict]:
    """(TFLite, ONNX) node data of a validation's compared tensors: log10 of each one's error relative to its
    scale, keyed by the TFLite tensor name and by the ONNX value it was compared with."""
    sg = graph.main
    tfl, onx = {}, {}
    for e in rows:
        value = log_error(e.max_rel)
        tfl[sg.tensors[e.tensor].name] = value
        onx[e.onnx_name] = value
    return graph_data(tfl, gradient=ERROR_GRADIENT), graph_data(onx, gradient=ERROR_GRADIENT)


def category_data(result, colours: dict[str, str]) -> tuple[dict, dict]:
    """(TFLite, ONNX) node data of the layout categories: each TFLite op's category on its first output, each ONNX
    node's on its first output (the category of the op it was emitted for; INSERTED for a conflict's Transpose).
    `colours`: category value (and INSERTED) -> CSS colour."""
    sg, trace = result.graph.main, result.trace
    tfl, onx = {}, {}
    for k, cat in result.categories.items():
        if 0 <= k < len(sg.ops) and sg.ops[k].outputs:
            tfl[sg.tensors[sg.ops[k].outputs[0]].name] = _label(cat)
    for n in result.model.graph.node:
        if not n.output:
            continue
        name = n.name or n.output[0]
        if name in trace.inserted:
            onx[n.output[0]] = INSERTED
        elif trace.node_op.get(name) in result.categories:
            onx[n.output[0]] = _label(result.categories[trace.node_op[name]])
    return (graph_data(tfl, {k: colours[v] for k, v in tfl.items() if v in colours}),
            graph_data(onx, {k: colours[v] for k, v in onx.items() if v in colours}))


def conflict_data(result, colour: str) -> tuple[dict, dict]:
    """(TFLite, ONNX) node data of the conflicts: each one's reason on the TFLite op that needed the Transpose
    (the tensor itself for a graph output) and on the Transpose node inserted for it."""
    sg, model = result.graph.main, result.model
    tfl, onx = {}, {}
    outputs = {n.name or (n.output[0] if n.output else ""): n.output[0] for n in model.graph.node if n.output}
    for c in result.plan.conflicts:
        if c.subgraph != 0:
            continue
        op = sg.ops[c.op] if c.op is not None and 0 <= c.op < len(sg.ops) else None
        key = sg.tensors[op.outputs[0]].name if op is not None and op.outputs else \
            sg.tensors[c.tensor].name if 0 <= c.tensor < len(sg.tensors) else None
        if key is not None:
            tfl[key] = f"{tfl[key]}; {c.reason}" if key in tfl else c.reason
        if c.node in outputs:
            onx[outputs[c.node]] = c.reason
    return (graph_data(tfl, dict.fromkeys(tfl, colour)), graph_data(onx, dict.fromkeys(onx, colour)))


def mapping_data(graph, trace) -> dict:
    """TFLite tensor -> ONNX values and TFLite op -> ONNX nodes, by name, from a conversion trace (or pairing)."""
    sg = graph.main
    return {"tensors": {sg.tensors[t].name: list(v) for t, v in trace.tensor_values.items()
                        if 0 <= t < len(sg.tensors)},
            "ops": {sg.ops[k].label: list(v) for k, v in trace.op_nodes.items() if 0 <= k < len(sg.ops)}}


def write(folder: str | Path, files: dict[str, dict]) -> list[Path]:
    """Each name -> JSON object as FOLDER/name, all or none (io.atomic.OutputSet). Returns the paths written."""
    from inspector.core.io.atomic import OutputSet
    folder = Path(folder)
    paths = [folder / name for name in files]
    with OutputSet() as out:
        for path in paths:
            out.add(path)                       # every target checked before any is written
        for path, data in zip(paths, files.values()):
            out.write(path, (json.dumps(data, indent=1) + "\n").encode())
    return paths


def validation_files(graph, rows, trace) -> dict[str, dict]:
    """tflite.errors.json, onnx.errors.json (error_data) and mapping.json."""
    tfl, onx = error_data(graph, rows)
    mapping = dict(mapping_data(graph, trace), value="log10(max |onnx - tflite| / scale)")
    return {"tflite.errors.json": tfl, "onnx.errors.json": onx, "mapping.json": mapping}


def conversion_files(result, colours: dict[str, str], validation=None) -> dict[str, dict]:
    """What the window exports: categories and conflicts for both graphs, the errors when a validation exists,
    and the mapping from the conversion's trace."""
    files = {}
    files["tflite.categories.json"], files["onnx.categories.json"] = category_data(result, colours)
    files["tflite.conflicts.json"], files["onnx.conflicts.json"] = conflict_data(result, colours.get(INSERTED, "red"))
    if validation is not None:
        files.update(validation_files(result.graph, list(validation.outputs) + list(validation.intermediates),
                                      result.trace))
    else:
        files["mapping.json"] = mapping_data(result.graph, result.trace)
    return files


def _label(cat) -> str:
    return getattr(cat, "value", str(cat))
