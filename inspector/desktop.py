"""Linux desktop integration: a .desktop entry, the icon and MIME types for .tflite/.onnx in the XDG user folders,
so file managers offer "Open with Layout Inspector". Every file written carries our name; uninstall removes only
those files."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from inspector.core.io.atomic import write_atomic
from inspector.resources import ICON, path as resource

APP_ID = "layout-inspector"
MIME_TYPES = {   # type -> (comment, glob, magic at offset 4 or None); neither is in shared-mime-info
    "application/x-tflite": ("TensorFlow Lite model", "*.tflite", "TFL3"),
    "application/x-onnx": ("ONNX model", "*.onnx", None),
}


def data_home() -> Path:
    value = os.environ.get("XDG_DATA_HOME", "")
    return Path(value) if os.path.isabs(value) else Path.home() / ".local" / "share"


def targets(base: Path | None = None) -> dict[str, Path]:
    base = base or data_home()
    return {"desktop": base / "applications" / f"{APP_ID}.desktop",
            "icon": base / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg",
            "mime": base / "mime" / "packages" / f"{APP_ID}.xml"}


def _exec_line() -> str:
    # the interpreter that runs us now: works for a venv, pipx or a system install alike
    quoted = '"' + sys.executable.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$") + '"'
    return f"{quoted} -m inspector gui %f"


def desktop_entry() -> str:
    from inspector import __version__
    return "\n".join([
        "[Desktop Entry]", "Type=Application", "Name=Layout Inspector",
        "GenericName=TFLite to ONNX converter",
        "Comment=Convert TensorFlow Lite models to ONNX; see, fix and prove the layouts",
        f"Exec={_exec_line()}", f"Icon={APP_ID}", "Terminal=false", "Categories=Development;Science;",
        "MimeType=" + "".join(f"{m};" for m in MIME_TYPES), "StartupWMClass=layout-inspector",
        f"X-Layout-Inspector-Version={__version__}", ""])


def mime_xml() -> str:
    rows = ['<?xml version="1.0" encoding="UTF-8"?>',
            '<mime-info xmlns="http://www.freedesktop.org/standards/shared-mime-info">']
    for mime, (comment, glob, magic) in MIME_TYPES.items():
        rows += [f'  <mime-type type="{mime}">', f"    <comment>{comment}</comment>", f'    <glob pattern="{glob}"/>']
        if magic:
            rows.append(f'    <magic priority="50"><match type="string" offset="4" value="{magic}"/></magic>')
        rows.append("  </mime-type>")
    return "\n".join(rows + ["</mime-info>", ""])


def _refresh(base: Path) -> list[str]:
    """Rebuild the desktop's caches where the tools exist (they are optional: a missing one is not an error)."""
    done = []
    for tool, folder in (("update-mime-database", base / "mime"), ("update-desktop-database", base / "applications")):
        if shutil.which(tool) and folder.is_dir():
            subprocess.run([tool, str(folder)], capture_output=True, timeout=60)
            done.append(tool)
    return done


def install(base: Path | None = None) -> list[Path]:
    paths = targets(base)
    contents = {"desktop": desktop_entry().encode(), "icon": resource(ICON).read_bytes(), "mime": mime_xml().encode()}
    for key, path in paths.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, contents[key])
    _refresh(base or data_home())
    return list(paths.values())


def uninstall(base: Path | None = None) -> list[Path]:
    removed = []
    for path in targets(base).values():
        if path.is_file():
            path.unlink()
            removed.append(path)
    _refresh(base or data_home())
    return removed
