"""Small things a person sees in the window, each driven by real input (QTest mouse and key events on the real
widgets) and read from what is painted or shown: issue 36, items 4-6."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt, QTimer
from PySide6.QtGui import QContextMenuEvent, QPainterPathStroker
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QFileDialog, QLabel, QLineEdit

from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.gui.graph_items import EdgeItem
from inspector.gui.main_window import ONNX, TFLITE
from inspector.gui.palette import palette
from inspector.resources import path as resource

from .conftest import ROOT
from .test_gui_edit import open_model, settle, window  # noqa: F401  (fixture)
from .test_pair import hand_onnx, tflite_model

pytestmark = pytest.mark.gui
SAMPLE = "sample.tflite"


def sample_path():
    return resource(SAMPLE)


def click(view, scene_point: QPointF, button=Qt.LeftButton, modifier=Qt.NoModifier) -> None:
    QTest.mouseClick(view.viewport(), button, modifier, view.mapFromScene(scene_point))


def test_a_selected_curved_edge_is_a_line_not_a_filled_shape(qtbot, window):  # noqa: F811
    """The edge painted before a selected edge leaves its arrowhead's brush on the painter (the view does not save
    painter state per item): the selection halo must not fill the region between the curve and its chord."""
    w = window
    open_model(qtbot, w, sample_path())
    scene, view = w.scenes[ONNX], w.panes[ONNX].main_view
    scene.finish()

    def bulge(e: EdgeItem) -> float:
        r = e.path().boundingRect()
        return min(r.width(), r.height())
    edge = max(scene.edges, key=bulge)
    assert bulge(edge) > 30                                 # a curve with room inside its hull
    view.resetTransform()
    view.centerOn(edge.path().boundingRect().center())
    mid = edge.path().pointAtPercent(0.5)
    assert scene.itemAt(mid, view.transform()) is edge
    click(view, mid)
    assert scene.selectedItems() == [edge]
    image = view.viewport().grab().toImage()

    fill = edge.path()                                      # a painter filling the open path closes it: this region
    stroker = QPainterPathStroker()
    stroker.setWidth(24)                                    # the halo (7 px) and the antialiased line, with margin
    near = stroker.createStroke(edge.path())
    r = fill.boundingRect()
    background, checked = palette().background, 0
    for i in range(1, 40):
        for j in range(1, 40):
            p = QPointF(r.left() + r.width() * i / 40, r.top() + r.height() * j / 40)
            if not fill.contains(p) or near.contains(p) or scene.items(p):     # only where nothing else is
                continue
            v = view.mapFromScene(p)
            if not image.rect().contains(v):
                continue
            checked += 1
            assert image.pixelColor(v).name() == background.name(), (p, image.pixelColor(v).name())
    assert checked > 20


# ---- helpers: the window as a person drives it ----------------------------------------------------------------
def active(qtbot, w):
    """Keys go to the active window (a shortcut of a window that is not active does nothing)."""
    qtbot.waitExposed(w)
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w)


def file_dialogs(answers: list, seen: list) -> None:
    """Answer the next file dialogs as a person does: note the folder each opens in, type a path and press Enter
    (None: press Escape)."""
    tries = [1500]                      # 30 s, then it stops (a dialog that never came fails the test itself)

    def poll():
        d = QApplication.activeModalWidget()
        if not isinstance(d, QFileDialog):
            tries[0] -= 1
            if tries[0] > 0:
                QTimer.singleShot(20, poll)
            return
        seen.append(d.directory().absolutePath())
        answer = answers.pop(0)
        if answer is None:
            QTest.keyClick(d, Qt.Key_Escape)
        else:
            edit = d.findChild(QLineEdit, "fileNameEdit")
            edit.setText(str(answer))
            QTest.keyClick(edit, Qt.Key_Return)
        if answers:
            QTimer.singleShot(20, poll)
    QTimer.singleShot(20, poll)


def open_by_dialog(qtbot, w, path, key=Qt.Key_O, modifiers=Qt.ControlModifier, more=()) -> list:
    """Ctrl+O (or another key), the file typed into the dialog; waits for the model. The dialogs' folders."""
    seen: list = []
    active(qtbot, w)
    old = w.editor.session
    file_dialogs([path, *more], seen)
    QTest.keyClick(w, key, modifiers)
    qtbot.waitUntil(lambda: w.editor.session is not None and w.editor.session is not old, timeout=120_000)
    settle(qtbot, w)
    return seen


