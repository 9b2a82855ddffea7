"""The window's editing side, offscreen: pins with undo/redo, metadata through the widgets, export, session files,
autosave and restore, validation plots. Everything is driven through the real window and its widgets."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

from PySide6.QtCore import QSettings, QStandardPaths, Qt  # noqa: E402

from inspector.cli import main as cli  # noqa: E402
from inspector.core.metadata import schema as ms  # noqa: E402
from inspector.core.metadata.edits import MetadataEdits  # noqa: E402
from inspector.gui.autosave import Autosave  # noqa: E402
from inspector.gui.export_onnx import export_dialog, report_path  # noqa: E402
from inspector.gui.main_window import ONNX, TFLITE, MainWindow  # noqa: E402
from inspector.gui.palette import CONFLICT  # noqa: E402
from inspector.gui.pin_menu import CustomPinDialog  # noqa: E402

from .test_session import model  # noqa: E402,F401  (conv -> reshape -> conv, input x [1, 5, 7, 3])

pytestmark = pytest.mark.gui
CONFLICT_MODEL = "ops/conv-reshape-multiple-conv.float32.tflite"


def make_window(qtbot, tmp_path) -> MainWindow:
    QStandardPaths.setTestModeEnabled(True)
    w = MainWindow(QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    w.editor.autosave = Autosave(tmp_path / "autosave")
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    return w


@pytest.fixture
def window(qtbot, tmp_path):
    return make_window(qtbot, tmp_path)


def settle(qtbot, w) -> None:
    qtbot.waitUntil(lambda: w.idle and w.editor.idle and ONNX in w.scenes, timeout=120_000)


def open_model(qtbot, w, path):
    w.open_path(str(path))
    qtbot.waitUntil(lambda: w.editor.session is not None, timeout=120_000)
    settle(qtbot, w)
    return w.editor.session


def validated(qtbot, w):
    """Validate from the window's action and wait until the panel has the result (or failed); the panel."""
    panel = w.editor.validation
    w.editor.validate_action.trigger()
    qtbot.waitUntil(lambda: not panel.running, timeout=120_000)
    return panel


def conflict_nodes(w) -> set:
    return {it.node.key for it in w.scenes[ONNX].nodes if it.category == CONFLICT}


def trigger(menu, text: str) -> None:
    action = next(a for a in menu.actions() if a.text().split("  —  ")[0] == text)   # after it: what-if cost
    assert action.isEnabled(), text
    action.trigger()


def test_pin_from_the_details_bar_undo_redo(qtbot, window, corpus):
    w = window
    s = open_model(qtbot, w, corpus / CONFLICT_MODEL)
    sg = s.graph.main
    x = sg.inputs[0]
    assert w.doc.result.transposes == 2
    before_onnx = conflict_nodes(w)
    conv = w.scenes[TFLITE].node_by_key[("op", 0)]
    colour_before = conv.quick_fill.name()
    assert len(before_onnx) == 2

    w.select(TFLITE, tensors=[x])                 # selecting the input's edge shows the pin bar for it
    assert w.editor.pin_bar.isVisible() and w.editor.pin_bar.tensors == [x]
    w.editor.pin_bar._fill()
    trigger(w.editor.pin_bar.menu, "keep as is")
    settle(qtbot, w)
    assert s.pins == {"input": "keep"}
    assert w.doc.result.transposes == 3
    assert w.statusBar().currentMessage() == "1 Transpose added, 5 conflicts left"
    after_onnx = conflict_nodes(w)
    assert len(after_onnx) == 3 and after_onnx > before_onnx
    conv = w.scenes[TFLITE].node_by_key[("op", 0)]
    assert conv.marker and conv.quick_fill.name() != colour_before       # the conv now reads a conflict
    assert w.editor.stack.count() == 1 and w.editor.history.model().rowCount() == 2

    w.editor.undo_action.trigger()
    settle(qtbot, w)
    assert s.pins == {} and w.doc.result.transposes == 2
    assert conflict_nodes(w) == before_onnx
    assert w.scenes[TFLITE].node_by_key[("op", 0)].quick_fill.name() == colour_before
    assert w.statusBar().currentMessage() == "1 Transpose removed, 4 conflicts left"

    w.editor.redo_action.trigger()
    settle(qtbot, w)
    assert s.pins == {"input": "keep"} and w.doc.result.transposes == 3


