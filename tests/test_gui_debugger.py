"""The window as a layout debugger: the legend at real widths, live pins that keep the picture, large fan-in."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QColor

from inspector.core.session.pipeline import run
from inspector.gui.live_layout import edge_keys
from inspector.gui.main_window import ONNX, TFLITE
from inspector.gui.palette import CONFLICT

from .test_gui_edit import make_window, open_model, settle

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot, tmp_path):
    return make_window(qtbot, tmp_path)


def picture(w, which=ONNX):
    """Everything a user sees of a pane's graph: node positions, routes, categories and markers by key."""
    scene = w.scenes[which]
    keys = edge_keys(scene.vg)
    return ({it.node.key: (it.pos().x(), it.pos().y()) for it in scene.nodes},
            {keys[it.index]: it.points for it in scene.edges},
            {it.node.key: (it.category, bool(it.marker)) for it in scene.nodes})


def mid_conv_output(sg):
    """A 4-D tensor in the middle of the graph made by a convolution: pinning it to TFLite's layout costs."""
    ops = [op for op in sg.ops if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    return ops[len(ops) // 2].outputs[0]


@pytest.mark.parametrize("width", [1600, 1280, 900])
def test_legend_wraps_and_every_entry_is_drawn(qtbot, window, width):
    window.stack.setCurrentWidget(window.workspace)
    window.resize(width, 900)
    legend = window.legend
    qtbot.waitUntil(lambda: legend.height() == legend.heightForWidth(legend.width()), timeout=5000)
    image = legend.grab().toImage()
    rows = legend.rows(legend.width())
    assert legend.height() >= rows * legend._row_h()
    for (colour, label, _), (x, row) in zip(legend.entries, legend.placement(legend.width())):
        right = x + legend._widths()[legend.entries.index((colour, label, _))]
        assert right <= legend.width(), label                      # not cut at the right edge
        cy = 2 + row * legend._row_h() + legend._row_h() // 2
        swatch = QColor(image.pixel(int(x + legend.SWATCH / 2), int(cy + 3)))
        assert abs(swatch.red() - colour.red()) + abs(swatch.green() - colour.green()) < 40, label   # drawn there
    if legend.sizeHint().width() > legend.width():
        assert rows > 1


@pytest.mark.parametrize("name", ["keras/nasnetmobile_fp32.tflite", "torch/mobilenet_v2_w050.tflite"])
def test_live_pin_keeps_the_picture_and_undo_restores_it(qtbot, window, corpus, name):
    w = window
    s = open_model(qtbot, w, corpus / name)
    scene, view = w.scenes[ONNX], w.panes[ONNX].main_view
    pos0, routes0, colours0 = picture(w)
    tfl0 = picture(w, TFLITE)
    before, bytes0 = s.result.transposes, s.result.model.SerializeToString()
    t = mid_conv_output(s.graph.main)
    assert w.editor.pin(w.editor.pin_name(t), "keep")
    settle(qtbot, w)
    assert s.result.transposes > before                              # the pin costs Transposes...
    rc = w.editor.reconverter                                        # re-planned and re-emitted incrementally...
    assert rc.replayed > 10 * rc.emitted
    full = run(s.graph, s.pins, s.options, s.metadata, check=False)
    assert s.result.model.SerializeToString() == full.result.model.SerializeToString()   # ...a full conversion's
    assert w.scenes[ONNX] is scene and w.panes[ONNX].main_view is view   # ...shown in the same scene
    pos1, routes1, colours1 = picture(w)
    added = set(pos1) - set(pos0)
    assert added and all(scene.node_by_key[k].node.title == "Transpose" for k in added)
    assert {k for k in added if colours1[k][0] == CONFLICT} == added   # new Transposes drawn as conflicts
    kept = set(pos0) & set(pos1)
    assert len(kept) >= len(pos0) - 2
    assert all(pos1[k] == pos0[k] for k in kept)                      # unchanged nodes did not move
    assert all(routes1[k] == routes0[k] for k in set(routes0) & set(routes1)
               if k[0] in kept and k[1] in kept)
    assert any(colours1[k] != colours0[k] for k in kept) or added     # the picture changed colour
    assert picture(w, TFLITE)[0] == tfl0[0]                           # the TFLite side never moves
    assert picture(w, TFLITE)[2] != tfl0[2]                           # but shows the conflict the pin made

    w.editor.undo_action.trigger()
    settle(qtbot, w)
    assert s.result.transposes == before
    assert s.result.model.SerializeToString() == bytes0
    assert picture(w) == (pos0, routes0, colours0)                    # exactly the picture from before
    assert picture(w, TFLITE) == tfl0
    w.editor.redo_action.trigger()
    settle(qtbot, w)
    assert picture(w)[0] == pos1


def fan_in_model(path, repeat: int, distinct: int):
    """ADD_N over graph input x read `repeat` times plus `distinct` graph inputs of their own, then a RELU."""
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    shape = [1, 3, 5, 2]
    x = b.input("x", shape)
    others = [b.input(f"u{i}", shape) for i in range(distinct)]
    y, z = b.tensor("y", shape), b.tensor("z", shape)
    b.op("ADD_N", [x] * repeat + others, [y])
    b.op("RELU", [y], [z])
    b.output(z)
    return b.save(path)


def test_an_op_with_100000_inputs_is_one_node_with_a_bundled_edge(qtbot, window, tmp_path):
    """Issue 22, 13: an ADD_N of 100,000 inputs took 78 s to open with a 4.2 s stall (100,002 edge items)."""
    from inspector.gui.raster import raster
    w = window
    s = open_model(qtbot, w, fan_in_model(tmp_path / "add_n.tflite", 100_000, 300))
    assert s.result is not None
    for which, title in ((TFLITE, "ADD_N"), (ONNX, "Sum")):
        scene = w.scenes[which]
        op = next(it for it in scene.nodes if it.node.title == title)
        into = [e for e in scene.edges if e.edge.dst == op.index]
        assert len(scene.nodes) == 4 and len(into) == 1         # x and the 300 inputs: one terminal, one edge
        assert into[0].edge.count == 100_300 and "100300 inputs drawn as one edge" in into[0].toolTip()
        terminal = scene.nodes[into[0].edge.src]
        assert terminal.node.kind == "input" and terminal.node.title == "301 inputs"
        r = scene.sceneRect()                                    # the minimap's picture shows the op's colour
        image = raster(scene, (r.left(), r.top()), 0.5, int(r.width() * 0.5), int(r.height() * 0.5))
        centre = (op.pos() - r.topLeft()) * 0.5
        assert image.pixelColor(int(centre.x()), int(centre.y())).rgb() == op.quick_fill.rgb()


def test_small_fan_in_keeps_one_edge_per_input(qtbot, window, tmp_path):
    w = window
    open_model(qtbot, w, fan_in_model(tmp_path / "add_n.tflite", 3, 4))
    scene = w.scenes[TFLITE]
    add_n = next(it for it in scene.nodes if it.node.title == "ADD_N")
    assert sum(e.edge.dst == add_n.index for e in scene.edges) == 7
    assert all(e.edge.count == 1 for e in scene.edges)


@pytest.mark.parametrize("name", ["keras/nasnetmobile_fp32.tflite", "torch/mobilenet_v2_w050.tflite"])
def test_what_if_counts_equal_the_counts_after_applying(qtbot, window, corpus, name):
    from inspector.gui.commands import AUTO, CHANNELS_FIRST, KEEP, pin_label
    w = window
    s = open_model(qtbot, w, corpus / name)
    t = mid_conv_output(s.graph.main)
    w.select(TFLITE, tensors=[t])
    bar = w.editor.pin_bar
    bar._fill()
    shown = {}
    for a in bar.menu.actions():
        label = a.text().split("  —  ")
        for choice in (AUTO, CHANNELS_FIRST, KEEP):
            if label[0] == pin_label(choice):
                assert len(label) == 2 and label[1].endswith("in the graph")
                shown[choice] = (a, int(label[1].split()[0]))
    assert set(shown) == {AUTO, CHANNELS_FIRST, KEEP}
    assert len({n for _, n in shown.values()}) > 1                # the choices differ: the menu says by how much
    for choice in (KEEP, CHANNELS_FIRST, AUTO):
        w.select(TFLITE, tensors=[t])
        bar._fill()
        action = next(a for a in bar.menu.actions() if a.text().split("  —  ")[0] == pin_label(choice))
        predicted = int(action.text().split("  —  ")[1].split()[0])
        assert predicted == shown[choice][1]
        action.trigger()
        settle(qtbot, w)
        assert s.result.plan.optimality.transposes == predicted, pin_label(choice)
        assert s.result.transposes == predicted                   # and so many Transpose nodes in the ONNX graph


def test_ambiguous_tensor_marked_in_the_pin_bar_and_menu(qtbot, window, tmp_path):
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    x = b.input("x", [1, 4, 4, 4])                    # H = W = C: NHWC and NCHW look alike
    y = b.tensor("y", [1, 4, 4, 4])
    b.op("RELU", [x], [y])
    b.output(y)
    w = window
    open_model(qtbot, w, b.save(tmp_path / "cube.tflite"))
    w.select(TFLITE, tensors=[w.editor.session.graph.main.tensor_by_name("x").index])
    bar = w.editor.pin_bar
    assert bar.label.text().endswith("⚠") and "H = W = C = 4" in bar.label.toolTip()
    bar._fill()
    assert any(a.text().startswith("⚠ ambiguous layout: H = W = C") for a in bar.menu.actions())


def test_ambiguous_shapes_are_marked():
    from inspector.gui.what_if import ambiguous
    assert "H = W = C" in ambiguous((1, 8, 8, 8))
    assert "C = 5 equals W" in ambiguous((1, 7, 5, 5))
    assert "size-1 H, W" in ambiguous((1, 1, 1, 32))
    assert ambiguous((1, 5, 7, 3)) == "" and ambiguous((2, 3)) == "" and ambiguous((1, None, 4, 4)) == ""


def test_fix_applies_the_cheapest_pin_that_removes_the_conflict(qtbot, window, corpus):
    from PySide6.QtWidgets import QMenu

    from inspector.gui import fix_conflict
    w = window
    s = open_model(qtbot, w, corpus / "ops/conv-reshape-multiple-conv.float32.tflite")
    for c in list(s.result.plan.conflicts):     # the plan is the solver's best: no pin does better
        menu = QMenu()
        fix_conflict.fill(menu, w.editor, c)
        assert [a.text() for a in menu.actions()] == ["No single pin removes this conflict with fewer Transposes"]
    w.editor.pin("input", "keep")               # a pin that costs a Transpose: re-pinning it is the fix
    settle(qtbot, w)
    before = s.result.plan.optimality.transposes
    fixed = 0
    for c in list(s.result.plan.conflicts):
        menu = QMenu()
        fix_conflict.fill(menu, w.editor, c)
        action = menu.actions()[0]
        if not action.isEnabled():
            continue
        predicted = int(action.text().split("  —  ")[1].split()[0])
        assert predicted < before
        action.trigger()
        settle(qtbot, w)
        assert not any(d.tensor == c.tensor and d.op == c.op for d in s.result.plan.conflicts)
        assert s.result.plan.optimality.transposes == predicted
        fixed += 1
        w.editor.stack.undo()
        settle(qtbot, w)
    assert fixed
    # from the panel itself: a right-click on a row offers the same action
    panel = w.conflicts
    row = panel.topLevelItem(0)
    panel.customContextMenuRequested.emit(panel.visualItemRect(row).center())
    assert w.editor.last_menu is not None and w.editor.last_menu.actions()[0].text().startswith(("Fix:", "No single"))


def test_placed_nodes_overlap_nothing():
    from inspector.gui.graph_layout import Geometry
    from inspector.gui.graph_model import Edge, Node, ViewGraph
    from inspector.gui.live_layout import Placement
    a, b, c = (Node(k, "op", k.title()) for k in ("conv", "relu", "add"))
    old = ViewGraph("onnx", [a, b, c], [Edge(0, 1, "x", ""), Edge(1, 2, "y", "")])
    p = Placement(old, Geometry([(100.0, 20.0), (100.0, 80.0), (300.0, 80.0)], [[(0, 0)], [(0, 0)]], 400.0, 100.0))
    t = Node("relu/Transpose", "op", "Transpose", ["perm [0,3,1,2]"])
    new = ViewGraph("onnx", [a, t, b, c], [Edge(0, 1, "x", ""), Edge(1, 2, "x_t", ""), Edge(2, 3, "y", "")])
    lay = p.layout(new)
    assert lay.pos[0] == (100.0, 20.0) and lay.pos[2] == (100.0, 80.0) and lay.pos[3] == (300.0, 80.0)
    (tx, ty), boxes = lay.pos[1], [(x, y, n.width, n.height) for (x, y), n in zip(lay.pos, new.nodes)]
    for (x, y, w, h) in boxes[:1] + boxes[2:]:              # the gap is too small: moved aside, onto nothing
        assert abs(x - tx) >= (w + t.width) / 2 or abs(y - ty) >= (h + t.height) / 2
    assert tx - t.width / 2 >= 0 and lay.width >= tx + t.width / 2