def conflict_model(path) -> str:
    """x [1, 6, 10, 3] -> CONV_2D -> RESHAPE [1, 240]: the reshape needs the TFLite layout back, one Transpose."""
    b = ModelBuilder()
    x = b.input("x", [1, 6, 10, 3], "float32")
    c = b.tensor("c", [1, 6, 10, 4], "float32")
    b.op("CONV_2D", [x, b.const("w", np.ones((4, 1, 1, 3), np.float32)), b.const("b", np.zeros(4, np.float32))],
         [c], {"padding": "SAME"})
    y = b.tensor("y", [1, 240], "float32")
    b.op("RESHAPE", [c, b.const("s", np.array([1, 240], np.int32))], [y], {"new_shape": [1, 240]})
    b.output(y)
    path.write_bytes(b.build())
    return str(path)


# ---- item 6 ------------------------------------------------------------------------------------------------
def test_one_transpose_and_one_conflict_read_in_the_singular(qtbot, window, tmp_path):  # noqa: F811
    w = window
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "one.tflite"))
    assert w.statusBar().currentMessage() == ("one.tflite: 2 TFLite ops → 3 ONNX nodes, 1 Transpose, "
                                              "1 conflict")


def test_the_tflite_tab_and_the_status_line_count_the_same_ops(qtbot, window, corpus):  # noqa: F811
    """mobilenetv2_fp16: 170 ops, 105 of them DEQUANTIZEs of weights drawn inside their consumers."""
    w = window
    open_by_dialog(qtbot, w, corpus / "keras/mobilenetv2_fp16.tflite")
    tabs = w.panes[TFLITE].tabs
    assert tabs.tabText(0) == "TFLite: mobilenetv2_fp16.tflite (170 ops)"
    assert w.statusBar().currentMessage().startswith("mobilenetv2_fp16.tflite: 170 TFLite ops → ")
    assert "65 boxes drawn: 105 DEQUANTIZEs of weights" in tabs.tabToolTip(0)


def test_open_pair_names_the_onnx_file_and_ctrl_r_validates_at_once(qtbot, window, tmp_path):  # noqa: F811
    w = window
    tfl = tflite_model(tmp_path / "m.tflite")
    other = tmp_path / "other.onnx"
    hand_onnx(read_tflite(tfl), other, softmax_axis=2)
    open_by_dialog(qtbot, w, tfl, Qt.Key_O, Qt.ControlModifier | Qt.ShiftModifier, more=[other])
    assert w.panes[ONNX].tabs.tabText(0).startswith("ONNX: other.onnx (")
    QTest.keyClick(w, Qt.Key_R, Qt.ControlModifier)
    panel = w.editor.validation
    assert panel.running and w.editor.validation_dock.isVisible()
    qtbot.waitUntil(lambda: not panel.running, timeout=120_000)
    assert panel.validation is not None


def test_search_text_does_not_carry_over_to_the_next_model(qtbot, window, tmp_path):  # noqa: F811
    w = window
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "a.tflite"))
    QTest.keyClick(w, Qt.Key_F, Qt.ControlModifier)
    assert w.search_field.hasFocus()
    QTest.keyClicks(w.search_field, "RESHAPE")
    QTest.keyClick(w.search_field, Qt.Key_Return)
    assert w.search_status.text().strip() == "1 of 3"           # the op, its output tensor, the ONNX node
    open_by_dialog(qtbot, w, sample_path())
    assert w.search_field.text() == "" and w.search_status.text().strip() == ""


def test_open_and_export_start_beside_the_model_never_in_the_package(qtbot, window, tmp_path):  # noqa: F811
    w = window
    active(qtbot, w)
    QTest.mouseClick(w.start_page.sample_button, Qt.LeftButton)      # the bundled sample, from the start page
    qtbot.waitUntil(lambda: w.editor.session is not None, timeout=120_000)
    settle(qtbot, w)

    def folder(key) -> Path:
        seen: list = []
        active(qtbot, w)
        file_dialogs([None], seen)
        QTest.keyClick(w, key, Qt.ControlModifier)
        assert len(seen) == 1
        return Path(seen[0])
    assert folder(Qt.Key_O).resolve() != sample_path().parent.resolve()
    (tmp_path / "models").mkdir()
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "models" / "m.tflite"))
    assert folder(Qt.Key_O) == tmp_path / "models"                     # beside the model open now
    assert folder(Qt.Key_E) == tmp_path / "models"                     # Export ONNX too


