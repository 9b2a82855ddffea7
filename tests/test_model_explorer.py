"""`convert --model-explorer DIR` (session.model_explorer): both models, node data keyed by graph id (TFLite nodes by
output tensor name, ONNX nodes by name), the side-by-side mapping by node id, each ONNX node in its TFLite op's
name scope, all files or none, and the one command docs/window.md shows."""
from __future__ import annotations

import json
from pathlib import Path

import onnx

from inspector.cli import main as cli
from inspector.core.emit.convert import convert
from inspector.core.io.loader import load_model
from inspector.core.session import model_explorer
from inspector.core.session.layers import op_scopes

from .test_layers import _named_model

FILES = ["categories.json", "conflicts.json", "mapping.json", "model.onnx", "model.tflite", "sync.json"]


def test_convert_writes_both_models_and_node_data_model_explorer_matches(tmp_path, capsys):
    src = _named_model(tmp_path / "named.tflite")
    me = tmp_path / "me"
    assert cli(["convert", str(src), "-o", str(tmp_path / "named.onnx"), "--model-explorer", str(me)]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in me.iterdir()) == FILES
    assert (me / "model.tflite").read_bytes() == src.read_bytes()
    graph = load_model(str(src))
    result = convert(graph)
    sg, trace = graph.main, result.trace
    model = onnx.load(str(me / "model.onnx"))
    onnx.checker.check_model(model)
    # the same nodes as the conversion, the graph named apart from TFLite's `main`, each node in its op's scope
    assert [n.name for n in model.graph.node] == [n.name for n in result.model.graph.node]
    assert model.graph.name == "named" and model_explorer.tflite_graph_id(graph) == "main"
    scopes = op_scopes(sg, "tflite")
    spaces = {n.name: {p.key: p.value for p in n.metadata_props}.get("namespace") for n in model.graph.node}
    for name, op in trace.node_op.items():
        assert spaces[name] == "/".join(scopes[op])
    for name, c in trace.inserted.items():                 # a conflict's Transpose: where the op needing it is
        assert spaces[name] == "/".join(scopes[c.op])
    assert spaces[trace.op_nodes[0][0]] == "m/stem/conv1/Conv2D"
    # node data: one file per overlay, keyed by graph id; TFLite nodes by output tensor, ONNX nodes by name
    cats, conflicts = (json.loads((me / f).read_text()) for f in ("categories.json", "conflicts.json"))
    assert sorted(cats) == sorted(conflicts) == ["main", "named"]
    assert set(cats["main"]["results"]) == {sg.tensors[op.outputs[0]].name for op in sg.ops}
    assert set(cats["named"]["results"]) == {n.name for n in model.graph.node}
    assert {k: v["value"] for k, v in cats["named"]["results"].items() if k in trace.inserted} == \
        dict.fromkeys(trace.inserted, "Inserted Transpose")
    assert len(trace.inserted) == 2
    assert {k: v["value"] for k, v in conflicts["named"]["results"].items()} == \
        {c.node: c.reason for c in result.plan.conflicts}
    # the side-by-side mapping: TFLite op index -> its ONNX nodes and the Transposes inserted at it
    sync = json.loads((me / "sync.json").read_text())
    assert sync["disableMappingFallback"] is True
    entries = {e["leftNodeIds"][0]: e["rightNodeIds"] for e in sync["mappingEntries"]}
    assert sorted(entries, key=int) == [str(op.index) for op in sg.ops]
    for op in sg.ops:
        mine = trace.op_nodes[op.index]
        mine = mine + [n for n, c in trace.inserted.items() if c.op == op.index and n not in mine]
        assert entries[str(op.index)] == mine
    assert sorted(n for v in entries.values() for n in v) == sorted(n.name for n in model.graph.node)
    # the one command, printed with absolute paths
    me = me.resolve()
    assert (f"model-explorer {me}/model.tflite,{me}/model.onnx --extensions=model_explorer_onnx "
            f"--node_data_paths={me}/categories.json,{me}/conflicts.json") in out


def test_a_target_that_cannot_be_written_writes_nothing(tmp_path, capsys):
    src = _named_model(tmp_path / "named.tflite")
    me = tmp_path / "me"
    me.mkdir()
    (me / "sync.json").mkdir()                              # one target is a folder
    assert cli(["convert", str(src), "-o", str(tmp_path / "named.onnx"), "--model-explorer", str(me)]) != 0
    err = capsys.readouterr().err
    assert "sync.json" in err and "Traceback" not in err
    assert [p.name for p in me.iterdir()] == ["sync.json"] and not (tmp_path / "named.onnx").exists()


def test_the_window_doc_gives_the_command_the_folder_opens_with():
    doc = (Path(__file__).parents[1] / "docs" / "window.md").read_text()
    names = model_explorer.names(("categories", "conflicts", "errors"))
    line = (f"model-explorer {model_explorer.TFLITE},{model_explorer.ONNX} --extensions={model_explorer.EXTENSION} "
            f"--node_data_paths=" + ",".join(n for n in names if n.endswith(".json") and n not in
                                             (model_explorer.MAPPING, model_explorer.SYNC)))
    assert line in doc
    assert "pip install ai-edge-model-explorer model-explorer-onnx" in doc and "sync.json" in doc
