"""`install-desktop`: the XDG files it writes are well formed, name this interpreter, and `--uninstall` removes
exactly them."""
from __future__ import annotations

import configparser
import errno
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

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


def _files(base) -> dict[str, bytes | None]:
    return {str(p.relative_to(base)): (p.read_bytes() if p.is_file() else None) for p in sorted(base.rglob("*"))}


def test_uninstall_removes_the_folders_and_mime_caches_install_made_and_only_those(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    mine = tmp_path / "icons" / "mine.png"              # a folder on the way that was there before
    mine.parent.mkdir()
    mine.write_bytes(b"\x89PNG")
    assert main(["install-desktop"]) == 0
    assert main(["install-desktop"]) == 0               # installed again: still knows what the first made
    made = set(_files(tmp_path)) - {"icons", "icons/mine.png"}
    assert {"mime/mime.cache", "mime/globs2", "icons/hicolor/scalable/apps"} <= made
    assert main(["install-desktop", "--uninstall"]) == 0
    assert _files(tmp_path) == {"icons": None, "icons/mine.png": b"\x89PNG"}
    assert "removed " + str(tmp_path / "mime" / "mime.cache") in capsys.readouterr().out


def test_uninstall_keeps_the_mime_caches_others_types_need(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert main(["install-desktop"]) == 0
    other = tmp_path / "mime" / "packages" / "other.xml"
    other.write_text('<?xml version="1.0"?><mime-info xmlns="http://www.freedesktop.org/standards/shared-mime-info">'
                     '<mime-type type="application/x-other"><glob pattern="*.other"/></mime-type></mime-info>')
    assert main(["install-desktop", "--uninstall"]) == 0
    left = _files(tmp_path)
    assert "mime/packages/other.xml" in left and "mime/globs2" in left and "applications" not in left
    assert b"*.other" in left["mime/globs2"] and b"*.tflite" not in left["mime/globs2"]


@pytest.mark.parametrize("attack", ["XDG_DATA_HOME is a file", "icons is a file", "the disk fills on the MIME file",
                                    "the disk fills over an earlier install"])
def test_install_is_all_or_nothing_with_one_error_line(attack, tmp_path, monkeypatch, capsys):
    from inspector import desktop
    base = tmp_path / "share"
    base.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(base))
    if attack == "XDG_DATA_HOME is a file":
        base.rmdir()
        base.write_text("x")
    elif attack == "icons is a file":
        (base / "icons").write_text("x")
    else:
        if "earlier" in attack:
            assert main(["install-desktop"]) == 0
            entry = base / "applications" / "layout-inspector.desktop"
            entry.write_bytes(entry.read_bytes().replace(b"Version=", b"Version=0.0.1-"))
            capsys.readouterr()
        real = desktop.write_atomic

        def full(path, data, *a, **k):
            if path.name.endswith(".xml"):
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            return real(path, data, *a, **k)
        monkeypatch.setattr(desktop, "write_atomic", full)
    before = _files(tmp_path)
    assert main(["install-desktop"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: cannot install the desktop entry: ")
    assert "Traceback" not in err and ("nothing installed" in err or "not a folder" in err)
    assert _files(tmp_path) == before                   # no menu entry without its icon; an earlier one intact