def test_context_menu_custom_permutation_and_clear_all(qtbot, window, model):
    w = window
    s = open_model(qtbot, w, model)
    y = s.graph.main.tensor_by_name("y").index
    dlg = CustomPinDialog.ask(w.editor, y)
    dlg.field.setText("0,1,9,2")
    assert not dlg.buttons.button(dlg.buttons.StandardButton.Ok).isEnabled()
    assert "permutation" in dlg.preview.text()
    dlg.field.setText("0,2,1,3")
    assert dlg.preview.text().startswith("ONNX shape 1×4×7×2")        # y is [1, 7, 4, 2] in TFLite
    dlg.accept()
    settle(qtbot, w)
    assert s.pins == {"y": "0,2,1,3"}
    assert s.result.plan.pins[y] == (0, 2, 1, 3)
    out = next(vi for vi in s.result.model.graph.output if vi.name == "y")
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 4, 7, 2]
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    assert set(s.pins) == {"y", "a"}
    view = w.panes[TFLITE].main_view             # right-click on y's edge: the context menu
    view.fit()
    edge = w.scenes[TFLITE].edges_by_tensor[y][0]
    view.customContextMenuRequested.emit(view.mapFromScene(edge.path().pointAtPercent(0.5)))
    menu = w.editor.last_menu
    assert menu is not None and any(a.text() == "Custom permutation…" and a.isChecked() for a in menu.actions())
    trigger(menu, "Clear all pins (2)")
    settle(qtbot, w)
    assert s.pins == {} and s.result.transposes == 2
    w.editor.stack.undo()
    settle(qtbot, w)
    assert set(s.pins) == {"y", "a"}


def test_a_refused_pin_is_not_pushed(qtbot, window, model):
    w = window
    s = open_model(qtbot, w, model)
    assert not w.editor.pin("a", "sideways")
    assert w.editor.stack.count() == 0 and s.pins == {}
    assert "not understood" in w.last_error


def type_into(qtbot, combo, text: str) -> None:
    combo.lineEdit().selectAll()
    combo.lineEdit().del_()
    qtbot.keyClicks(combo.lineEdit(), text)


def test_metadata_through_the_widgets_export_and_reload(qtbot, window, model, tmp_path):
    w = window
    s = open_model(qtbot, w, model)
    ed = w.editor.metadata
    assert not ed.image[ms.PIXEL_FORMAT].isEnabled()          # no IMAGE tensor yet
    type_into(qtbot, ed.types["x"], "image")
    qtbot.keyClick(ed.types["x"].lineEdit(), Qt.Key_Return)
    settle(qtbot, w)
    ed = w.editor.metadata                                     # rebuilt from the re-run's model
    assert ed.types["x"].value == "IMAGE" and ed.image[ms.PIXEL_FORMAT].isEnabled()

    # an invalid value is refused as it is typed, and nothing is pushed
    count = w.editor.stack.count()
    fmt = ed.image[ms.PIXEL_FORMAT]
    # a rebuilt body is put on screen by its layout on the next event-loop turn: a person types once it shows
    qtbot.waitUntil(fmt.isVisible, timeout=30_000)
    type_into(qtbot, fmt, "rgb9")
    assert fmt.lineEdit().text() == "rgb"
    assert fmt.refusal.isVisible() and "Rgb8" in fmt.refusal.text() and "Bgra8" in fmt.refusal.text()   # beside it
    qtbot.keyClick(fmt.lineEdit(), Qt.Key_Return)
    assert w.editor.stack.count() == count and s.metadata.image == {}

    type_into(qtbot, fmt, "bgr8")
    qtbot.keyClick(fmt.lineEdit(), Qt.Key_Return)
    settle(qtbot, w)
    ed = w.editor.metadata
    gamma = ed.image[ms.GAMMA]
    i = gamma.findText("SRGB")
    gamma.setCurrentIndex(i)
    gamma.activated.emit(i)
    settle(qtbot, w)
    ed = w.editor.metadata
    axes = ed.dims["x"]
    assert [c.value for c in axes] == ["DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_FEATURE"]
    assert ed.sources.get("dims:x") == "from its layout"
    ed._add_row()
    ed.table.item(ed.table.rowCount() - 1, 1).setText("me")
    ed.table.item(ed.table.rowCount() - 1, 0).setText("model_author")
    settle(qtbot, w)
    ed = w.editor.metadata
    ed.doc_string.setText("a test model")
    ed.doc_string.editingFinished.emit()
    settle(qtbot, w)
    assert s.metadata.types == {"x": "IMAGE"} and s.metadata.props == {"model_author": "me"}
    assert w.editor.metadata.sources["x"] == "edited"

    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    summary = export_dialog(w.editor, str(out))
    assert summary is not None and summary["metadata"]["types"] == {"x": "IMAGE"}
    m = onnx.load(str(out))
    props = {p.key: p.value for p in m.metadata_props}
    assert props[ms.PIXEL_FORMAT] == "Bgr8" and props[ms.GAMMA] == "SRGB" and props["model_author"] == "me"
    assert m.doc_string == "a test model"
    x = next(vi for vi in m.graph.input if vi.name == "x")
    assert x.type.denotation == "IMAGE"
    assert [d.denotation for d in x.type.tensor_type.shape.dim] == ["DATA_BATCH", "DATA_CHANNEL",
                                                                     "DATA_FEATURE", "DATA_FEATURE"]
    report = json.loads(Path(report_path(str(out))).read_text())
    assert report["changes"]["transposes"] == {"without_pins": 2, "exported": 2}
    assert report["metadata"]["image"] == {ms.PIXEL_FORMAT: "Bgr8", ms.GAMMA: "SRGB"}
    assert "Transposes: 2 → 2" in w.editor.last_message.text()

    # the same decisions replayed headless give the same bytes
    saved = w.editor.save_session(str(tmp_path / "m.inspector.json"))
    assert cli(["convert", str(model), "-o", str(tmp_path / "cli.onnx"), "--session", saved]) == 0
    assert (tmp_path / "cli.onnx").read_bytes() == out.read_bytes()

    # undo everything: the metadata goes back to what the conversion alone gives
    while w.editor.stack.canUndo():
        w.editor.stack.undo()
    settle(qtbot, w)
    assert s.metadata.is_empty() and w.editor.metadata.types["x"].value == ""