def test_escape_clears_the_selection_in_both_panes(qtbot, window):  # noqa: F811
    w = window
    open_by_dialog(qtbot, w, sample_path())
    scene, view = w.scenes[TFLITE], w.panes[TFLITE].main_view
    scene.finish()
    conv = next(it for it in scene.nodes if it.node.title == "CONV_2D")
    view.centerOn(conv)
    click(view, conv.sceneBoundingRect().center())
    assert scene.selectedItems() == [conv] and w.scenes[ONNX].selectedItems()
    assert "CONV_2D" in w.details.html()
    QTest.keyClick(view.viewport(), Qt.Key_Escape)
    assert not scene.selectedItems() and not w.scenes[ONNX].selectedItems()
    assert w.details.html().startswith("Select an op, node or tensor")


def test_at_a_2x_scale_factor_the_window_fits_the_screen(tmp_path):
    """A 2560x1440 screen at QT_SCALE_FACTOR=2 is 1280x720 logical pixels: the window opens inside it."""
    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"screens": [{"name": "s", "x": 0, "y": 0, "width": 2560, "height": 1440,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    script = tmp_path / "show.py"
    script.write_text(textwrap.dedent(f"""
        import json
        from PySide6.QtCore import QSettings
        from PySide6.QtWidgets import QApplication
        if __name__ == "__main__":
            app = QApplication([])
            from inspector.gui.main_window import MainWindow
            w = MainWindow(QSettings({str(tmp_path / 's.ini')!r}, QSettings.IniFormat), convert=False)
            w.show()
            app.processEvents()
            room, frame = w.screen().availableGeometry(), w.frameGeometry()
            print(json.dumps([room.getRect(), frame.getRect()]))
    """))
    env = dict(os.environ, QT_SCALE_FACTOR="2", QT_QPA_PLATFORM=f"offscreen:configfile={config}",
               PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    (rx, ry, rw, rh), (fx, fy, fw, fh) = json.loads(r.stdout.splitlines()[-1])
    assert (rw, rh) == (1280, 720)
    assert rx <= fx and ry <= fy and fx + fw <= rx + rw and fy + fh <= ry + rh


def right_click(widget, pos) -> None:
    """A right-click as the platform delivers it: the press, then the context menu event it makes."""
    QTest.mousePress(widget, Qt.RightButton, Qt.NoModifier, pos)
    QApplication.sendEvent(widget, QContextMenuEvent(QContextMenuEvent.Mouse, pos, widget.mapToGlobal(pos)))
    QTest.mouseRelease(widget, Qt.RightButton, Qt.NoModifier, pos)


def test_conflict_fix_offers_only_fewer_transposes_in_a_menu_inside_the_window(qtbot, window, tmp_path):  # noqa: F811
    """conv -> reshape: the one Transpose is the best plan; a pin there only moves it. At the right edge of the
    Conflicts dock the menu opens inside the window."""
    w = window
    w.resize(780, 700)
    w.move(0, 0)
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "one.tflite"))
    w.conflicts_dock.raise_()
    panel = w.conflicts
    qtbot.waitUntil(lambda: panel.topLevelItemCount() == 1 and panel.isVisible())
    rect = panel.visualItemRect(panel.topLevelItem(0))
    right_click(panel.viewport(), QPoint(panel.viewport().width() - 3, rect.center().y()))
    menu = w.editor.last_menu
    qtbot.waitUntil(menu.isVisible)
    assert [a.text() for a in menu.actions()] == ["No single pin removes this conflict with fewer Transposes"]
    assert w.frameGeometry().contains(menu.geometry()), (menu.geometry(), w.frameGeometry())
    QTest.keyClick(menu, Qt.Key_Escape)


def click_menu_item(menu, text: str) -> None:
    """Click the item whose text starts with `text` in an open menu."""
    action = next(a for a in menu.actions() if a.text().startswith(text))
    assert action.isEnabled(), text
    QTest.mouseClick(menu, Qt.LeftButton, Qt.NoModifier, menu.actionGeometry(action).center())


def dark_pixels(view, centre: QPointF, radius: float) -> int:
    image = view.viewport().grab().toImage()
    c = view.mapFromScene(centre)
    return sum(image.pixelColor(c.x() + dx, c.y() + dy).lightness() < 60
               for dx in range(-int(radius), int(radius) + 1) for dy in range(-int(radius), int(radius) + 1)
               if dx * dx + dy * dy <= radius * radius)


def test_a_pinned_tensor_is_marked_on_its_edge(qtbot, window, tmp_path):  # noqa: F811
    w = window
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "one.tflite"))
    scene, view = w.scenes[TFLITE], w.panes[TFLITE].main_view
    scene.finish()
    x = w.editor.session.graph.main.inputs[0]
    edge = scene.edges_by_tensor[x][0]
    view.resetTransform()
    view.centerOn(edge.pin_marker())
    before = dark_pixels(view, edge.pin_marker(), 5)
    at = view.mapFromScene(edge.path().pointAtPercent(0.5))
    right_click(view.viewport(), at)
    menu = w.editor.last_menu
    qtbot.waitUntil(menu.isVisible)
    click_menu_item(menu, "keep as is")
    settle(qtbot, w)
    assert w.editor.session.pins == {"x": "keep"}
    edge = scene.edges_by_tensor[x][0]
    assert edge.pin == "keep" and "Pinned to keep" in edge.toolTip()
    assert dark_pixels(view, edge.pin_marker(), 5) > before + 30
    active(qtbot, w)
    QTest.keyClick(w, Qt.Key_Z, Qt.ControlModifier)                    # undo: the marker goes
    settle(qtbot, w)
    assert w.editor.session.pins == {}
    assert scene.edges_by_tensor[x][0].pin == ""
    assert dark_pixels(view, edge.pin_marker(), 5) == before


