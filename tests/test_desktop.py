"""`install-desktop`: the XDG files it writes are well formed, name this interpreter, and `--uninstall` removes
exactly them."""
from __future__ import annotations

import configparser
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET

from inspector.cli import main
from inspector.resources import ICON, path as resource


def test_install_then_uninstall_in_the_xdg_user_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    other = tmp_path / "applications" / "someone-else.desktop"
    other.parent.mkdir(parents=True)
    other.write_text("[Desktop Entry]\nName=Other\n")
    assert main(["install-desktop"]) == 0
    entry = tmp_path / "applications" / "layout-inspector.desktop"
    icon = tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "layout-inspector.svg"
    mime = tmp_path / "mime" / "packages" / "layout-inspector.xml"
    assert str(entry) in capsys.readouterr().out

    ini = configparser.ConfigParser(interpolation=None)
    ini.optionxform = str
    ini.read(entry)
    d = ini["Desktop Entry"]
    assert d["Type"] == "Application" and d["Icon"] == "layout-inspector"
    assert set(d["MimeType"].strip(";").split(";")) == {"application/x-tflite", "application/x-onnx"}
    argv = shlex.split(d["Exec"])
    assert argv[:4] == [sys.executable, "-m", "inspector", "gui"] and argv[4] == "%f"
    # the command the menu runs really starts our CLI (asked for its version instead of the window)
    out = subprocess.run(argv[:3] + ["--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("layout-inspector ")

    assert icon.read_bytes() == resource(ICON).read_bytes()
    types = {t.get("type"): t for t in ET.parse(mime).getroot()}
    ns = "{http://www.freedesktop.org/standards/shared-mime-info}"
    assert types["application/x-tflite"].find(f"{ns}glob").get("pattern") == "*.tflite"
    assert types["application/x-tflite"].find(f"{ns}magic/{ns}match").get("value") == "TFL3"
    assert types["application/x-onnx"].find(f"{ns}glob").get("pattern") == "*.onnx"

    assert main(["install-desktop", "--uninstall"]) == 0
    assert not entry.exists() and not icon.exists() and not mime.exists()
    assert other.read_text() == "[Desktop Entry]\nName=Other\n"          # nothing of anyone else's
    assert main(["install-desktop", "--uninstall"]) == 0
    assert "nothing to remove" in capsys.readouterr().out
