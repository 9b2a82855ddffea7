"""Google Model Explorer node data: per-node values (and colours) that Model Explorer overlays on a graph.

The format is one JSON object per graph, `{"results": {KEY: {"value": v, "bgColor"?: css}}, "gradient": [...]}`,
where KEY is a node id or one of the node's output tensor names. `graph_data` is generic (any name -> value or
name -> colour: errors here, layout categories or conflicts elsewhere); `write_validation` writes a validation's
per-tensor errors for both graphs and the mapping between them from the conversion trace.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

# Light = agrees, dark red = wrong (the window's error ramp, so both tools read alike).
ERROR_GRADIENT = [(0.0, "#ffffcc"), (0.5, "#fd8d3c"), (1.0, "#bd0026")]


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


def write_validation(folder: str | Path, graph, rows, tensor_values: dict[int, list[str]],
                     op_nodes: dict[int, list[str]]) -> list[Path]:
    """tflite.json and onnx.json (log10 of each compared tensor's error relative to its scale, keyed by tensor
    names), mapping.json (TFLite tensor -> ONNX values, TFLite op -> ONNX nodes). Returns the files written."""
    from inspector.core.io.atomic import OutputSet
    sg = graph.main
    tfl, onx = {}, {}
    for e in rows:
        value = log_error(e.max_rel)
        tfl[sg.tensors[e.tensor].name] = value
        onx[e.onnx_name] = value
    mapping = {"tensors": {sg.tensors[t].name: list(v) for t, v in tensor_values.items() if 0 <= t < len(sg.tensors)},
               "ops": {sg.ops[k].label: list(v) for k, v in op_nodes.items() if 0 <= k < len(sg.ops)},
               "value": "log10(max |onnx - tflite| / scale)"}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {folder / "tflite.json": graph_data(tfl, gradient=ERROR_GRADIENT),
             folder / "onnx.json": graph_data(onx, gradient=ERROR_GRADIENT), folder / "mapping.json": mapping}
    with OutputSet() as out:                    # all three or none
        for path, data in files.items():
            out.write(path, json.dumps(data, indent=1).encode())
    return list(files)
