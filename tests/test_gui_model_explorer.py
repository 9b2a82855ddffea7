"""File › Export for Model Explorer: both models, node data for both graphs (categories in the window's colours,
conflicts with their reasons, each tensor's error once validated) and the TFLite <-> ONNX mapping from the trace,
all files or none, driven through the real menu action (the folder dialog answered by a stand-in)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from inspector.core.session.model_explorer import tflite_graph_id
from inspector.gui import export_model_explorer
from inspector.gui.graph_model import CONFLICT
from inspector.gui.palette import palette

from .test_gui_edit import make_window, open_model, validated
from .test_session import conv_reshape_conv

pytestmark = pytest.mark.gui

CONVERSION = ["model.tflite", "model.onnx", "categories.json", "conflicts.json", "mapping.json", "sync.json"]
ERRORS = ["errors.json"]


@pytest.fixture
def model(tmp_path):
    """x [1, 5, 7, 3] -> conv -> reshape [1, 7, 4, 5] (mixes channels into space) -> conv: two conflicts."""
    return conv_reshape_conv(tmp_path / "m.tflite", np.random.default_rng(2), bias=True)


def _export(w, monkeypatch, folder):
    """Trigger the File menu's action with the folder chooser answering `folder`; what it asked with."""
    asked = []

    def choose(_parent, title, start):
        asked.append((title, start))
        return str(folder)
    monkeypatch.setattr(export_model_explorer.QFileDialog, "getExistingDirectory", choose)
    file_menu = w.menuBar().actions()[0].menu()
    action = next(a for a in file_menu.actions() if a.text() == "Export for &Model Explorer…")
    assert action is w.editor.model_explorer_action and action.isEnabled()
    action.trigger()
    return asked


def _read(folder) -> dict:
    return {p.name: json.loads(p.read_text()) if p.suffix == ".json" else p.read_bytes() for p in folder.iterdir()}


def _graphs(files, name, tfl_id, onnx_id) -> tuple[dict, dict]:
    """An overlay's (TFLite, ONNX) parts: one file, keyed by graph id."""
    assert sorted(files[name]) == sorted([tfl_id, onnx_id])
    return files[name][tfl_id], files[name][onnx_id]


def test_export_for_model_explorer_writes_categories_conflicts_errors_and_the_mapping(qtbot, tmp_path, model,
                                                                                      monkeypatch):
    w = make_window(qtbot, tmp_path)
    s = open_model(qtbot, w, model)
    result, sg = s.result, s.graph.main
    assert len(result.plan.conflicts) == 2
    out = tmp_path / "me"
    out.mkdir()
    asked = _export(w, monkeypatch, out)
    assert asked[0][0] == "Export for Model Explorer"
    files = _read(out)
    assert sorted(files) == sorted(CONVERSION)                       # no validation yet: no errors
    assert files["model.tflite"] == model.read_bytes()
    import onnx
    me_model = onnx.load_from_string(files["model.onnx"])
    ids = tflite_graph_id(s.graph), me_model.graph.name
    assert ids == ("main", "m")
    assert [n.name for n in me_model.graph.node] == [n.name for n in result.model.graph.node]
    fill = {c: palette().color(c).name() for c in ("Implicit", "Transparent", "Attribute", "Terminate")}
    # categories: every TFLite op on its output tensor, in the window's colour
    tfl, onx = _graphs(files, "categories.json", *ids)
    tfl, onx = tfl["results"], onx["results"]
    assert tfl == {sg.tensors[op.outputs[0]].name: {"value": result.categories[op.index].value,
                                                    "bgColor": fill[result.categories[op.index].value]}
                   for op in sg.ops}
    assert {r["value"] for r in tfl.values()} == {"Implicit", "Terminate"}
    # ... and every ONNX node by its name: its op's category, or Inserted Transpose for a conflict's
    inserted = set(result.trace.inserted)
    assert len(inserted) == 2 and all(onx[v] == {"value": "Inserted Transpose",
                                                 "bgColor": palette().color(CONFLICT).name()} for v in inserted)
    for name, k in result.trace.node_op.items():
        if name not in result.trace.inserted:
            assert onx[name]["value"] == result.categories[k].value
    # conflicts: each reason on the Transpose inserted for it, and on the TFLite op that needed it
    reasons = {c.node: c.reason for c in result.plan.conflicts}
    tfl_conflicts, onx_conflicts = (part["results"] for part in _graphs(files, "conflicts.json", *ids))
    assert {k: v["value"] for k, v in onx_conflicts.items()} == reasons
    assert sorted(v["value"] for v in tfl_conflicts.values()) == sorted(reasons.values())
    assert set(tfl_conflicts) <= {t.name for t in sg.tensors}
    # the mapping is the trace's, by name
    assert files["mapping.json"]["tensors"] == {sg.tensors[t].name: v for t, v in result.trace.tensor_values.items()}
    assert files["mapping.json"]["ops"] == {sg.ops[k].label: v for k, v in result.trace.op_nodes.items()}
    message = w.statusBar().currentMessage()
    assert "Model Explorer files" in message and f"model-explorer {out.resolve()}/model.tflite," in message

    # after a validation, each compared tensor's error joins them
    validated(qtbot, w)
    v = s.validation
    asked = _export(w, monkeypatch, out)
    assert asked[0][1] == str(out.resolve())                        # the chooser starts where the last export went
    files = _read(out)
    assert sorted(files) == sorted(CONVERSION + ERRORS)
    rows = v.outputs + v.intermediates
    assert len(rows) >= 3
    tfl_errors, onx_errors = _graphs(files, "errors.json", *ids)
    assert tfl_errors["results"] == {e.name: {"value": round(math.log10(max(e.max_rel, 1e-12)), 3)} for e in rows}
    writer = {v: n.name for n in result.model.graph.node for v in n.output}
    assert set(onx_errors["results"]) == {writer[e.onnx_name] for e in rows if e.onnx_name in writer}
    assert tfl_errors["gradient"][0]["stop"] == 0


def test_export_for_model_explorer_writes_all_or_nothing_and_fails_in_one_sentence(qtbot, tmp_path, model,
                                                                                  monkeypatch):
    w = make_window(qtbot, tmp_path)
    assert not w.editor.model_explorer_action.isEnabled()          # nothing open
    open_model(qtbot, w, model)
    out = tmp_path / "me"
    out.mkdir()
    (out / "conflicts.json").mkdir()                                # one target cannot be written
    _export(w, monkeypatch, out)
    assert [p.name for p in out.iterdir()] == ["conflicts.json"]    # and so none is
    assert "\n" not in w.last_error and "conflicts.json" in w.last_error and "folder" in w.last_error
    _export(w, monkeypatch, tmp_path / "missing")
    assert not (tmp_path / "missing").exists() and "does not exist" in w.last_error
    asked, w.last_error = [], ""
    monkeypatch.setattr(export_model_explorer.QFileDialog, "getExistingDirectory",
                        lambda *_: asked.append(True) or "")      # the user cancels the folder dialog
    before = sorted(tmp_path.rglob("*"))
    assert export_model_explorer.export_dialog(w.editor) is None
    assert asked and w.last_error == "" and sorted(tmp_path.rglob("*")) == before     # nothing written, no error