def test_an_empty_validation_dock_leaves_the_graphs_the_room_at_1280x720(qtbot, window, tmp_path):  # noqa: F811
    """Validate a model (the plots take their room), then open another: the dock stays, empty, one line tall."""
    w = window
    w.resize(1280, 720)
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "a.tflite"))
    QTest.keyClick(w, Qt.Key_R, Qt.ControlModifier)
    dock, panel = w.editor.validation_dock, w.editor.validation
    qtbot.waitUntil(lambda: not panel.running and panel.validation is not None, timeout=120_000)
    qtbot.waitUntil(lambda: dock.height() >= 200)                 # the plots: a third of the window
    open_by_dialog(qtbot, w, sample_path())
    assert dock.isVisible() and panel.validation is None
    qtbot.waitUntil(lambda: dock.height() < 90)
    assert w.panes[TFLITE].height() > 450


# ---- item 5 ------------------------------------------------------------------------------------------------
def choose(qtbot, combo, text: str) -> None:
    """Open the drop-down with a click on its arrow and click the item `text` in the popup."""
    combo.window().activateWindow()
    QTest.mouseClick(combo, Qt.LeftButton, Qt.NoModifier, QPoint(combo.width() - 8, combo.height() // 2))
    view = combo.view()
    qtbot.waitUntil(view.isVisible)
    row = combo.findText(text)
    assert row >= 0, text
    index = view.model().index(row, 0)
    view.scrollTo(index)
    QTest.qWait(QApplication.doubleClickInterval() + 50)       # a release sooner is taken as the opening click's
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, view.visualRect(index).center())
    qtbot.waitUntil(lambda: not view.isVisible())


def metadata_dock(qtbot, w):
    w.editor.metadata_dock.show()
    w.editor.metadata_dock.raise_()
    panel = w.editor.metadata
    qtbot.waitUntil(lambda: not panel.pending and "x" in panel.types and panel.types["x"].isVisible())
    return panel


def test_a_wrong_pixel_format_chosen_from_the_drop_down_is_reported_at_once(qtbot, window, tmp_path):  # noqa: F811
    """Gray8 on a 3-channel input: the finding shows while the focus is still on the drop-down, under its field."""
    from inspector.core.metadata import schema as ms
    w = window
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "rgb.tflite"))
    panel = metadata_dock(qtbot, w)
    choose(qtbot, panel.types["x"], "IMAGE")
    qtbot.waitUntil(lambda: w.editor.idle, timeout=60_000)
    view = w.panes[TFLITE].main_view                              # the focus leaves the dock: its fields rebuild
    QTest.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, QPoint(5, 5))
    qtbot.waitUntil(lambda: not panel.editing() and not panel.stale and not panel.pending)
    assert panel.image[ms.PIXEL_FORMAT].isEnabled()
    combo = panel.image[ms.PIXEL_FORMAT]
    choose(qtbot, combo, "Gray8")
    assert w.editor.session.metadata.image.get(ms.PIXEL_FORMAT) == "Gray8"       # applied at once
    qtbot.waitUntil(lambda: w.editor.idle, timeout=60_000)
    assert panel.editing()                                      # the focus is still on the drop-down
    items = [panel.findings.item(i).text() for i in range(panel.findings.count())]
    assert any("Gray8 means 1 channel(s)" in t for t in items), items
    near = panel.field_findings[ms.PIXEL_FORMAT]
    assert near.count() and "Gray8 means 1 channel(s)" in " ".join(
        lab.text() for lab in near.itemAt(0).widget().findChildren(QLabel))


