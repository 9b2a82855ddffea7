"""File › Export ONNX (Ctrl+E): check fully, write atomically, summarise what the user changed.

The summary (pins, metadata edits, Transposes before and after) is shown and written, with Session.report(),
to MODEL.report.json beside the export. The source model is replaced only after an explicit confirmation.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from PySide6.QtCore import QObject, QRunnable, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox

from inspector.core.io.atomic import OutputSet
from inspector.core.ir.errors import InspectorError
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.metadata.lint import MetadataCheckError
from inspector.core.session.events import Exported

from .folders import first_folder
from .loader_job import PROCESS_BYTES
from .words import counted


BIG_BYTES = PROCESS_BYTES


def report_path(path: str) -> str:
    p = Path(path)
    return str(p.with_suffix("")) + ".report.json"


def changes(editor) -> dict:
    s = editor.session
    empty = MetadataEdits().to_dict()
    edited = {k: v for k, v in s.metadata.to_dict().items() if v != empty[k]}
    return {"pins": dict(s.pins), "metadata": edited,
            "transposes": {"without_pins": editor.baseline, "exported": s.result.transposes},
            "conflicts": len(s.result.plan.conflicts)}


def summary_text(c: dict) -> str:
    t = c["transposes"]
    lines = [f"Transposes: {t['without_pins']} → {t['exported']} ({counted(c['conflicts'], 'conflict')} left)"]
    lines.append(f"Pins: {len(c['pins'])}" + "".join(f"\n  {k}: {v}" for k, v in c["pins"].items()))
    if c["metadata"]:
        lines.append("Metadata edits:" + "".join(f"\n  {k}: {v}" for k, v in c["metadata"].items()))
    else:
        lines.append("Metadata edits: none")
    return "\n".join(lines)


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def start_folder(w) -> str:
    """Where the save dialog opens: the last export's folder, else beside the model open now, else home; each only
    when writable (a model may sit in a read-only corpus) and never the package's own folder (the sample's)."""
    s = w.editor.session
    model = (s.other or s.path) if s is not None else None
    beside = str(Path(model).resolve().parent) if model else ""
    return first_folder((w.settings.value("export/folder", ""), beside), writable=True)


def big(s) -> bool:
    """Big models export in the loader's child process: serialising and checking hold the GIL for seconds (and
    the window's copy of the result has its weights left out, see loader_job.leave_out_weights)."""
    if not s.converts or s.result is None:      # a pair or an ONNX alone: in place
        return False
    try:
        size = os.path.getsize(s.path)
    except OSError:
        size = 0
    return size >= BIG_BYTES or getattr(s.result, "weights_left_out", False)


def outputs(s, path: str, overwrite_source: bool) -> OutputSet:
    """The ONNX model and its report, as one set: both renamed into place at its commit, or neither."""
    other = s.other                              # a pair replaces its other ONNX, never its TFLite model
    out = OutputSet(([s.path] if other else []) + ([] if overwrite_source else [other or s.path]))
    out.add(path)
    out.add(report_path(path))
    return out


def report_bytes(report: dict) -> bytes:
    return (json.dumps(report, indent=2, default=str) + "\n").encode()


def export(editor, path: str, overwrite_source: bool = False) -> dict:
    """Write the ONNX model and its report, both or neither; returns the change summary. InspectorError on any
    failure (a WriteError then says that nothing was written)."""
    editor.wait()
    s = editor.session
    if s is None or s.result is None:
        raise InspectorError("nothing to export: open and convert a TFLite model first")
    out = outputs(s, path, overwrite_source)
    with out:
        s.export(path, overwrite_source=overwrite_source, out=out)
        report, c = report_of(editor, path)
        out.write(report_path(path), report_bytes(report))
    s.publish(Exported(path))
    return c


def report_of(editor, path: str) -> tuple[dict, dict]:
    """(the report written beside the export, the change summary) of the session now, as exported."""
    c = changes(editor)
    return dict(editor.session.report(), changes=c, exported=str(path)), c


