"""Screenshots of the editing side (pin menu, metadata editor, validation) into screenshots/*.png.

    QT_QPA_PLATFORM=offscreen python tools/screenshots_edit.py --corpus ../shared/corpus
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from screenshots import setup, window_for  # noqa: E402  (sets the offscreen platform and sys.path)

from PySide6.QtCore import QPoint, Qt  # noqa: E402
from PySide6.QtGui import QPainter  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QMenu  # noqa: E402

from inspector.core.metadata import schema as ms  # noqa: E402
from inspector.gui.autosave import Autosave  # noqa: E402
from inspector.gui.main_window import ONNX, TFLITE  # noqa: E402
from inspector.gui.pin_menu import fill_menu  # noqa: E402


def settle(app, w, timeout=300.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not (w.idle and w.editor.idle and not w.editor.validation.running):
        app.processEvents()
        time.sleep(0.01)
    for _ in range(8):
        app.processEvents()
        time.sleep(0.04)


def save(app, w, path: Path, menu: QMenu | None = None, at: QPoint | None = None) -> None:
    settle(app, w)
    img = w.grab()
    if menu is not None:                 # popups are separate windows: paint the menu onto the grab
        p = QPainter(img)
        p.drawPixmap(at, menu.grab())
        p.end()
    img.save(str(path))
    print(f"wrote {path}")


def editing_window(app, model: Path):
    w = window_for(app, model)
    w.editor.autosave = Autosave(Path(tempfile.mkdtemp()) / "autosave")
    settle(app, w)
    return w


def main(argv=None) -> int:
    corpus, out, app = setup(argv, __doc__)

    w = editing_window(app, corpus / "ops" / "conv-reshape-multiple-conv.float32.tflite")
    sg = w.editor.session.graph.main
    reshaped = sg.tensor_by_name("functional_1/reshape/Reshape").index
    w.select(TFLITE, tensors=[reshaped])
    view = w.panes[TFLITE].main_view
    view.fit()
    menu = QMenu(w)
    fill_menu(menu, w.editor, [reshaped])
    edge = w.scenes[TFLITE].edges_by_tensor[reshaped][0]
    spot = view.mapFromScene(edge.path().pointAtPercent(0.3))
    save(app, w, out / "pin-menu.png", menu, view.viewport().mapTo(w, spot) + QPoint(8, 8))
    w.editor.pin("input", "keep")
    settle(app, w)
    w.editor.pin("functional_1/reshape/Reshape", "channels-first")
    settle(app, w)
    w.select(TFLITE, tensors=[reshaped])
    w.panes[ONNX].main_view.fit()                   # the whole converted graph, with the pin's Transposes
    save(app, w, out / "pin-after.png")
    w.close()

    face = corpus / "realworld" / "mediapipe_face_detection_short_range.tflite"
    w = editing_window(app, face)
    w.editor.metadata_dock.raise_()
    w.resizeDocks([w.editor.metadata_dock], [430], Qt.Horizontal)
    save(app, w, out / "metadata-prefill.png")
    md = w.editor.metadata
    gamma = md.image[ms.GAMMA]
    gamma.setCurrentIndex(gamma.findText("SRGB"))
    gamma.activated.emit(gamma.currentIndex())
    settle(app, w)
    md = w.editor.metadata
    md._add_row()
    md.table.item(md.table.rowCount() - 1, 1).setText("Layout Inspector docs")
    md.table.item(md.table.rowCount() - 1, 0).setText("model_author")
    settle(app, w)
    md = w.editor.metadata
    md.image[ms.PIXEL_FORMAT].lineEdit().setFocus()
    md.image[ms.PIXEL_FORMAT].lineEdit().selectAll()
    for ch in "rgb9":                                # the 9 is refused as typed, the hint lists what is allowed
        QTest.keyClick(md.image[ms.PIXEL_FORMAT].lineEdit(), ch)
    app.processEvents()
    md.scroll.verticalScrollBar().setValue(md.scroll.verticalScrollBar().maximum())
    save(app, w, out / "metadata-edit.png")
    w.editor.metadata_dock.hide()
    w.editor.history_dock.hide()
    w.editor.validate()
    settle(app, w)
    w.panes[ONNX].main_view.fit()
    w.panes[TFLITE].main_view.fit()
    w.editor.validation.select_point(len(w.editor.validation.points) - 3)
    w.editor.validation_dock.raise_()
    w.resizeDocks([w.editor.validation_dock], [300], Qt.Vertical)
    save(app, w, out / "validation.png")
    w.scheme.choose("dark")                         # View › Colour scheme › Dark: the plots follow it
    save(app, w, out / "validation-dark.png")
    w.scheme.choose("system")
    w.close()
    pair_validation(app, corpus, out)
    return 0


def pair_validation(app, corpus: Path, out: Path) -> None:
    """A pair: the transformer block beside an ONNX model whose attention Softmax normalises the wrong axis (made
    here from our keep-io-layout conversion, as another converter might have written it)."""
    import onnx

    from inspector.core.emit.convert import convert
    from inspector.core.io.tflite_reader import read_tflite
    model = corpus / "keras" / "custom_transformer_block_fp32.tflite"
    other = convert(read_tflite(model), keep_io_layout=True).model
    softmax = next(n for n in other.graph.node if n.op_type == "Softmax")
    next(a for a in softmax.attribute if a.name == "axis").i = 2
    path = Path(tempfile.mkdtemp()) / "transformer-wrong-axis.onnx"
    onnx.save(other, path)
    w = editing_window(app, model)
    w.open_path(str(model), str(path))
    settle(app, w)
    w.editor.metadata_dock.hide()
    w.editor.history_dock.hide()
    w.editor.validate()                      # selects the first wrong op in both graphs and rings it in the plot
    settle(app, w)
    w.editor.validation_dock.raise_()
    w.resizeDocks([w.editor.validation_dock], [300], Qt.Vertical)
    save(app, w, out / "pair-validation.png")
    w.close()


if __name__ == "__main__":
    sys.exit(main())
