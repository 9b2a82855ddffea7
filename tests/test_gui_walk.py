"""The scripted walk (tools/gui_walk.py) on a real X server: Xvfb, the xcb platform and xdotool's typing. NASNet,
a PyTorch-origin model and a float16 model: open, select, pin, undo, type metadata, validate, export; after each step
each graph pane, read back from the X server, is not blank and the views agree with the document."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.gui


@pytest.fixture
def display(tmp_path):
    """A private Xvfb display (1280×800) for this test; stopped afterwards."""
    missing = [tool for tool in ("Xvfb", "xdotool") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {' and '.join(missing)} (apt-get install xvfb xdotool)")
    for n in range(150, 200):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            break
    server = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{n}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f":{n}"
    server.terminate()
    server.wait(10)


def test_walk_on_a_real_x_server_shows_each_step(display, corpus, tmp_path):
    env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb", PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "gui_walk.py"), "--corpus", str(corpus),
                          "--out", str(tmp_path / "walk")], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "3 models: 0 problem(s)" in run.stdout
    shots = list((tmp_path / "walk").glob("*-export-tflite.png"))
    assert len(shots) == 3
