"""What a person sees after a pin on a big folded model: the ONNX pane's graph, made afresh in slices, never
vanishes meanwhile (the old picture stays until the new one is made, then the new one shows, the selection on it).
Real input: the group closed with Backspace on one of its ops, the pin chosen in the pane's context menu."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.gui import graph_view, layers_job
from inspector.gui.graph_group import GroupItem
from inspector.gui.graph_items import EdgeItem, NodeItem
from inspector.gui.graph_view import GraphScene
from inspector.gui.main_window import ONNX, TFLITE
from inspector.gui.palette import palette

from .test_gui_edit import open_model, settle, window  # noqa: F401  (fixture)
from .test_gui_layers import _pin_from_menu, click, key

pytestmark = pytest.mark.gui
BLOCKS, PER = 6, 12


def scoped_convs(path):
    """BLOCKS blocks of PER ops (CONV_2D, RELU, ABS, ...) named net/block_i/op_j, non-square (1×5×7×3)."""
    b = ModelBuilder()
    shape = [1, 5, 7, 3]
    w = b.const("w", np.full((3, 3, 3, 3), 0.01, np.float32))
    bias = b.const("b", np.zeros(3, np.float32))
    t = b.input("x", shape)
    for i in range(BLOCKS):
        for j in range(PER):
            out = b.tensor(f"net/block_{i}/op_{j}/out", shape)
            if j % 3 == 0:
                b.op("CONV_2D", [t, w, bias], [out], {"padding": "SAME"})
            else:
                b.op("RELU" if j % 3 == 1 else "ABS", [t], [out])
            t = out
    b.output(t)
    return b.save(path)


def inked(view) -> int:
    """Pixels of the view's viewport (every third in each direction) not of the background's colour."""
    image = view.viewport().grab().toImage()
    bg = palette().background.rgb()
    return sum(image.pixel(x, y) != bg for x in range(0, image.width(), 3) for y in range(0, image.height(), 3))


def test_a_pin_on_a_folded_graph_made_afresh_keeps_the_old_picture_until_the_new_one_shows(qtbot, window,  # noqa: F811
                                                                                           tmp_path, monkeypatch):
    monkeypatch.setattr(layers_job, "BIG", 40)          # this folded graph counts as big: made afresh, in slices
    monkeypatch.setattr(GraphScene, "SLICE_ITEMS", 12)  # of a few items each
    monkeypatch.setattr(GraphScene, "FIRST_CHUNK", 12)
    w = window
    s = open_model(qtbot, w, scoped_convs(tmp_path / "scoped.tflite"))
    sg = s.graph.main
    view = click(w, TFLITE, ("op", 1))                  # block 0 closed (Backspace on one of its ops): folded
    key(view, Qt.Key_Backspace)
    settle(qtbot, w)
    scene, onnx_view = w.scenes[ONNX], w.panes[ONNX].main_view
    assert any(isinstance(it, GroupItem) for it in scene.nodes) and len(scene.vg.nodes) >= layers_job.BIG
    # a node in the middle of the ONNX graph selected by a click (the view centred on it, readable)
    op = sg.ops[BLOCKS // 2 * PER + 4]
    node = next(n for n in s.result.trace.op_nodes[op.index])
    click(w, ONNX, node)
    assert scene.selected_keys()[0] == [node]
    qtbot.wait(50)
    before = inked(onnx_view)
    assert before > 500
    seen: list[int] = []
    real = GraphScene.populate

    def populate(sc, *a, **k):                          # what the pane shows after each slice of the new graph
        real(sc, *a, **k)
        if sc is scene and seen is not None:
            seen.append(inked(onnx_view))
    monkeypatch.setattr(GraphScene, "populate", populate)
    conv = sg.ops[(BLOCKS - 2) * PER + 3]               # a conv's output in a block left open: Transposes around it
    _pin_from_menu(w, qtbot, conv.outputs[0], "keep as is")
    settle(qtbot, w)
    monkeypatch.setattr(GraphScene, "populate", real)
    assert s.pins == {w.editor.pin_name(conv.outputs[0]): "keep"}
    assert len(seen) >= 5                               # made in slices, each looked at
    assert min(seen) > before // 2, seen                # the graph never vanished
    # the new graph is what shows, the old one's items gone; the node selected before is selected in it
    assert any(it.node.title == "Transpose" for it in scene.nodes)
    assert all(isinstance(it, (NodeItem, EdgeItem)) and not graph_view._gone(it) or not isinstance(
        it, (NodeItem, EdgeItem)) for it in scene.items())
    assert scene.selected_keys()[0] == [node]
    assert inked(onnx_view) > before // 2
