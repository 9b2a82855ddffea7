"""The window's session files and autosaves: refused whole with the document unchanged, a damaged autosave set
aside as `.corrupt` with a one-line notice (issue 22 found `[]`, `null` or `"x"` in an autosave raising into the
"Unexpected error" dialog, and invalid pins or opset 1 applied, then reported with Undo)."""
from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from .test_gui_edit import make_window, open_model, settle  # noqa: E402
from .test_session import model  # noqa: E402,F401  (conv -> reshape -> conv, input x [1, 5, 7, 3])

pytestmark = pytest.mark.gui


def _state(w):
    s = w.editor.session
    return dict(s.pins), s.options, s.metadata.to_dict(), w.doc.result.transposes, w.editor.stack.count()


@pytest.mark.parametrize("content", ["[]", "null", '"x"', '{"version": 1, "pins": {"y": "QQQQ"}}', "{"])
def test_a_damaged_autosave_is_set_aside_with_a_notice(qtbot, model, tmp_path, content):  # noqa: F811
    w = make_window(qtbot, tmp_path)
    side = w.editor.autosave.path_for(str(model))
    side.parent.mkdir(parents=True)
    side.write_text(content)
    errors = []
    w.error = lambda title, message, details="": errors.append(message)
    open_model(qtbot, w, model)
    assert errors == [] and not w.editor.banner.isVisible()
    assert not side.exists() and side.with_name(side.name + ".corrupt").read_text() == content
    notice = w.statusBar().currentMessage()
    assert notice.startswith("The autosave was damaged and is set aside as ") and "\n" not in notice


@pytest.mark.parametrize("doc", [{"version": 1, "pins": {"y": "keep", "a": "QQQQ"}},
                                 {"version": 1, "pins": {"y": "keep"}, "options": {"opset": 1}}])
def test_a_bad_session_leaves_the_document_unchanged(qtbot, model, tmp_path, doc):  # noqa: F811
    w = make_window(qtbot, tmp_path)
    open_model(qtbot, w, model)
    w.editor.pin("a", "keep")
    settle(qtbot, w)
    before = _state(w)
    path = tmp_path / "bad.inspector.json"
    path.write_text(json.dumps(doc))
    assert w.editor.open_session(str(path)) is False
    settle(qtbot, w)
    assert _state(w) == before and "not applied" in w.last_error
