"""The project installs like any Python desktop app: a wheel carries everything the app reads at run time, and from
a clean virtual environment outside the checkout the CLI converts and validates and the window starts."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from inspector import __version__

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # no build isolation: the build backend comes from the test environment, so no download is needed
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "-o", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel; its dependencies are borrowed from the test environment through a
    path entry (a .pth line adds a folder without running that folder's own .pth files, so the checkout's
    editable install stays invisible)."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=clean_env())
    py = venv / "bin" / "python"
    wheel = next(dist.glob("*.whl"))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   timeout=300, env=clean_env())
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, env=clean_env()).stdout.strip()
    Path(site, "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def clean_env(**extra) -> dict[str, str]:
    """The environment without anything that points Python at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | extra


def run_installed(venv: Path, *args, cwd: Path, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, env=clean_env(**(env or {})), capture_output=True, text=True,
                          timeout=timeout)


def test_wheel_carries_resources_and_no_tests_or_corpus(dist):
    names = zipfile.ZipFile(next(dist.glob("*.whl"))).namelist()
    for needed in ("inspector/resources/palette.json", "inspector/resources/sample.tflite",
                   "inspector/resources/layout-inspector.svg", "inspector/gui/main_window.py"):
        assert needed in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "tools/", "resources/"))]
    models = [n for n in names if n.endswith((".tflite", ".onnx"))]
    assert models == ["inspector/resources/sample.tflite"]
    meta = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(next(dist.glob("*.whl"))).read(meta).decode()
    assert f"Version: {__version__}" in text and "License-Expression: Apache-2.0" in text


def test_installed_wheel_converts_validates_and_opens_the_window(installed, corpus, tmp_path):
    exe = installed / "bin" / "layout-inspector"
    where = run_installed(installed, str(installed / "bin" / "python"), "-c",
                          "import inspector; print(inspector.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(installed)          # the wheel, not the checkout
    version = run_installed(installed, str(exe), "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"layout-inspector {__version__}"
    module = run_installed(installed, str(installed / "bin" / "python"), "-m", "inspector", "--version", cwd=tmp_path)
    assert module.stdout == version.stdout

    model = corpus / "keras" / "mobilenetv2_fp32.tflite"
    conv = run_installed(installed, str(exe), "convert", str(model), "-o", "m.onnx", cwd=tmp_path)
    assert conv.returncode == 0, conv.stderr
    val = run_installed(installed, str(exe), "validate", str(model), "m.onnx", cwd=tmp_path)
    assert val.returncode == 0, val.stdout + val.stderr

    # the window from the installed package: start page, then the bundled sample drawn in both panes
    script = textwrap.dedent("""
        from PySide6.QtCore import QSettings
        from inspector.gui.app import application
        from inspector.gui.main_window import ONNX, TFLITE, MainWindow
        app = application()
        w = MainWindow(QSettings("settings.ini", QSettings.IniFormat))
        w.show()
        assert w.stack.currentWidget() is w.start_page
        w.start_page.sample_button.click()
        import time
        t = time.monotonic()
        while not (w.idle and TFLITE in w.scenes and ONNX in w.scenes) and time.monotonic() - t < 120:
            app.processEvents()
            time.sleep(0.01)
        print(len(w.scenes[TFLITE].nodes), len(w.scenes[ONNX].nodes))
    """)
    gui = run_installed(installed, str(installed / "bin" / "python"), "-c", script, cwd=tmp_path,
                        env={"QT_QPA_PLATFORM": "offscreen"})
    assert gui.returncode == 0, gui.stderr
    tflite_nodes, onnx_nodes = map(int, gui.stdout.split()[-2:])
    assert tflite_nodes >= 16 and onnx_nodes >= 16           # the sample has 16 ops (tools/make_sample.py)
