"""View › Colour scheme › System follows the desktop: the window on the run's Xvfb display with Qt's GNOME platform
theme listening on a private session bus, whose colour scheme the scenario switches (tests/desktop_bus.py)."""
from __future__ import annotations

import re

import pytest

from tests import gui_harness, gui_scenarios  # noqa: F401  (registers the scenarios)

pytestmark = pytest.mark.gui


def test_system_scheme_follows_the_desktop(xserver, desktop_bus, corpus, tmp_path):
    run = gui_harness.run("desktop_scheme", corpus, tmp_path, xserver=xserver, extra_env=desktop_bus.env())
    assert run.returncode == 0, gui_harness.verdict(run)
    assert re.search(r"^0 problem\(s\)$", run.stdout, re.M), run.stdout[-2000:]