def export_dialog(editor, path: str | None = None, confirm=None, on_errors=None) -> dict | None:
    """Ask where (unless `path`), confirm before replacing the source (`confirm` answers instead of a dialog),
    export, and show the summary; errors go to a dialog. Metadata errors refuse the export: a dialog lists them
    and offers their safe fixes (`on_errors(error)` answers True to fix and export, False to cancel)."""
    w, s = editor.window, editor.session
    if s is None:
        return None
    source = s.other or s.path                  # a pair exports the other ONNX model, edited
    edited = not s.converts                     # an ONNX model (a pair's, or opened alone) with edits
    if path is None:
        name = Path(source).with_suffix(".edited.onnx" if edited else ".onnx").name
        start = str(Path(start_folder(w)) / name)
        path, _ = QFileDialog.getSaveFileName(w, "Export ONNX", start, "ONNX (*.onnx)")
        w.activateWindow()                  # (focus went back to the dialog, gone: no shortcut worked)
        if not path:
            return None
    overwrite = False
    if same_file(path, source) or Path(path).resolve() == Path(source).resolve():
        question = (f"{path} is the TFLite model this export comes from. Replace it with the ONNX model? The "
                    "TFLite file will be lost." if not edited else
                    f"{path} is the ONNX model you opened. Replace it with the edited copy? Its "
                    "current metadata will be lost (nodes and initializers stay the same).")
        ask = confirm or (lambda: QMessageBox.warning(
            w, "Replace the source model?", question, QMessageBox.Yes | QMessageBox.Cancel,
            QMessageBox.Cancel) == QMessageBox.Yes)
        if not ask():
            w.statusBar().showMessage("Export cancelled: the source model was not replaced", 8000)
            return None
        overwrite = True
    if big(s):
        export_in_child(editor, path, overwrite)
        return None
    try:
        try:
            c = export(editor, path, overwrite_source=overwrite)
        except MetadataCheckError as e:
            if not (on_errors or (lambda err: ask_to_fix(w, err)))(e) or not fix_for_export(editor, e):
                w.statusBar().showMessage("Export cancelled: the metadata has errors (see the Metadata dock)", 10000)
                return None
            c = export(editor, path, overwrite_source=overwrite)
    except InspectorError as e:
        w.error("Export failed", str(e))
        return None
    return exported(editor, path, c)


def exported(editor, path: str, c: dict) -> dict:
    w = editor.window
    w.settings.setValue("export/folder", str(Path(path).resolve().parent))
    text = summary_text(c)
    editor.inform("Exported", f"Wrote {path}\nand its report {Path(report_path(path)).name}.\n\n{text}")
    return c


class ExportSignals(QObject):
    done = Signal(str)                 # "" or the error message


class ExportJob(QRunnable):
    """A big model's export in the loader's child process (see rerun_child.export); this thread only waits."""

    def __init__(self, session, path: str, overwrite: bool, report: bytes):
        super().__init__()
        self.args = (session.path, dict(session.pins), session.options.to_dict(), session.metadata.to_dict(), path,
                     overwrite, report_path(path), report)
        self.signals = ExportSignals()
        self.setAutoDelete(False)

    def run(self) -> None:
        from .loader_job import executor
        from .rerun_child import export
        try:
            self.signals.done.emit(executor().submit(export, *self.args).result() or "")
        except Exception as e:     # the child died: still one sentence for the user
            self.signals.done.emit(f"the export process failed ({type(e).__name__}: {e})")


def export_in_child(editor, path: str, overwrite: bool) -> None:
    editor.wait()
    w, s = editor.window, editor.session
    report, c = report_of(editor, path)       # of what is exported, whatever is edited or opened meanwhile
    job = editor.export_job = ExportJob(s, path, overwrite, report_bytes(report))
    w.statusBar().showMessage(f"Exporting {path}…")

    def done(error: str) -> None:
        editor.export_job = None
        if error:
            w.statusBar().clearMessage()
            w.error("Export failed", error)
            return
        s.publish(Exported(path))               # the child wrote both: the views (if still on s) hear it
        exported(editor, path, c)
    job.signals.done.connect(done)
    editor.pool.start(job)
def ask_to_fix(w, error: MetadataCheckError) -> bool:
    """The refusal, with every finding; True when the user chooses to apply the safe fixes and export."""
    errors = [f for f in error.findings if f.severity == "error"]
    fixable = [f for f in errors if f.fix is not None]
    lines = [f"• {f.message}" + (f"\n    fix: {f.fix_text}" if f.fix_text else f"\n    to decide: {f.manual}"
                                   if f.manual else "") for f in errors]
    text = (f"The model's metadata has {counted(len(errors), 'error')} for {error.target}: a consumer would ignore or "
            f"mis-read it, so it was not exported.\n\n" + "\n".join(lines))
    w.last_error = text
    box = QMessageBox(QMessageBox.Warning, "Metadata errors", text, QMessageBox.Cancel, w)
    fix = box.addButton("Apply safe fixes and export", QMessageBox.AcceptRole) if len(fixable) == len(errors) else None
    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":      # tests and screenshots: never block
        return False
    box.exec()
    return fix is not None and box.clickedButton() is fix


def fix_for_export(editor, error: MetadataCheckError) -> bool:
    """Apply the safe fixes of the findings as one undoable edit and wait for the re-run; False when some error
    has no safe fix."""
    errors = [f for f in error.findings if f.severity == "error"]
    if any(f.fix is None for f in errors):
        return False
    editor.metadata.apply_fixes([f for f in error.findings if f.fix is not None])
    editor.wait()
    return True
