"""A folder Google Model Explorer opens in one command: both models, node data for both graphs, the mapping.

    cd FOLDER && model-explorer model.tflite,model.onnx --extensions=model_explorer_onnx \\
        --node_data_paths=categories.json,conflicts.json[,errors.json]

Facts this rests on (Model Explorer and its ONNX adapter, `model-explorer-onnx`): node data given on the command
line is loaded for every model, and a file whose top-level keys are graph ids applies each part to the graph of
that id only; a TFLite graph's id is its subgraph's name, else its signature key, else `main`; an ONNX graph's id
is the graph's name; a TFLite node's id is its op index and an ONNX node's its name, which are what the
side-by-side view's "upload mapping" file (`sync.json`, `mappingEntries`) pairs. The ONNX adapter puts a node in
the scope of its `namespace` metadata: the copy written here gives each node its TFLite op's name scope
(session.layers.op_scopes, Model Explorer's rule for TFLite), so both graphs fold into the same layers.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from inspector.core.proof import node_data
from inspector.core.session.layers import op_scopes

TFLITE, ONNX, MAPPING, SYNC = "model.tflite", "model.onnx", "mapping.json", "sync.json"
EXTENSION = "model_explorer_onnx"           # the ONNX adapter's module (pip install model-explorer-onnx)
NAMESPACE_IR = 10                           # node metadata_props exist from ONNX IR version 10 on


def tflite_graph_id(graph) -> str:
    """The main subgraph's id in Model Explorer (our reader names an unnamed subgraph `subgraph_0`)."""
    name = graph.main.name
    if name and name != "subgraph_0":
        return name
    key = next((s.key for s in graph.signature_defs if s.subgraph == 0), "")
    return key or "main"


def model_copy(model, graph, trace=None):
    """The ONNX model as Model Explorer gets it: a graph name other than the TFLite graph's id (node data is matched
    by it), and with `trace`, each node's `namespace` its TFLite op's name scope."""
    import onnx
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    tfl = tflite_graph_id(graph)
    if not copy.graph.name or copy.graph.name == tfl:
        copy.graph.name = f"{tfl}.onnx"
    if trace is not None and copy.ir_version >= NAMESPACE_IR:
        sg = graph.main
        producers = sg.producers()
        scopes = op_scopes(sg, graph.format)
        for n in copy.graph.node:
            op = trace.node_op.get(n.name)
            if op is None and n.name in trace.inserted:
                c = trace.inserted[n.name]
                op = c.op if c.op is not None else producers.get(c.tensor)
            if op is None or not 0 <= op < len(sg.ops) or not scopes[op]:
                continue
            prop = next((p for p in n.metadata_props if p.key == "namespace"), None) or n.metadata_props.add()
            prop.key, prop.value = "namespace", "/".join(scopes[op])
    return copy


def sync_data(graph, trace) -> dict:
    """Model Explorer's side-by-side mapping: each TFLite op (by index) with its ONNX nodes and the Transposes
    inserted for its conflicts."""
    sg = graph.main
    producers = sg.producers()
    right: dict[int, list[str]] = {k: list(v) for k, v in trace.op_nodes.items() if 0 <= k < len(sg.ops)}
    for name, c in getattr(trace, "inserted", {}).items():
        op = c.op if c.op is not None else producers.get(c.tensor)
        if op is not None and 0 <= op < len(sg.ops) and name not in right.get(op, ()):
            right.setdefault(op, []).append(name)
    return {"mappingEntries": [{"leftNodeIds": [str(k)], "rightNodeIds": v} for k, v in sorted(right.items()) if v],
            "disableMappingFallback": True}


def bundle(graph, tflite_bytes: bytes, model, trace, overlays: dict[str, tuple[dict, dict]],
           namespaces: bool = True) -> dict[str, bytes]:
    """File name -> contents: both models, each overlay's node data for both graphs (keyed by graph id), the
    name mapping and the side-by-side mapping. `namespaces`: `model` is our conversion (its nodes take their
    op's scope)."""
    onnx_model = model_copy(model, graph, trace if namespaces else None)
    ids = tflite_graph_id(graph), onnx_model.graph.name
    files = {TFLITE: tflite_bytes, ONNX: onnx_model.SerializeToString()}
    for name, (tfl, onx) in overlays.items():
        files[f"{name}.json"] = _json(dict(zip(ids, (tfl, onx))))
    files[MAPPING] = _json(node_data.mapping_data(graph, trace))
    files[SYNC] = _json(sync_data(graph, trace))
    return files


def conversion_bundle(result, colours: dict[str, str], validation=None) -> dict[str, bytes]:
    """The window's export: our conversion of the TFLite model, its categories, conflicts and (once validated)
    errors."""
    return bundle(result.graph, Path(result.graph.path).read_bytes(), result.model, result.trace,
                  node_data.overlays(result, colours, validation))


def pair_bundle(graph, pair, rows) -> dict[str, bytes]:
    """`validate --model-explorer`: a TFLite model, the ONNX model made elsewhere, each mapped tensor's error."""
    return bundle(graph, Path(graph.path).read_bytes(), pair.model, pair.mapping,
                  {"errors": node_data.error_data(graph, rows, pair.model)}, namespaces=False)


def names(overlays) -> list[str]:
    """The files of a bundle with these overlays, in the order `bundle` makes them."""
    return [TFLITE, ONNX] + [f"{o}.json" for o in overlays] + [MAPPING, SYNC]


def command(folder: str | Path, files) -> str:
    """The one command that opens `files` (a bundle's names) in Model Explorer, from anywhere."""
    folder = Path(folder).resolve()
    data = ",".join(str(folder / f) for f in files if f.endswith(".json") and f not in (MAPPING, SYNC))
    return (f"model-explorer {shlex.quote(f'{folder / TFLITE},{folder / ONNX}')} --extensions={EXTENSION} "
            f"--node_data_paths={shlex.quote(data)}")


def write(folder: str | Path, files: dict[str, bytes]) -> list[Path]:
    """Each name -> bytes as FOLDER/name, all or none (io.atomic.OutputSet). Returns the paths written."""
    from inspector.core.io.atomic import OutputSet
    folder = Path(folder)
    paths = [folder / name for name in files]
    with OutputSet() as out:
        for path in paths:
            out.add(path)                       # every target checked before any is written
        for path, data in zip(paths, files.values()):
            out.write(path, data)
    return paths


def _json(data) -> bytes:
    return (json.dumps(data, indent=1) + "\n").encode()
