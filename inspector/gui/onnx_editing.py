"""The window's editing half for an ONNX model opened alone: an OnnxSession (metadata edits only), with the same
undo commands, Metadata dock, session files, autosave and Export as a conversion; pins and validation are off."""
from __future__ import annotations

from pathlib import Path

from inspector.core.ir.errors import InspectorError
from inspector.core.session.onnx_session import OnnxSession

REASON = ("Pins and validation need a TFLite model. An ONNX model opened alone is never converted: only its "
          "metadata and denotations can be edited here.")


def is_onnx_alone(session) -> bool:
    return isinstance(session, OnnxSession)


def attach_onnx(editor, doc) -> None:
    """Editor.attach for an .onnx file: an OnnxSession, its saved session file applied when there is one."""
    editor.session = None                 # nothing autosaves while the stack is cleared
    editor.stack.clear()
    s = OnnxSession.of(doc.path, doc.model)
    editor.session, editor.baseline, editor.last_change = s, s.result.transposes, None
    saved = Path(s.default_session_path())
    if saved.is_file():
        try:
            warnings = s.load_decisions(str(saved))
            editor.rerun()
            editor.window.statusBar().showMessage(f"Loaded session {saved.name}"
                                                  + (f" ({'; '.join(warnings)})" if warnings else ""), 8000)
        except InspectorError as e:
            editor.window.error("Cannot load the session file", str(e))
    editor._offer_autosave()
    editor.metadata.refresh()
    editor.validation.reset()
    editor._enable()
    editor.sessionChanged.emit()
