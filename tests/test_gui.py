"""The inspector window, offscreen: both scenes mirror the models, selection follows the trace, search, links, export."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from PySide6.QtCore import QSettings, Qt  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402

from inspector.gui.graph_items import EdgeItem, NodeItem  # noqa: E402
from inspector.gui.main_window import ONNX, TFLITE, MainWindow  # noqa: E402
from inspector.gui.palette import CONFLICT  # noqa: E402

pytestmark = pytest.mark.gui
CONFLICT_MODEL = "ops/conv-reshape-multiple-conv.float32.tflite"


@pytest.fixture
def window(qtbot, tmp_path):
    w = MainWindow(QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    return w


def open_model(qtbot, window, path, panes=(TFLITE, ONNX)):
    window.open_path(str(path))
    qtbot.waitUntil(lambda: window.idle and all(p in window.scenes for p in panes), timeout=120_000)
    return window.doc


def op_keys(scene):
    return [it.node.key for it in scene.nodes if it.node.kind == "op"]


def test_scene_nodes_equal_ops_both_sides(qtbot, window, corpus):
    doc = open_model(qtbot, window, corpus / "keras/nasnetmobile_fp32.tflite")
    tfl, onx = window.scenes[TFLITE], window.scenes[ONNX]
    assert sorted(op_keys(tfl)) == [("op", i) for i in range(len(doc.graph.main.ops))]
    assert len(op_keys(onx)) == len(doc.model.graph.node)
    assert len(set(op_keys(onx))) == len(doc.model.graph.node)          # one item per node, names unique
    sg = doc.graph.main
    expected_edges = sum(1 for op in sg.ops for t in op.inputs if t >= 0 and not sg.tensors[t].is_constant)
    expected_edges += sum(1 for t in sg.outputs if t >= 0)
    assert len(tfl.edges) == expected_edges
    # constants are folded into their consumer, not drawn
    conv = next(it for it in tfl.nodes if it.node.title == "CONV_2D")
    assert any(line.startswith("w ") for line in conv.node.lines)
    assert not any(isinstance(k, tuple) and k[0] == "in" and sg.tensors[k[1]].is_constant
                   for k in tfl.node_by_key)


def test_selecting_tflite_op_selects_its_onnx_nodes_and_back(qtbot, window, corpus):
    doc = open_model(qtbot, window, corpus / "keras/nasnetmobile_fp32.tflite")
    tr = doc.trace
    op = next(i for i, nodes in sorted(tr.op_nodes.items()) if len(nodes) >= 1 and i > 50)
    window.select(TFLITE, nodes=[("op", op)])
    onnx_nodes, _ = window.scenes[ONNX].selected_keys()
    assert set(onnx_nodes) == set(tr.op_nodes[op])
    view = window.panes[ONNX].main_view
    centre = view.mapToScene(view.viewport().rect().center())
    target = window.scenes[ONNX].node_by_key[tr.op_nodes[op][0]].sceneBoundingRect()
    assert abs(centre.y() - target.center().y()) < view.viewport().height()   # scrolled to it
    # reverse: an ONNX node selects the TFLite op it came from
    name = tr.op_nodes[op][-1]
    window.select(ONNX, nodes=[name])
    assert window.scenes[TFLITE].selected_keys()[0] == [("op", tr.node_op[name])]
    # tensors: a TFLite edge selects the ONNX values traced from it
    t = doc.graph.main.ops[op].outputs[0]
    window.select(TFLITE, tensors=[t])
    _, values = window.scenes[ONNX].selected_keys()
    assert values and set(values) <= set(tr.tensor_values[t])
    assert all(e.isSelected() for v in values for e in window.scenes[ONNX].edges_by_tensor[v])


def test_conflicts_coloured_marked_and_listed(qtbot, window, corpus):
    doc = open_model(qtbot, window, corpus / CONFLICT_MODEL)
    inserted = doc.inserted()
    assert inserted, "the model was chosen because it needs inserted Transposes"
    onx, tfl = window.scenes[ONNX], window.scenes[TFLITE]
    for name, c in inserted.items():
        item = onx.node_by_key[name]
        assert item.category == CONFLICT and c.reason in item.marker and c.reason in item.toolTip()
        out = [e for e in onx.edges if onx.vg.nodes[e.edge.src].key == name]
        assert out and all("×" in e.edge.label for e in out)     # its output shape is shown, permuted
    flagged = [e for e in tfl.edges if e.conflict]
    assert {e.edge.tensor for e in flagged} == {c.tensor for c in doc.conflicts()}
    listed = len(doc.conflicts()) + sum(1 for c in inserted.values() if not any(c is d for d in doc.conflicts()))
    assert window.conflicts.topLevelItemCount() == listed
    # clicking a conflict with an inserted Transpose selects it in the ONNX pane
    row = next(i for i in range(window.conflicts.topLevelItemCount())
               if window.conflicts.topLevelItem(i).data(1, Qt.UserRole))
    c = window.conflicts.topLevelItem(row).data(0, Qt.UserRole)
    window.conflicts.itemClicked.emit(window.conflicts.topLevelItem(row), 0)
    assert onx.selected_keys()[0] == [window.conflicts.topLevelItem(row).data(1, Qt.UserRole)]
    assert "Transpose" in window.details.html()
    assert c.tensor in tfl.selected_keys()[1]
    # a tensor's details: shape before and after, its layout and the planner's reason
    t = c.tensor
    window.select(TFLITE, tensors=[t])
    text = window.details.html()
    tensor = doc.graph.main.tensors[t]
    from inspector.core.layout import layout as L
    from inspector.gui.graph_model import shape_text
    assert shape_text(tensor.shape) in text
    assert shape_text(L.apply(tensor.shape, doc.result.plan.perm(t, tensor.rank))) in text
    if t in doc.result.plan.why:
        assert doc.result.plan.why[t] in text.replace("\n", " ")
    assert c.reason in text.replace("\n", " ")
    # TFLite ops coloured by their category
    for i, cat in doc.result.categories.items():
        assert tfl.node_by_key[("op", i)].category == cat.value


def test_search_next_previous(qtbot, window, corpus):
    doc = open_model(qtbot, window, corpus / "keras/nasnetmobile_fp32.tflite")
    n_pool = sum(1 for op in doc.graph.main.ops if op.opcode == "MAX_POOL_2D")
    n_onnx = sum(1 for n in doc.model.graph.node if n.op_type == "MaxPool")
    window.search_field.setText("max_pool")
    matches = window.search("max_pool")
    nodes = [m for m in matches if m[1] == "node"]
    assert len([m for m in nodes if m[0] == TFLITE]) >= n_pool
    assert len([m for m in nodes if m[0] == ONNX]) >= n_onnx
    window.search_step(+1)
    first = matches[0]
    assert window.scenes[first[0]].selected_keys()[0 if first[1] == "node" else 1] == [first[2]]
    window.search_step(+1)
    second = matches[1]
    assert window.scenes[second[0]].selected_keys()[0 if second[1] == "node" else 1] == [second[2]]
    window.search_step(-1)
    assert window.scenes[first[0]].selected_keys()[0 if first[1] == "node" else 1] == [first[2]]
    assert window.search_status.text().strip() == f"1 of {len(matches)}"
    window.search_field.setText("no-such-name-anywhere")
    window.search_step(+1)
    assert "no match" in window.search_status.text()


def test_follow_producer_link_and_constant_histogram(qtbot, window, corpus):
    doc = open_model(qtbot, window, corpus / "keras/nasnetmobile_fp32.tflite")
    sg = doc.graph.main
    producers = sg.producers()
    op = next(o for o in sg.ops[10:] if o.opcode == "ADD" and all(t in producers for t in o.inputs))
    window.select(TFLITE, nodes=[("op", op.index)])
    p = producers[op.inputs[0]]
    text = window.details.html()
    assert f"{sg.ops[p].opcode}#{p}" in text
    window.details.linkActivated.emit(f"tfl-op:{p}")
    assert window.scenes[TFLITE].selected_keys()[0] == [("op", p)]
    assert f"{sg.ops[p].opcode} #{p}" in window.details.html()
    assert set(window.scenes[ONNX].selected_keys()[0]) == set(doc.trace.op_nodes[p])
    # a folded constant (weights) opens its details with a histogram
    conv = next(o for o in sg.ops if o.opcode == "CONV_2D")
    w = conv.inputs[1]
    window.details.linkActivated.emit(f"tfl-tensor:{w}")
    assert window.details.plot.isVisible()
    items = window.details.plot.getPlotItem().listDataItems()
    assert items and int(np.sum(items[0].getData()[1])) == sg.tensors[w].data.size
    assert "shape (ONNX)" in window.details.html()


def _distinct_colours(img: QImage) -> int:
    seen = set()
    for y in range(0, img.height(), max(1, img.height() // 60)):
        for x in range(0, img.width(), max(1, img.width() // 60)):
            seen.add(img.pixel(x, y))
    return len(seen)


def test_export_png_and_svg(qtbot, window, corpus, tmp_path):
    from inspector.gui import export
    open_model(qtbot, window, corpus / CONFLICT_MODEL)
    for which in (TFLITE, ONNX):
        view = window.panes[which].main_view
        for whole in (False, True):
            png = tmp_path / f"{which}-{whole}.png"
            svg = tmp_path / f"{which}-{whole}.svg"
            export.export(view, str(png), whole)
            export.export(view, str(svg), whole)
            assert png.stat().st_size > 0 and svg.stat().st_size > 0
            img = QImage(str(png))
            assert not img.isNull() and _distinct_colours(img) > 3, "PNG is one flat colour"
            text = svg.read_text()
            assert "<svg" in text and text.count("<path") + text.count("<rect") > 3
    with pytest.raises(OSError):
        export.export(window.panes[TFLITE].main_view, str(tmp_path / "missing-dir" / "x.png"))


def test_onnx_file_opens_alone(qtbot, window, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 7])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 1, 1], np.ones(12, np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]))
    path = tmp_path / "small.onnx"
    onnx.save(model, str(path))
    open_model(qtbot, window, path, panes=(ONNX,))
    assert TFLITE not in window.scenes and window.panes[TFLITE].isHidden()
    assert sorted(op_keys(window.scenes[ONNX])) == ["conv", "relu", "sig"]
    conv = window.scenes[ONNX].node_by_key["conv"]
    assert "W 4×3×1×1 float32" in conv.node.lines
    window.select(ONNX, nodes=["relu"])
    assert "conv" in window.details.html() and "sig" in window.details.html()


def test_bad_file_reports_error_without_raising(qtbot, window, tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00\x00\x00\x00TFL3" + b"\xff" * 40)
    window.open_path(str(bad))
    qtbot.waitUntil(lambda: window.idle, timeout=10_000)
    assert "bad.tflite" in window.last_error
    assert not any(p.endswith("bad.tflite") for p in window.recent())   # Recent lists what opened


def test_subgraph_opens_in_a_tab_on_double_click(qtbot, window, corpus):
    window.open_path(str(corpus / "keras/custom_lstm_text_fp32.tflite"))
    qtbot.waitUntil(lambda: window.idle and TFLITE in window.scenes, timeout=60_000)
    scene = window.scenes[TFLITE]
    item = next(it for it in scene.nodes if it.node.title == "WHILE")
    view = window.panes[TFLITE].main_view
    view.reveal(item.sceneBoundingRect())
    qtbot.mouseDClick(view.viewport(), Qt.LeftButton, pos=view.mapFromScene(item.sceneBoundingRect().center()))
    tabs = window.panes[TFLITE].tabs
    assert tabs.count() == 1 + len(item.node.subgraphs)
    sub = tabs.widget(tabs.count() - 1).scene()
    sgi = item.node.subgraphs[-1]
    assert len([i for i in sub.nodes if i.node.kind == "op"]) == len(window.doc.graph.subgraphs[sgi].ops)


def test_paint_thousands_of_custom_items(qtbot):
    """Guards the PySide6 6.12 abort after ~1000 Python paint() overrides: really paint a few thousand items."""
    from PySide6.QtGui import QPainter

    from inspector.gui import graph_layout
    from inspector.gui.graph_model import Edge, Node, ViewGraph
    from inspector.gui.graph_view import GraphScene
    n = 3000
    nodes = [Node(("op", i), "op", f"OP{i % 7}", ["stride 1×2"]) for i in range(n)]
    edges = [Edge(i, i + 1, i, "1×3×5×7") for i in range(n - 1)]
    edges += [Edge(i, i + 5, 10_000 + i, "1×3") for i in range(0, n - 5, 9)]
    vg = ViewGraph("tflite", nodes, edges)
    scene = GraphScene(vg, graph_layout.compute(vg))
    assert not scene.complete                    # big scenes are built in chunks from the event loop
    scene.finish()
    assert len(scene.nodes) == n
    before = NodeItem.paint_calls
    rect = scene.sceneRect()
    for scale in (0.02, 0.05, 0.1, 0.02):
        img = QImage(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)), QImage.Format_ARGB32)
        img.fill(0xFFFFFFFF)
        p = QPainter(img)
        scene.render(p)
        p.end()
    painted = NodeItem.paint_calls - before
    assert painted >= 4 * n
    assert sum(isinstance(i, EdgeItem) for i in scene.items()) == len(edges)
    assert _distinct_colours(img) > 1


def test_cancel_drops_the_job_results(qtbot, window, corpus):
    window.open_path(str(corpus / "keras/nasnetmobile_fp32.tflite"))
    assert window.cancel_button.isVisibleTo(window)
    window.cancel()
    assert window.idle and not window.cancel_button.isVisibleTo(window)
    window.pool.waitForDone(60_000)
    qtbot.wait(200)                                   # deliver anything the worker queued
    assert window.scenes == {} and window.doc is None
    assert "Cancelled" in window.panes[TFLITE].placeholder.text()


def test_drop_a_file_opens_it(qtbot, window, corpus):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(corpus / CONFLICT_MODEL))])
    event = QDropEvent(QPointF(10, 10), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    window.dropEvent(event)
    qtbot.waitUntil(lambda: window.idle and ONNX in window.scenes, timeout=60_000)
    assert window.doc.path.endswith("conv-reshape-multiple-conv.float32.tflite")


def test_exception_hook_shows_a_dialog_and_keeps_running(qtbot, window, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from inspector.core.ir.errors import ModelLoadError
    from inspector.gui.app import _hook
    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append((self.text(), self.detailedText())))
    hook = _hook(lambda: window)
    try:
        raise ValueError("boom in a slot")
    except ValueError as e:
        hook(type(e), e, e.__traceback__)
    hook(ModelLoadError, ModelLoadError("m.tflite", "truncated"), None)
    assert "boom in a slot" in shown[0][0] and "Traceback" in shown[0][1]
    assert "truncated" in shown[1][0] and shown[1][1] == ""      # expected errors: message only, no traceback
    assert window.isVisible()


def test_cli_has_gui_command():
    from inspector.cli import build_parser
    from inspector.cli import gui as gui_cli
    args = build_parser().parse_args(["gui", "model.tflite"])
    assert args.model == "model.tflite" and args.run is gui_cli.run
    assert build_parser().parse_args(["gui"]).model is None


def test_big_models_convert_in_a_child_process(qtbot, window, corpus, monkeypatch):
    from collections import OrderedDict

    from inspector.gui import graph_layout, loader_job
    monkeypatch.setattr(loader_job.LoadJob, "PROCESS_OPS", 0)     # any model takes the child-process path
    monkeypatch.setattr(loader_job.LoadJob, "LAYOUT_NODES", 0)     # and is laid out there
    monkeypatch.setattr(graph_layout, "_CACHE", OrderedDict())     # laid out afresh, not found from another test
    calls = []
    real = loader_job.executor
    monkeypatch.setattr(loader_job, "executor", lambda: calls.append(1) or real())
    qtbot.waitUntil(loader_job.warmed, timeout=60_000)            # the window started the child as it opened
    doc = open_model(qtbot, window, corpus / CONFLICT_MODEL)
    # the TFLite graph's layout, the conversion, then the child's settle (rerun_child.settle, not waited)
    assert calls == [1, 1, 1]
    tflite = window.scenes[TFLITE]
    assert [n.pos().toTuple() for n in sorted(tflite.nodes, key=lambda n: n.index)] == \
        graph_layout._compute(tflite.vg).pos                       # the child's layout is the one made here
    assert doc.result.graph is doc.graph                           # re-attached to the window's graph
    assert len(op_keys(window.scenes[ONNX])) == len(doc.model.graph.node)
    assert {k for k, v in window.scenes[ONNX].node_by_key.items() if v.category == CONFLICT} == set(doc.inserted())


@pytest.mark.parametrize("up,nodes", [(False, 0), (True, 10_000)])
def test_a_model_opened_before_the_child_is_up_or_of_fewer_nodes_is_laid_out_here(qtbot, window, corpus, monkeypatch,
                                                                                   up, nodes):
    """Opened from the command line, the model would wait for the child to start; a graph under LAYOUT_NODES
    holds the GIL less in igraph than sending it costs: either is laid out here, converted in the child."""
    from collections import OrderedDict

    from inspector.gui import graph_layout, loader_job
    monkeypatch.setattr(loader_job.LoadJob, "PROCESS_OPS", 0)
    monkeypatch.setattr(loader_job.LoadJob, "LAYOUT_NODES", nodes)
    monkeypatch.setattr(graph_layout, "_CACHE", OrderedDict())
    monkeypatch.setattr(loader_job, "warmed", lambda: up)
    calls = []
    real = loader_job.executor
    monkeypatch.setattr(loader_job, "executor", lambda: calls.append(1) or real())
    open_model(qtbot, window, corpus / CONFLICT_MODEL)
    assert calls == [1, 1]                  # the conversion and the settle only
    tflite = window.scenes[TFLITE]
    assert [n.pos().toTuple() for n in sorted(tflite.nodes, key=lambda n: n.index)] == \
        graph_layout._compute(tflite.vg).pos


def test_far_zoomed_out_big_scene_paints_as_one_picture(qtbot):
    """Below OVERVIEW_SCALE a big scene is drawn with numpy, not 20k paint() calls; colours and selection stay."""
    from inspector.gui import graph_layout
    from inspector.gui.graph_model import Edge, Node, ViewGraph
    from inspector.gui.graph_view import GraphScene, GraphView
    n = 2500
    nodes = [Node(("op", i), "op", f"OP{i}") for i in range(n)]
    vg = ViewGraph("tflite", nodes, [Edge(i, i + 1, i, "") for i in range(n - 1)])
    scene = GraphScene(vg, graph_layout.compute(vg))
    scene.finish()
    scene.colour({("op", i): "Terminate" if i % 2 else "Implicit" for i in range(n)}, {}, {})
    scene.finish()                                          # 2,500 recolours are painted in slices
    view = GraphView(scene)
    qtbot.addWidget(view)
    view.resize(400, 600)
    view.show()
    view.fit()
    assert view.overview()
    scene.select([("op", 1234)])
    before = NodeItem.paint_calls
    img = view.viewport().grab().toImage().convertToFormat(QImage.Format_RGB32)
    assert NodeItem.paint_calls == before                  # no per-item painting
    px = np.frombuffer(img.constBits(), np.uint32, img.width() * img.height()) & 0xFFFFFF
    colours = {f"#{v:06x}" for v in np.unique(px)}
    assert {"#0072b2", "#d55e00", "#f0e442"} <= colours    # both categories and the selection ring
    view.resetTransform()                                  # readable again: items paint themselves
    assert not view.overview()
    view.viewport().grab()
    assert NodeItem.paint_calls > before


def test_onnx_loop_body_opens_in_a_tab(qtbot, window, tmp_path):
    from onnx import TensorProto, helper
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Add", ["acc_in", "step"], ["acc_out"], name="accumulate")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "acc0"], ["acc"], name="loop", body=body)], "main",
        [helper.make_tensor_value_info(v, t, s) for v, t, s in
         (("n", TensorProto.INT64, []), ("c", TensorProto.BOOL, []), ("acc0", TensorProto.FLOAT, [2, 3]),
          ("step", TensorProto.FLOAT, [2, 3]))],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2, 3])])
    path = tmp_path / "loop.onnx"
    onnx.save(helper.make_model(graph), str(path))
    open_model(qtbot, window, path, panes=(ONNX,))
    item = window.scenes[ONNX].node_by_key["loop"]
    assert item.node.subgraphs == ["body"]
    window._open_subgraphs(ONNX, item)
    tabs = window.panes[ONNX].tabs
    assert tabs.count() == 2 and tabs.tabText(1) == "loop.body"
    sub = tabs.widget(1).scene()
    assert sorted(op_keys(sub)) == ["accumulate", "keep_going"]
    assert ("in", "step") in sub.node_by_key                    # a value from the enclosing graph


def test_keyboard_zoom_and_fit(qtbot, window, corpus):
    open_model(qtbot, window, corpus / "keras/nasnetmobile_fp32.tflite")
    view = window.panes[TFLITE].main_view
    view.setFocus()
    window.active = TFLITE
    s0 = view.transform().m11()
    qtbot.keyClick(window, Qt.Key_Equal, Qt.ControlModifier)
    assert view.transform().m11() == pytest.approx(s0 * 1.25)
    qtbot.keyClick(window, Qt.Key_Minus, Qt.ControlModifier)
    assert view.transform().m11() == pytest.approx(s0)
    qtbot.keyClick(window, Qt.Key_F)
    assert view.transform().m11() < s0 / 5
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert all(visible.contains(it.sceneBoundingRect()) for it in view.scene().nodes)   # fit: every node in view
