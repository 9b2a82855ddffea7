"""The scripted walk (tools/gui_walk.py) on the run's Xvfb display (the `xserver` fixture), with the xcb platform and
xdotool's typing. NASNet, a PyTorch-origin model and a float16 model: open, select, pin, undo, type metadata,
validate, export; after each step each graph pane, read back from the X server, is not blank and the views agree
with the document."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.gui


def test_walk_on_a_real_x_server_shows_each_step(xserver, corpus, tmp_path):
    env = xserver.env()
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path))
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "gui_walk.py"), "--corpus", str(corpus),
                          "--out", str(tmp_path / "walk")], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "3 models: 0 problem(s)" in run.stdout
    shots = list((tmp_path / "walk").glob("*-export-tflite.png"))
    assert len(shots) == 3