def test_export_asks_before_replacing_the_source_and_shows_errors(qtbot, window, model, tmp_path):
    w = window
    open_model(qtbot, w, model)
    # untouched, the window's export is the CLI's conversion byte for byte (the loader's result + metadata pass)
    assert export_dialog(w.editor, str(tmp_path / "window.onnx")) is not None
    assert cli(["convert", str(model), "-o", str(tmp_path / "cli.onnx")]) == 0
    assert (tmp_path / "window.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    original = model.read_bytes()
    asked = []
    assert export_dialog(w.editor, str(model), confirm=lambda: asked.append(1) or False) is None
    assert asked and model.read_bytes() == original
    assert export_dialog(w.editor, str(tmp_path / "missing" / "x.onnx")) is None
    assert "missing does not exist" in w.last_error
    assert export_dialog(w.editor, str(model), confirm=lambda: True) is not None
    assert onnx.load(str(model)).graph.node                    # replaced only after the explicit yes


def test_session_file_beside_the_model_is_loaded_on_open(qtbot, window, model, tmp_path):
    w = window
    s = open_model(qtbot, w, model)
    w.editor.pin("y", "keep")
    settle(qtbot, w)
    saved = w.editor.save_session()
    assert saved == s.default_session_path() and w.editor.stack.isClean()
    assert not w.editor.autosave.path_for(s.path).exists()     # saved: nothing left to restore
    w.open_path(str(model))
    qtbot.waitUntil(lambda: w.editor.session is not None and w.editor.session is not s, timeout=60_000)
    settle(qtbot, w)
    assert w.editor.session.pins == {"y": "keep"} and w.doc.result.transposes == 3
    assert not w.editor.banner.isVisible()


def test_dropped_window_restores_from_autosave(qtbot, model, tmp_path):
    w = make_window(qtbot, tmp_path)
    open_model(qtbot, w, model)
    w.editor.pin("y", "keep")
    settle(qtbot, w)
    side = w.editor.autosave.path_for(str(model))
    assert json.loads(side.read_text())["pins"] == {"y": "keep"}
    w.hide()                                     # dropped without saving or closing: no session file
    assert not Path(str(model.with_suffix("")) + ".inspector.json").exists()

    w2 = make_window(qtbot, tmp_path)
    s = open_model(qtbot, w2, model)
    assert s.pins == {} and w2.editor.banner.isVisible() and "1 pin" in w2.editor.banner.label.text()
    w2.editor.banner.restore.click()
    settle(qtbot, w2)
    assert s.pins == {"y": "keep"} and w2.doc.result.transposes == 3
    assert w2.editor.stack.undoText() == "Restore autosave"
    w2.editor.stack.undo()                       # restoring is one undoable step
    settle(qtbot, w2)
    assert s.pins == {}


KILLED = """
import os, signal, sys, time


def main():
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QSettings, QStandardPaths
    from PySide6.QtWidgets import QApplication
    QStandardPaths.setTestModeEnabled(True)
    from inspector.gui.autosave import Autosave
    from inspector.gui.main_window import MainWindow
    app = QApplication([])
    w = MainWindow(QSettings(sys.argv[2] + "/s.ini", QSettings.IniFormat))
    w.editor.autosave = Autosave(sys.argv[2] + "/autosave")
    w.open_path(sys.argv[1])
    while w.editor.session is None or not (w.idle and w.editor.idle):
        app.processEvents(); time.sleep(0.01)
    w.editor.pin(sys.argv[3] if len(sys.argv) > 3 else "a", "keep")
    while not w.editor.idle:
        app.processEvents(); time.sleep(0.01)
    print("pinned", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":          # the loader's child process imports this file again
    main()
"""


def test_killed_process_loses_nothing(qtbot, model, tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, str(script), str(model), str(tmp_path)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL and "pinned" in p.stdout, p.stderr[-2000:]
    w = make_window(qtbot, tmp_path)
    s = open_model(qtbot, w, model)
    assert w.editor.banner.isVisible()
    w.editor.restore_autosave()
    settle(qtbot, w)
    assert s.pins == {"a": "keep"}


def test_two_killed_windows_on_one_model_each_keep_their_autosave(qtbot, model, tmp_path):
    """Both windows wrote one side file: after both were killed only the second's pin was offered."""
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    for tensor in ("a", "y"):
        p = subprocess.run([sys.executable, str(script), str(model), str(tmp_path), tensor], env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == -signal.SIGKILL and "pinned" in p.stdout, p.stderr[-2000:]
    w = make_window(qtbot, tmp_path)
    s = open_model(qtbot, w, model)
    rows = w.editor.banner.rows
    assert len(rows) == 2 and all("1 pin," in label.text() and "still open" not in label.text()
                                  for label, _, _ in rows)
    qtbot.mouseClick(rows[1][1], Qt.LeftButton)               # the older one: the first window's "a"
    settle(qtbot, w)
    assert s.pins == {"a": "keep"} and len(w.editor.banner.rows) == 1
    qtbot.mouseClick(w.editor.banner.rows[0][1], Qt.LeftButton)
    settle(qtbot, w)
    assert s.pins == {"y": "keep"} and not w.editor.banner.isVisible()   # a restore replaces the decisions
    mine = w.editor.autosave.path_for(str(model))
    assert sorted(p.name for p in (tmp_path / "autosave").iterdir()) == sorted([mine.name, mine.name.replace(
        ".autosave.json", ".lock")])                          # the killed windows' files are gone


def test_a_second_window_on_an_open_model_says_so_and_autosaves_apart(qtbot, model, tmp_path):
    w1, w2 = make_window(qtbot, tmp_path), make_window(qtbot, tmp_path)
    open_model(qtbot, w1, model)
    w1.editor.pin("a", "keep")
    settle(qtbot, w1)
    assert not w1.editor.banner.isVisible()
    open_model(qtbot, w2, model)
    banner = w2.editor.banner
    assert banner.isVisible() and "open in 1 other window too" in banner.note.text()
    (label, restore, discard), = banner.rows                   # the first window's, offered, not discardable
    assert "by a window still open" in label.text() and not discard.isEnabled()
    w2.editor.pin("y", "keep")
    settle(qtbot, w2)
    assert w1.editor.autosave.path_for(str(model)) != w2.editor.autosave.path_for(str(model))
    assert json.loads(w1.editor.autosave.path_for(str(model)).read_text())["pins"] == {"a": "keep"}
    assert json.loads(w2.editor.autosave.path_for(str(model)).read_text())["pins"] == {"y": "keep"}
    w1.close()                                                 # its lock goes; its unsaved pin stays on offer
    w3 = make_window(qtbot, tmp_path)
    open_model(qtbot, w3, model)
    texts = sorted(label.text() for label, _, _ in w3.editor.banner.rows)
    assert len(texts) == 2 and "open in 1 other window too" in w3.editor.banner.note.text()
    assert ["still open" in t for t in texts].count(True) == 1


def test_validation_fills_the_plots_colours_nodes_and_selects(qtbot, window, corpus):
    w = window
    open_model(qtbot, w, corpus / CONFLICT_MODEL)
    panel = w.editor.validation
    validated(qtbot, w)
    v = panel.validation
    assert v is not None and v.ok
    assert len(panel.scatter.points()) == len(v.outputs) + len(v.intermediates) > 3
    assert sum(panel.hist.getPlotItem().listDataItems()[0].yData) == sum(d.size for d in v.output_diffs)
    coloured = [it for it in w.scenes[ONNX].nodes if it.category == "error"]
    assert coloured and panel.scale.isVisible()
    assert len({it.fill.name() for it in coloured}) > 1             # shades by error, not one flat colour
    last = len(panel.points) - 1
    panel.select_point(last)
    op = panel.points[last][0]
    assert w.scenes[TFLITE].selected_keys()[0] == [("op", op)]
    assert set(w.scenes[ONNX].selected_keys()[0]) == set(w.doc.trace.op_nodes[op])
    panel.clear_overlay()
    assert not any(it.category == "error" for it in w.scenes[ONNX].nodes)


def test_validation_can_be_cancelled(qtbot, window, model):
    w = window
    open_model(qtbot, w, model)
    panel = w.editor.validation
    assert_cancels(qtbot, panel)
    assert len(panel.scatter.points()) == 0


def assert_cancels(qtbot, panel) -> None:
    """Start a validation, cancel it at once: nothing kept, the worker ends."""
    panel.run()
    assert panel.running and panel.cancel_button.isEnabled()
    panel.cancel()
    assert not panel.running and panel.status.text() == "cancelled"
    qtbot.waitUntil(lambda: panel.pool.activeThreadCount() == 0, timeout=60_000)
    assert panel.validation is None


def test_quick_edits_coalesce_and_the_window_shows_the_last_state(qtbot, window, model):
    w = window
    s = open_model(qtbot, w, model)
    ed = w.editor
    ed.pin("y", "keep")                          # three edits before any re-run ends
    ed.pin("a", "keep")
    ed.stack.undo()
    settle(qtbot, w)
    assert s.pins == {"y": "keep"}
    from inspector.core.emit.convert import convert
    fresh = convert(s.graph, pins={"y": "keep"})
    assert w.doc.result is s.result and w.doc.result.transposes == fresh.transposes == 3
    assert len(w.scenes[ONNX].nodes) == len(fresh.model.graph.node) + 2          # + input and output terminals


def test_an_onnx_file_alone_edits_metadata_only(qtbot, window, model, tmp_path):
    from inspector.core.session.onnx_session import OnnxSession
    w = window
    s = open_model(qtbot, w, model)
    s.export(str(tmp_path / "m.onnx"))
    w.open_path(str(tmp_path / "m.onnx"))
    qtbot.waitUntil(lambda: w.idle and isinstance(w.editor.session, OnnxSession), timeout=60_000)
    assert w.editor.export_action.isEnabled() and w.editor.save_action.isEnabled()
    assert not w.editor.validate_action.isEnabled() and not w.editor.clear_pins_action.isEnabled()
    assert not w.editor.pin("y", "keep") and w.editor.session.pins == {}


def test_prefill_from_tflite_metadata_says_where_it_came_from(qtbot, window, corpus):
    w = window
    s = open_model(qtbot, w, corpus / "realworld/mediapipe_face_detection_short_range.tflite")
    ed = w.editor.metadata
    assert ed.types["input"].value == "IMAGE" and ed.image[ms.PIXEL_FORMAT].isEnabled()
    assert ed.image[ms.PIXEL_FORMAT].value == "Rgb8" and ed.image[ms.PIXEL_RANGE].value == "Normalized_1_1"
    assert ed.sources["input"] == "from TFLite metadata: input 'input' has image content"
    assert ed.sources[ms.PIXEL_FORMAT].startswith("from TFLite metadata: input 'input' colour space RGB")
    assert s.metadata.is_empty()                       # a pre-fill, not an edit


def test_a_denotation_finding_jumps_to_its_tensor(qtbot, window, model):
    w = window
    s = open_model(qtbot, w, model)
    assert w.editor.edit_metadata(s.metadata.merged(
        MetadataEdits(types={"x": "IMAGE"}, image={ms.PIXEL_FORMAT: "Gray8"})), "gray") is None
    settle(qtbot, w)
    findings = w.editor.metadata.findings
    texts = [findings.item(i).text() for i in range(findings.count())]
    hit = next(i for i, t in enumerate(texts) if "Gray8 means 1 channel(s), but its DATA_CHANNEL axis has 3" in t)
    findings.itemClicked.emit(findings.item(hit))
    assert w.scenes[ONNX].selected_keys()[1] == ["x"]


def test_big_models_rerun_in_a_child_process(qtbot, window, model, monkeypatch):
    from inspector.gui import loader_job
    w = window
    s = open_model(qtbot, w, model)
    monkeypatch.setattr(loader_job.LoadJob, "PROCESS_OPS", 0)     # any model takes the child-process path
    calls = []
    real = loader_job.executor
    monkeypatch.setattr(loader_job, "executor", lambda: calls.append(1) or real())
    w.editor.pin("y", "keep")
    settle(qtbot, w)
    assert calls == [1] and s.result.graph is s.graph        # one exchange: view, result, metadata pass and
    assert s.result.findings is not None                    # findings; the result re-attached to the window's graph
    assert w.doc.result is s.result and s.result.transposes == 3
    assert w.statusBar().currentMessage() == "1 Transpose added, 3 conflicts left"
    w.editor.metadata.types["x"].set_value("IMAGE")
    w.editor.metadata._set_type("x", "IMAGE")
    settle(qtbot, w)
    x = next(vi for vi in s.result.model.graph.input if vi.name == "x")
    assert x.type.denotation == "IMAGE" and calls == [1] * 2     # the pass's model replaced the one shown first


def _disk_full_at(monkeypatch, phase: str, name: str) -> None:
    """The disk fills when `name`'s temporary is created ("stage") or when it is renamed into place ("commit")."""
    import errno
    import inspector.core.io.atomic as atomic
    full = OSError(errno.ENOSPC, "No space left on device")
    if phase == "stage":
        real = atomic.tempfile.mkstemp
        monkeypatch.setattr(atomic.tempfile, "mkstemp", lambda *a, **k: (_ for _ in ()).throw(full)
                            if name in k.get("prefix", "") else real(*a, **k))
    else:
        real = atomic.os.replace
        monkeypatch.setattr(atomic.os, "replace", lambda a, b: (_ for _ in ()).throw(full)
                            if str(b).endswith(name) else real(a, b))


@pytest.mark.parametrize("phase", ["stage", "commit"])
def test_export_writes_the_onnx_and_its_report_both_or_neither(qtbot, window, model, tmp_path, monkeypatch, phase):
    """A full disk on the report: the old ONNX was replaced while the message said nothing was written."""
    w = window
    open_model(qtbot, w, model)
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old model")
    Path(report_path(str(out))).write_bytes(b"old report")
    _disk_full_at(monkeypatch, phase, ".report.json")
    assert export_dialog(w.editor, str(out)) is None
    assert out.read_bytes() == b"old model" and Path(report_path(str(out))).read_bytes() == b"old report"
    assert "the disk is full; nothing was written and any existing file is unchanged" in w.last_error
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".layout-inspector.")) == []
    monkeypatch.undo()
    assert export_dialog(w.editor, str(out)) is not None
    assert onnx.load(str(out)).graph.node and json.loads(Path(report_path(str(out))).read_text())["exported"]


def test_a_big_models_export_in_the_child_writes_both_or_neither(model, tmp_path, monkeypatch):
    from inspector.gui.rerun_child import export
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old model")
    report = tmp_path / "out.report.json"
    report.write_bytes(b"old report")
    _disk_full_at(monkeypatch, "commit", ".report.json")
    error = export(str(model), {}, {}, {}, str(out), False, str(report), b"{}")
    assert "nothing was written" in error and out.read_bytes() == b"old model" and report.read_bytes() == b"old report"
    monkeypatch.undo()
    assert export(str(model), {}, {}, {}, str(out), False, str(report), b"{}") is None
    assert onnx.load(str(out)).graph.node and report.read_bytes() == b"{}"
