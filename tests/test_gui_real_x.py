"""Scenarios of tests/gui_scenarios.py on the run's private Xvfb display (the `xserver` fixture) with the xcb plugin,
as on a person's desktop: there the window asks before losing work and shows errors by itself (offscreen it must be
told to), menus are placed on a real screen bigger than the window, and X11's key bindings apply (Ctrl+E in a text
field is end-of-line). Real clicks on the question's buttons: Save session, Discard and Cancel, for Quit and Open."""
from __future__ import annotations

import re

import pytest

from tests import gui_harness, gui_scenarios  # noqa: F401  (registers the scenarios)

pytestmark = pytest.mark.gui

ON_X = ("quit_with_changes",            # Ctrl+Q › Cancel; the window's close › Cancel; Ctrl+Q › Save session
        "quit_discard",                 # Ctrl+Q › Discard
        "open_with_changes",            # Ctrl+O › Cancel; a drop › Cancel; Ctrl+O › Discard
        "open_save_session",            # Ctrl+O › Save session
        "conflict_fix",                 # the Fix menu inside the window (offscreen, the small screen hid it)
        "onnx_alone_edit_export",       # typed metadata, then Ctrl+E once the keyboard left the field
        "open_pair_then_validate",      # the keyboard back with the window after two file dialogs: Ctrl+R works
        "enter_refreshes_findings")     # Enter in a Metadata field: findings at once, the keyboard stays there


@pytest.mark.parametrize("name", ON_X)
def test_scenario_on_x(name, xserver, corpus, tmp_path):
    run = gui_harness.run(name, corpus, tmp_path, xserver=xserver)
    assert run.returncode == 0, gui_harness.verdict(run)
    assert re.search(r"^0 problem\(s\)$", run.stdout, re.M), run.stdout[-2000:]
