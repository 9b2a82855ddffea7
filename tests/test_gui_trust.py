"""A window you can trust: what it shows is the current state of the current model, nothing typed is lost, and
the panes keep a sensible geometry. Each test is named after the behaviour it guards (issue 21)."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication, QComboBox, QLineEdit

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.gui.main_window import ONNX, TFLITE, MainWindow

from .test_gui_edit import make_window, open_model, settle
from .test_session import model  # noqa: F401  (conv -> reshape -> conv, input x [1, 5, 7, 3])

pytestmark = pytest.mark.gui
RNG = np.random.default_rng(21)
TYPED = "FMfm metadata"
LONG = "model/block_" + "very_long_scope_name_" * 12 + "conv"


@pytest.fixture
def window(qtbot, tmp_path):
    return make_window(qtbot, tmp_path)


def chain(tmp_path, name: str = "chain.tflite", n: int = 3, long_names: bool = False):
    """x [1, 5, 7, 3] -> n CONV_2D (4 channels) -> MEAN over H, W: non-square, all converted without Transposes."""
    b = ModelBuilder()
    t = b.input("x", [1, 5, 7, 3])
    cin = 3
    for i in range(n):
        out = b.tensor(f"{LONG}_{i}" if long_names else f"c{i}", [1, 5, 7, 4])
        w = b.const(f"w{i}", RNG.standard_normal((4, 3, 2, cin)).astype(np.float32))
        b.op("CONV_2D", [t, w, b.const(f"b{i}", np.zeros(4, np.float32))], [out],
             {"padding": "SAME", "fused_activation_function": "RELU"})
        t, cin = out, 4
    y = b.tensor("y", [1, 4])
    b.op("MEAN", [t, b.const("axes", np.array([1, 2], np.int32))], [y], {"keep_dims": False})
    b.output(y)
    return b.save(tmp_path / name)


def visible(view):
    return view.mapToScene(view.viewport().rect()).boundingRect()


# ---- what is shown is the current document ---------------------------------------------------------------------
def test_graph_panes_keep_their_opening_view_while_the_panes_settle(qtbot, window, corpus):
    """NASNet's TFLite pane was blank on first open: the view was placed for a size the pane no longer had."""
    w = window
    open_model(qtbot, w, corpus / "keras/nasnetmobile_fp32.tflite")
    total = sum(w.splitter.sizes())
    for sizes in ([total * 2 // 3, total // 3], [total // 4, total * 3 // 4]):
        w.splitter.setSizes(sizes)

        def placed() -> bool:
            return all(visible(v).contains(v.start_item().sceneBoundingRect().center())
                       for v in (w.panes[TFLITE].main_view, w.panes[ONNX].main_view))
        qtbot.waitUntil(placed, timeout=5000)


def test_tiny_graph_opens_whole_centred_and_not_blown_up(qtbot, window, tmp_path):
    w = window
    open_model(qtbot, w, chain(tmp_path, n=1))
    for which in (TFLITE, ONNX):
        view, scene = w.panes[which].main_view, w.scenes[which]
        assert view.transform().m11() <= view.MAX_FIT
        shown = visible(view)
        for it in scene.nodes:
            assert shown.contains(it.sceneBoundingRect()), (which, it.node.title)


def test_details_follow_a_pin_and_its_undo(qtbot, window, model):
    w = window
    s = open_model(qtbot, w, model)
    a = s.graph.main.tensor_by_name("a").index
    w.select(TFLITE, tensors=[a])
    assert "layout" in w.details.html() and "pinned" not in w.details.html()
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    assert "pinned by the user" in w.details.html()             # without clicking anything
    w.editor.stack.undo()
    settle(qtbot, w)
    assert "pinned" not in w.details.html()


@pytest.mark.parametrize("in_place", [True, False])
def test_rerun_keeps_the_onnx_selection_and_viewport(qtbot, window, model, monkeypatch, in_place):
    """Updated in place (live) or laid out afresh (too much changed, or a big model re-run in the child), the
    ONNX pane lost its selection and scrolled to the top-left."""
    from inspector.gui import editing
    if not in_place:
        monkeypatch.setattr(editing, "MAX_NEW_SHARE", -1.0)
    w = window
    s = open_model(qtbot, w, model)
    view = w.panes[ONNX].main_view
    name = next(n for n in w.doc.trace.op_nodes[2])
    w.select(ONNX, nodes=[name])
    view.zoom(1.6)
    view.centerOn(w.scenes[ONNX].node_by_key[name].sceneBoundingRect().center())
    centre, scale = visible(view).center(), view.transform().m11()
    from inspector.core.metadata.edits import MetadataEdits
    edits = (lambda: w.editor.pin("a", "keep"), w.editor.stack.undo,
             lambda: w.editor.edit_metadata(MetadataEdits(doc_string="kept"), "doc string"))
    for edit in edits:                              # a pin, its undo, a metadata change: each one re-runs
        scene = w.scenes[ONNX]
        edit()
        settle(qtbot, w)
        assert (w.scenes[ONNX] is scene) == in_place
        view = w.panes[ONNX].main_view
        assert w.scenes[ONNX].selected_keys()[0] == [name]
        assert view.transform().m11() == pytest.approx(scale)
        after = visible(view).center()              # (a live update may move nodes by a few pixels)
        assert abs(after.x() - centre.x()) < 10 and abs(after.y() - centre.y()) < 10
    assert s.pins == {} and s.metadata.doc_string == "kept" and w.editor.stack.count() == 1


def test_opening_another_model_clears_search_results(qtbot, window, model, tmp_path):
    w = window
    open_model(qtbot, w, model)
    w.search_field.setText("conv")
    w.search_step(+1)
    assert "of" in w.search_status.text()
    open_model(qtbot, w, chain(tmp_path, "other.tflite", n=2))
    assert w.search_status.text().strip() == "" and w._matches == []
    w.search_step(+1)
    for which, kind, key in w._matches:                         # every match is in the model now open
        scene = w.scenes[which]
        assert key in (scene.node_by_key if kind == "node" else scene.edges_by_tensor)


def test_a_file_that_fails_to_open_is_not_recent_and_the_status_clears(qtbot, window, model, tmp_path):
    w = window
    open_model(qtbot, w, model)
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00\x00\x00\x00TFL3" + b"\xff" * 40)
    w.open_path(str(bad))
    qtbot.waitUntil(lambda: w.idle and hasattr(w, "last_error"), timeout=10_000)
    assert "bad.tflite" in w.last_error
    assert not any(p.endswith("bad.tflite") for p in w.recent())
    assert w.recent()[0].endswith("m.tflite")
    assert "Reading" not in w.statusBar().currentMessage()


# ---- input never lost ---------------------------------------------------------------------------------------
def type_keys(qtbot, widget, text: str) -> None:
    """Real key events, as a user types them (through the window's shortcut map)."""
    widget.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is widget, timeout=2000)
    qtbot.keyClicks(widget, text)


def test_typed_text_reaches_every_text_field(qtbot, window, model):
    w = window
    open_model(qtbot, w, model)
    ed = w.editor.metadata
    w.editor.metadata_dock.raise_()
    w.editor.validation_dock.show()
    qtbot.wait(50)
    minimap, view = w.show_minimap.isChecked(), w.panes[TFLITE].main_view
    scale = view.transform().m11()
    type_keys(qtbot, w.search_field, TYPED)
    assert w.search_field.text() == TYPED
    # every free-text field of the window (the others take values from a list or a number) is typed into below
    free = {e for e in w.findChildren(QLineEdit) if e.isVisibleTo(w) and e.validator() is None
            and not isinstance(e.parent(), QComboBox)}
    shapes = w.editor.validation.shapes              # the Validate dock's input sizes (validate --input-shape)
    assert free == {w.search_field, ed.doc_string, ed.producer, shapes}
    for field in (ed.doc_string, ed.producer, shapes):
        field.clear()
        type_keys(qtbot, field, TYPED)
        assert field.text() == TYPED
    ed._add_row()                                     # a metadata_props key, then its value
    key = QApplication.focusWidget()
    assert isinstance(key, QLineEdit) and ed.table.isAncestorOf(key)
    qtbot.keyClicks(key, "FMfm_key")
    assert key.text() == "FMfm_key"
    qtbot.keyClick(key, Qt.Key_Tab)                   # commits the key: a re-run starts
    settle(qtbot, w)                                  # the user is slower than the re-run
    for key in TYPED:                                 # keys go where the keyboard focus is, else to the window
        qtbot.keyClicks(QApplication.focusWidget() or w, key)
    qtbot.keyClick(QApplication.focusWidget() or w, Qt.Key_Return)
    qtbot.wait(50)                                    # the cell editor commits from the event loop
    settle(qtbot, w)
    s = w.editor.session
    assert s.metadata.props == {"FMfm_key": TYPED}
    assert s.metadata.doc_string == TYPED and s.metadata.producer == TYPED
    assert w.show_minimap.isChecked() == minimap and view.transform().m11() == pytest.approx(scale)


def test_single_key_shortcuts_act_in_a_graph_pane(qtbot, window, model):
    w = window
    open_model(qtbot, w, model)
    view = w.panes[TFLITE].main_view
    view.zoom(3.0)
    before = w.show_minimap.isChecked()
    view.setFocus()
    qtbot.waitUntil(view.hasFocus, timeout=2000)
    qtbot.keyClick(view, Qt.Key_M)
    assert w.show_minimap.isChecked() != before
    qtbot.keyClick(view, Qt.Key_F)
    assert visible(view).contains(w.scenes[TFLITE].itemsBoundingRect())


# ---- geometry ---------------------------------------------------------------------------------------------
def test_details_never_squeeze_the_graph_panes(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path)
    w.resize(1280, 800)
    path = chain(tmp_path, n=3, long_names=True)
    open_model(qtbot, w, path)
    qtbot.wait(50)
    panes = sum(w.splitter.sizes())
    assert panes >= 1280 * 2 // 3
    sg = w.doc.graph.main
    w.select(TFLITE, nodes=[("op", 1)])                      # long tensor names, several attributes
    w.select(TFLITE, tensors=[op for op in sg.ops[1].outputs])
    w.select(TFLITE, nodes=[("op", i) for i in range(len(sg.ops))])      # the pin bar lists several tensors
    qtbot.wait(50)
    assert sum(w.splitter.sizes()) >= panes - 2


def test_minimap_stays_small_and_can_be_hidden(qtbot, window, corpus):
    w = window
    w.resize(900, 700)
    open_model(qtbot, w, corpus / "keras/nasnetmobile_fp32.tflite")
    qtbot.wait(300)
    view = w.panes[TFLITE].main_view
    mm, vp = view.minimap, view.viewport()
    assert mm.isVisible()
    assert mm.width() * mm.height() <= 0.15 * vp.width() * vp.height()
    w.show_minimap.trigger()
    assert not mm.isVisible()


def test_window_layout_is_remembered_and_can_be_reset(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    w = MainWindow(settings)
    qtbot.addWidget(w)
    w.show()
    w.editor.history_dock.hide()
    w.close()
    again = MainWindow(QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(again)
    again.show()
    assert again.editor.history_dock.isHidden()
    reset = next(a for m in again.menuBar().actions() if m.menu() for a in m.menu().actions()
                 if a.text().replace("&", "") == "Reset Layout")
    reset.trigger()
    assert not again.editor.history_dock.isHidden()


def test_subgraph_tabs_carry_their_whole_title(qtbot, window, corpus):
    w = window
    open_model(qtbot, w, corpus / "keras/custom_lstm_text_fp32.tflite")
    item = next(it for it in w.scenes[TFLITE].nodes if it.node.title == "WHILE")
    w._open_subgraphs(TFLITE, item)
    tabs = w.panes[TFLITE].tabs
    assert tabs.count() > 1
    for i in range(tabs.count()):
        assert tabs.tabToolTip(i).startswith(tabs.tabText(i)) and tabs.tabText(i) != ""


def test_conflict_reasons_wrap_whole_and_rows_grow_to_fit_at_1280x800(qtbot, tmp_path, corpus):
    """The reason column elided long reasons (whole only in a tooltip); now every column wraps, the rows follow the
    column widths, and meet rows say whether a Transpose was added."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QApplication
    w = make_window(qtbot, tmp_path)
    w.resize(1280, 800)
    open_model(qtbot, w, corpus / "ops/conv-reshape-multiple-conv.float32.tflite")
    table = w.conflicts
    QApplication.processEvents()

    def reason_fits() -> bool:
        """Each row is at least as tall as its reason wrapped in the column (less the style's text margins)."""
        margin = table.style().pixelMetric(table.style().PixelMetric.PM_FocusFrameHMargin) + 1
        fm, width = table.fontMetrics(), table.columnWidth(3) - 2 * margin
        for i in range(table.topLevelItemCount()):
            item = table.topLevelItem(i)
            need = fm.boundingRect(QRect(0, 0, width, 1 << 16), Qt.TextWordWrap, item.text(3)).height()
            if table.visualItemRect(item).height() < need:
                return False
        return True
    assert table.topLevelItemCount() >= 2 and table.wordWrap()
    assert sum(table.columnWidth(c) for c in range(4)) <= table.viewport().width()       # nothing off-screen
    assert table.columnWidth(3) >= 0.4 * table.viewport().width()
    assert len(max((table.topLevelItem(i).text(3) for i in range(table.topLevelItemCount())), key=len)) > 100
    qtbot.waitUntil(reason_fits, timeout=2000)
    tall = [table.visualItemRect(table.topLevelItem(i)).height() for i in range(table.topLevelItemCount())]
    assert min(tall) > 2 * table.fontMetrics().height()             # a long reason takes several lines
    w.resizeDocks([w.conflicts_dock], [table.width() * 3 // 4], Qt.Horizontal)   # narrower: taller rows, whole
    qtbot.waitUntil(lambda: reason_fits() and table.visualItemRect(table.topLevelItem(0)).height() > tall[0],
                    timeout=2000)
    for i in range(table.topLevelItemCount()):
        item = table.topLevelItem(i)
        shown = item.text(2).replace("\u200b", "")
        assert shown == (item.data(1, Qt.UserRole) or "no Transpose"), item.data(0, Qt.UserRole).kind


# ---- no work on the UI thread that grows with the model ----------------------------------------------------
def test_large_tensor_histogram_reads_a_bounded_sample(qtbot, window, tmp_path):
    from inspector.gui.panels.details import SAMPLE
    b = ModelBuilder()
    x = b.input("x", [1, 300])
    y = b.tensor("y", [1, 1200])
    weights = RNG.standard_normal((1200, 300)).astype(np.float32)       # 360,000 values > SAMPLE
    b.op("FULLY_CONNECTED", [x, b.const("fc/weights", weights), b.const("fc/bias", np.zeros(1200, np.float32))], [y])
    b.output(y)
    w = window
    open_model(qtbot, w, b.save(tmp_path / "fc.tflite"))
    w.select(TFLITE, nodes=[("op", 0)])
    plot = w.details.plot
    assert plot.isVisible()
    counts = plot.getPlotItem().listDataItems()[0].yData
    assert 0 < sum(counts) <= SAMPLE < weights.size
    assert f"{weights.size} values (histogram of {int(sum(counts))} evenly spaced)" in plot.getPlotItem().titleLabel.text


# ---- export -------------------------------------------------------------------------------------------------
def test_export_suggests_the_last_export_folder_or_beside_the_model(qtbot, window, model, tmp_path, monkeypatch):
    from pathlib import Path

    from inspector.gui import export_onnx
    asked = []
    out = tmp_path / "exports"
    out.mkdir()

    def dialog(_parent, _title, start, _filter):
        asked.append(start)
        return str(out / "m.onnx"), ""
    monkeypatch.setattr(export_onnx.QFileDialog, "getSaveFileName", dialog)
    w = window
    open_model(qtbot, w, model)
    assert export_onnx.export_dialog(w.editor) is not None
    assert Path(asked[0]).parent == Path(model).parent       # beside the model (its folder is writable)
    assert export_onnx.export_dialog(w.editor) is not None
    assert Path(asked[1]).parent == out


def test_export_refuses_gray8_on_a_three_channel_input_and_shows_the_finding(qtbot, window, model, tmp_path):
    from inspector.core.metadata import schema as ms
    from inspector.core.metadata.edits import MetadataEdits
    from inspector.gui.export_onnx import export_dialog
    w = window
    open_model(qtbot, w, model)                                 # x [1, 5, 7, 3]
    assert w.editor.edit_metadata(MetadataEdits(types={"x": "IMAGE"}, image={ms.PIXEL_FORMAT: "Gray8"}),
                                  "gray") is None
    settle(qtbot, w)
    out = tmp_path / "gray.onnx"
    asked = []
    assert export_dialog(w.editor, str(out), on_errors=lambda e: asked.append(e) or False) is None
    assert not out.exists() and not (tmp_path / "gray.report.json").exists()
    (error,) = asked
    assert any("Gray8 means 1 channel(s), but its DATA_CHANNEL axis has 3" in f.message for f in error.findings)
    assert export_dialog(w.editor, str(out)) is None and not out.exists()     # the dialog's own refusal
    assert "Gray8 means 1 channel(s)" in w.last_error and "not exported" in w.last_error


def test_export_write_failure_is_one_sentence(qtbot, window, model, tmp_path):
    from inspector.gui.export_onnx import export_dialog
    w = window
    open_model(qtbot, w, model)
    assert export_dialog(w.editor, str(tmp_path / "missing" / "m.onnx")) is None
    assert "\n" not in w.last_error and "Traceback" not in w.last_error and "missing" in w.last_error


def test_big_model_exports_in_the_child_process_with_the_same_bytes(qtbot, window, model, tmp_path, monkeypatch):
    from inspector.gui import export_onnx
    w = window
    open_model(qtbot, w, model)
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    here = tmp_path / "here.onnx"
    assert export_onnx.export_dialog(w.editor, str(here)) is not None
    monkeypatch.setattr(export_onnx, "BIG_BYTES", 0)          # every model counts as big
    child = tmp_path / "child.onnx"
    assert export_onnx.export_dialog(w.editor, str(child)) is None and w.editor.exporting
    qtbot.waitUntil(lambda: not w.editor.exporting, timeout=120_000)
    assert child.read_bytes() == here.read_bytes()
    assert (tmp_path / "child.report.json").is_file()


def test_closing_during_a_child_export_waits_for_it_and_its_report(qtbot, window, model, tmp_path, monkeypatch):
    """The window closed at once: the child's export went on, but its report, which the window writes, never
    was."""
    import threading

    from inspector.gui import export_onnx
    w = window
    open_model(qtbot, w, model)
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    monkeypatch.setattr(export_onnx, "BIG_BYTES", 0)          # every model counts as big: exported in the child
    gate, run = threading.Event(), export_onnx.ExportJob.run
    monkeypatch.setattr(export_onnx.ExportJob, "run", lambda job: (gate.wait(60), run(job)))
    out = tmp_path / "closing.onnx"
    assert export_onnx.export_dialog(w.editor, str(out)) is None and w.editor.exporting
    w.close()
    assert w.isVisible() and "Closing once the export is written" in w.statusBar().currentMessage()
    gate.set()
    qtbot.waitUntil(lambda: not w.isVisible(), timeout=120_000)
    assert out.is_file() and (tmp_path / "closing.report.json").is_file()


def test_big_weights_stay_in_the_child_yet_details_validation_and_export_work(qtbot, window, tmp_path, monkeypatch):
    from inspector.cli import main as cli
    from inspector.gui import export_onnx, loader_job
    monkeypatch.setattr(loader_job, "PROCESS_BYTES", 0)      # every file counts as big: converted in the child
    b = ModelBuilder()
    x = b.input("x", [1, 400])
    y = b.tensor("y", [1, 700])
    weights = RNG.standard_normal((700, 400)).astype(np.float32)           # 1.12 MB: left out of the window's copy
    b.op("FULLY_CONNECTED", [x, b.const("fc/weights", weights), b.const("fc/bias", np.ones(700, np.float32))], [y])
    b.output(y)
    path = b.save(tmp_path / "fc.tflite")
    w = window
    open_model(qtbot, w, path)
    assert getattr(w.doc.result, "weights_left_out", False)
    assert max(len(t.raw_data) for t in w.doc.model.graph.initializer) < weights.nbytes
    w.select(TFLITE, nodes=[("op", 0)])                          # the histogram reads the TFLite constant
    assert sum(w.details.plot.getPlotItem().listDataItems()[0].yData) > 0
    panel = w.editor.validation
    w.editor.validate_action.trigger()
    qtbot.waitUntil(lambda: not panel.running, timeout=120_000)
    assert panel.validation is not None and panel.validation.ok, panel.status.text()
    out = tmp_path / "window.onnx"
    export_onnx.export_dialog(w.editor, str(out))
    qtbot.waitUntil(lambda: not w.editor.exporting, timeout=120_000)
    assert cli(["convert", str(path), "-o", str(tmp_path / "cli.onnx")]) == 0
    assert out.read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_float16_graph_is_drawn_in_a_straight_column(qtbot, window, tmp_path):
    """float16 weights reach each op through a DEQUANTIZE: drawn as nodes they pushed the column sideways."""
    b = ModelBuilder()
    t, cin = b.input("x", [1, 5, 7, 3]), 3
    n = 4
    for i in range(n):
        half = b.const(f"w{i}/fp16", RNG.standard_normal((4, 3, 2, cin)).astype(np.float16))
        w = b.tensor(f"w{i}", [4, 3, 2, cin])
        b.op("DEQUANTIZE", [half], [w])
        out = b.tensor(f"c{i}", [1, 5, 7, 4])
        b.op("CONV_2D", [t, w, b.const(f"b{i}", np.zeros(4, np.float32))], [out], {"padding": "SAME"})
        t, cin = out, 4
    b.output(t)
    w = window
    open_model(qtbot, w, b.save(tmp_path / "fp16.tflite"))
    scene = w.scenes[TFLITE]
    convs = [it for it in scene.nodes if it.node.title == "CONV_2D"]
    assert len(convs) == n and len({round(it.pos().x()) for it in convs}) == 1
    assert all(any(line.endswith("float16") for line in it.node.lines) for it in convs)
    dequantize = next(i for i, op in enumerate(w.doc.graph.main.ops) if op.opcode == "DEQUANTIZE")
    w.select(TFLITE, nodes=[("op", dequantize)])                # selects the op it is drawn in
    assert scene.selected_keys()[0] == [("op", dequantize + 1)]


def test_a_child_export_reports_the_model_it_exported_even_after_another_model_opened(qtbot, window, model,
                                                                                      tmp_path, monkeypatch):
    """The report was written when the child finished, from whatever the window held then: another model's."""
    import json

    from inspector.gui import export_onnx
    w = window
    first = open_model(qtbot, w, model)
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    monkeypatch.setattr(export_onnx, "BIG_BYTES", 0)          # every model counts as big: exported in the child
    out = tmp_path / "first.onnx"
    assert export_onnx.export_dialog(w.editor, str(out)) is None and w.editor.exporting
    other = open_model(qtbot, w, chain(tmp_path, "other.tflite"))             # while the child still exports
    qtbot.waitUntil(lambda: out.is_file() and not w.editor.exporting, timeout=120_000)
    report = json.loads((tmp_path / "first.report.json").read_text())
    assert report["model"] == first.path != other.path and report["pins"] == {"a": "keep"}
    assert report["changes"]["pins"] == {"a": "keep"} and report["transposes"] == first.result.transposes
