"""File › Export for Model Explorer…: both models and the conversion as Google Model Explorer node data, for
opening both graphs side by side there in one command — each graph's layout categories (the window's colours) and
conflicts, each tensor's error when a validation has run, and the TFLite <-> ONNX mapping from the trace; into a
folder the user chooses, all files or none (inspector.core.session.model_explorer)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog

from inspector.core.ir.errors import InspectorError
from inspector.core.proof import node_data
from inspector.core.session import model_explorer

from .export_onnx import start_folder
from .graph_model import CONFLICT
from .palette import CATEGORIES, LIGHT, palette

TITLE = "Export for Model Explorer"


def colours() -> dict[str, str]:
    """Category -> the window's fill colour (the light scheme's, as the pictures), as CSS."""
    p = palette(LIGHT)
    out = {c: p.color(c).name() for c in CATEGORIES}
    out[node_data.INSERTED] = p.color(CONFLICT).name()
    return out


def action(editor) -> QAction:
    """The File menu's action (enabled with Validate: a TFLite model or a pair open)."""
    a = QAction("Export for &Model Explorer…", editor.window)
    a.setToolTip("Write both models, Model Explorer node data (categories, conflicts, validation errors) and the "
                 "TFLite-ONNX mapping into a folder, ready for one model-explorer command")
    a.triggered.connect(lambda _=False: export_dialog(editor))
    return a


def export_dialog(editor, folder: str | None = None) -> list[Path] | None:
    """Ask for a folder (unless `folder`), write the files, say where; a failure is one sentence in a dialog."""
    w = editor.window
    if editor.session is None:
        return None
    if folder is None:
        folder = QFileDialog.getExistingDirectory(w, TITLE, start_folder(w))
        if not folder:
            return None
    editor.wait()                                   # the latest re-run's result, not the one before it
    s = editor.session
    if s is None or not s.can_export_model_explorer or s.result is None:
        w.error(f"{TITLE} failed", "there is no conversion to export: open a TFLite model and let it convert")
        return None
    try:
        files = model_explorer.conversion_bundle(s.result, colours(), s.validation)
        paths = model_explorer.write(folder, files)
    except OSError as e:
        w.error(f"{TITLE} failed", f"cannot read {s.graph.path}: {e.strerror or e}")
        return None
    except InspectorError as e:
        w.error(f"{TITLE} failed", str(e).splitlines()[0])
        return None
    w.settings.setValue("export/folder", str(Path(folder).resolve()))
    errors = " with each tensor's error" if s.validation is not None else ""
    w.statusBar().showMessage(f"Wrote both models and {len(paths) - 2} Model Explorer files{errors} to {folder}; "
                              f"open them with: {model_explorer.command(folder, files)}", 30000)
    return paths
