"""The window changes its Session on the GUI thread only, so a view subscribed to the Session's events may touch
widgets: re-runs and validation compute in workers and hand their results over when back on the GUI thread."""
from __future__ import annotations

import threading

import pytest

from inspector.core.session.events import FindingsChecked, PinsChanged, PlanChanged, ValidationDone
from tests.test_gui_edit import CONFLICT_MODEL, open_model, settle, window  # noqa: F401  (fixture)

pytestmark = pytest.mark.gui


def test_events_reach_listeners_on_the_gui_thread(qtbot, window, corpus):  # noqa: F811
    w = window
    s = open_model(qtbot, w, corpus / CONFLICT_MODEL)
    heard = []
    s.subscribe(lambda e: heard.append((type(e), threading.current_thread() is threading.main_thread())))
    x = s.graph.main.tensors[s.graph.main.inputs[0]].name
    assert w.editor.pin(x, "keep")
    settle(qtbot, w)
    w.editor.validate()
    qtbot.waitUntil(lambda: not w.editor.validation.running, timeout=120_000)
    # the re-run's graph first, its metadata findings right after (the window checks them after showing it)
    assert [k for k, _ in heard] == [PinsChanged, PlanChanged, FindingsChecked, ValidationDone]
    assert all(on_gui for _, on_gui in heard)
    assert heard and s.validation is w.editor.validation.validation and s.result is w.doc.result