def test_a_refused_keystroke_is_said_beside_its_field_until_the_text_changes(qtbot, window, tmp_path):  # noqa: F811
    w = window
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "rgb.tflite"))
    panel = metadata_dock(qtbot, w)
    axis = panel.dims["x"][2]
    edit = axis.lineEdit()
    QTest.mouseClick(edit, Qt.LeftButton)
    edit.selectAll()
    QTest.keyClick(edit, Qt.Key_Delete)
    QTest.keyClicks(edit, "DATA_Q")                              # no dimension denotation starts so
    assert edit.text() == "DATA_"
    assert axis.refusal.isVisible() and axis.refusal.text().startswith("'DATA_Q' refused: allowed values for "
                                                                       "dimension denotation are ")
    assert not panel.hint.isVisible()                            # not at the top of the dock
    others = [c for c in panel.dims["x"] if c is not axis] + list(panel.types.values())
    assert not any(c.refusal.isVisible() for c in others)
    QTest.keyClicks(edit, "F")                                   # DATA_F…: the message goes
    assert not axis.refusal.isVisible()


def test_transposes_a_pin_inserts_keep_a_gap_to_their_neighbours(qtbot, window):  # noqa: F811
    """Pin the sample's CONCATENATION output as it is (right-click the op, "keep as is"): the Transposes that brings
    are placed on the edges they split, each with room around it, overlapping nothing."""
    from inspector.gui.live_layout import MIN_GAP
    w = window
    open_by_dialog(qtbot, w, sample_path())
    before = {it.node.key for it in w.scenes[ONNX].nodes}
    scene, view = w.scenes[TFLITE], w.panes[TFLITE].main_view
    scene.finish()
    concat = next(it for it in scene.nodes if it.node.title == "CONCATENATION")
    view.centerOn(concat)
    right_click(view.viewport(), view.mapFromScene(concat.sceneBoundingRect().center()))
    menu = w.editor.last_menu
    qtbot.waitUntil(menu.isVisible)
    click_menu_item(menu, "keep as is")
    settle(qtbot, w)
    onnx = w.scenes[ONNX]
    onnx.finish()
    new = [it for it in onnx.nodes if it.node.key not in before]
    assert new and all(it.node.title == "Transpose" for it in new)
    for it in new:
        r = it.mapRectToScene(it.rect)
        for other in onnx.nodes:
            if other is not it:
                o = other.mapRectToScene(other.rect)
                gap = max(o.left() - r.right(), r.left() - o.right(), o.top() - r.bottom(), r.top() - o.bottom())
                assert gap >= MIN_GAP, (it.node.key, other.node.key, gap)


def _choose_scheme(w, qtbot, text: str) -> None:
    """View › Colour scheme › `text`, each clicked in its open menu."""
    menu = w.menu("view")
    menu.popup(w.mapToGlobal(w.rect().center()))
    qtbot.waitUntil(menu.isVisible)
    sub = next(a for a in menu.actions() if a.menu() is not None and a.text().replace("&", "") == "Colour scheme")
    QTest.mouseClick(menu, Qt.LeftButton, Qt.NoModifier, menu.actionGeometry(sub).center())
    qtbot.waitUntil(sub.menu().isVisible)
    click_menu_item(sub.menu(), text)


def test_the_validation_plots_follow_the_colour_scheme(qtbot, window, tmp_path):  # noqa: F811
    """Validated, then View › Colour scheme › Dark: the Validation dock's plots (pyqtgraph's white) and the error
    overlay's colour key turn dark with dark ink, and light again with Light."""
    from inspector.gui.palette import DARK, LIGHT
    w = window
    open_by_dialog(qtbot, w, conflict_model(tmp_path / "one.tflite"))
    panel = w.editor.validation
    w.editor.validation_dock.show()
    w.editor.validation_dock.raise_()
    QTest.mouseClick(panel.run_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.validation is not None and not panel.running, timeout=120_000)
    try:
        for text, scheme in (("&Dark", DARK), ("&Light", LIGHT)):
            _choose_scheme(w, qtbot, text)
            pal = palette()
            assert pal.dark == (scheme == DARK)
            for widget in (panel.per_op, panel.hist, panel.scale):
                image = widget.grab().toImage()
                corner = image.pixelColor(2, 2)
                assert (corner.lightness() < 80) == (scheme == DARK), (text, widget, corner.name())
            for plot in (panel.per_op, panel.hist):
                assert plot.getAxis("left").textPen().color() == pal.ink
            assert all(c.opts["pen"].color() == pal.ink for c in panel.hist.listDataItems())
    finally:
        w.scheme.choose(LIGHT)                  # (cleanup: the palette module's scheme is the process's)
