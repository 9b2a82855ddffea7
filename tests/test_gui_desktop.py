"""The real application on a real (virtual) X desktop: `python -m inspector gui MODEL` with the xcb platform plugin
maps a window. Catches what offscreen tests cannot: a missing xcb library aborts Qt before any window exists."""
from __future__ import annotations

import subprocess
import sys

import pytest

from inspector.resources import SAMPLE, path as resource

pytestmark = pytest.mark.gui


def test_app_maps_a_window_under_xvfb(xserver, tmp_path):
    env = xserver.env()
    # a fresh home: the app's settings, recent files and autosave never touch the user's own
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_STATE_HOME=str(tmp_path / "state"))
    model = str(resource(SAMPLE))
    app = subprocess.Popen([sys.executable, "-m", "inspector", "gui", model], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        found = xserver.wait_for_window(pid=app.pid, name="Layout Inspector", timeout=90, alive=app)
        assert app.poll() is None, f"the app exited ({app.returncode}): {app.stdout.read()[-2000:]}"
        assert found, "no visible Layout Inspector window within 90 s"
        title = xserver.xdotool("getwindowname", found[0]).stdout.strip()
        assert "sample" in title, title      # the model named on the command line is the one shown
        geometry = xserver.xdotool("getwindowgeometry", found[0]).stdout
        assert "Geometry:" in geometry and "Geometry: 0x0" not in geometry
    finally:
        app.terminate()
        try:
            app.wait(10)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()
