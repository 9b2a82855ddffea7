"""`layout-inspector gui` without a model: a start page with Open, the bundled sample and recent files."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, Qt

from inspector.gui.main_window import ONNX, TFLITE, MainWindow

pytestmark = pytest.mark.gui


def make_window(qtbot, tmp_path, recent=()):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    settings.setValue("recent", list(recent))
    w = MainWindow(settings)
    qtbot.addWidget(w)
    w.show()
    return w


def test_no_model_shows_the_start_page_with_recent_files(qtbot, tmp_path, corpus):
    gone = str(tmp_path / "deleted.tflite")
    model = str(corpus / "ops" / "abs.float32.tflite")
    w = make_window(qtbot, tmp_path, [model, gone])
    assert w.stack.currentWidget() is w.start_page and w.start_page.isVisible()
    items = [w.start_page.recent_list.item(i) for i in range(w.start_page.recent_list.count())]
    assert [i.data(Qt.UserRole) for i in items] == [model, gone]
    assert items[0].flags() & Qt.ItemIsEnabled and not items[1].flags() & Qt.ItemIsEnabled   # missing: greyed
    w.start_page.recent_list.itemActivated.emit(items[0])
    qtbot.waitUntil(lambda: w.idle and ONNX in w.scenes, timeout=60_000)
    assert w.stack.currentWidget() is w.workspace and w.doc.path == model


def test_sample_button_opens_the_bundled_sample(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path)
    assert not w.start_page.recent_list.isVisibleTo(w.start_page)          # nothing recent: a line says so
    assert w.start_page.recent_empty.isVisibleTo(w.start_page)
    qtbot.mouseClick(w.start_page.sample_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: w.idle and TFLITE in w.scenes and ONNX in w.scenes, timeout=60_000)
    assert w.doc.path.endswith("inspector/resources/sample.tflite")
    assert len(w.scenes[TFLITE].nodes) >= 16


def test_cli_sample_flag_names_the_packaged_sample(monkeypatch):
    import inspector.gui.app as app
    from inspector.cli import main
    seen = []
    monkeypatch.setattr(app, "main", lambda model, other: seen.append(model) or 0)
    assert main(["gui", "--sample"]) == 0
    assert seen and seen[0].endswith("sample.tflite")
    assert main(["gui", "--sample", "x.tflite"]) == 1                     # one model at a time
