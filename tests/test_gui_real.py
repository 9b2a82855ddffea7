"""The window as a person uses it (issue 36): every scenario of tests/gui_scenarios.py, each in a process of its own
(tests/gui_harness.py) so that a crash fails its test with the step it died in instead of ending the run. Real
clicks and keys only; a Python exception or a Qt warning in the window's process fails the scenario."""
from __future__ import annotations

import re

import pytest

from tests import gui_harness, gui_scenarios  # noqa: F401  (registers the scenarios)

pytestmark = pytest.mark.gui


@pytest.mark.parametrize("name", sorted(n for n, fn in gui_harness.SCENARIOS.items()
                                         if not getattr(fn, "desktop", False)))     # (those run on X with a bus)
def test_scenario(name, corpus, tmp_path):
    run = gui_harness.run(name, corpus, tmp_path)
    assert run.returncode == 0, gui_harness.verdict(run)
    assert re.search(r"^0 problem\(s\)$", run.stdout, re.M), run.stdout[-2000:]
