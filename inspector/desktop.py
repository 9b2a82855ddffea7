"""Linux desktop integration: a .desktop entry, the icon and MIME types for .tflite/.onnx in the XDG user folders,
so file managers offer "Open with Layout Inspector". Every file written carries our name; uninstall removes only
those files."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from inspector.core.io.atomic import WriteError, write_atomic
from inspector.core.ir.errors import InspectorError
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


class DesktopError(InspectorError):
    """install-desktop could not do all it had to; what it says was undone or is left is exact."""


CREATED_KEY = "X-Layout-Inspector-Created"      # in our desktop entry: what install made besides its 3 files


def _tree(base: Path) -> set[Path]:
    """The paths install can create: the caches' folders' contents and the folders leading to our files."""
    found = set()
    for key, path in targets(base).items():
        for folder in [path.parent, *path.parent.parents]:
            if folder == base or base not in folder.parents:
                break
            if os.path.lexists(folder):
                found.add(folder)
    for folder in (base / "mime", base / "applications"):
        if folder.is_dir() and not folder.is_symlink():
            for root, dirs, files in os.walk(folder):
                found.update(Path(root) / n for n in dirs + files)
    return found


def _created(base: Path) -> list[Path]:
    """What an earlier install recorded in our desktop entry as made by it."""
    try:
        text = targets(base)["desktop"].read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    line = next((x for x in text.splitlines() if x.startswith(CREATED_KEY + "=")), "")
    rels = [r for r in line.partition("=")[2].split(";") if r and ".." not in Path(r).parts and not Path(r).is_absolute()]
    return [base / r for r in rels]


def _remove(paths) -> list[Path]:
    """Remove files, then folders left empty, deepest first; what could not go stays (another's file in it)."""
    gone = []
    for p in sorted(paths, key=lambda p: len(p.parts), reverse=True):
        try:
            if p.is_dir() and not p.is_symlink():
                p.rmdir()
            elif os.path.lexists(p):
                p.unlink()
            else:
                continue
            gone.append(p)
        except OSError:
            pass
    return gone


def _reason(e: OSError) -> str:
    return f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)


def install(base: Path | None = None) -> list[Path]:
    """All or nothing: the 3 files, the folders they need and the caches' files; on a failure everything made is
    removed again (an earlier install's files get their bytes back) and DesktopError says why."""
    base = base or data_home()
    paths = targets(base)
    contents = {"desktop": desktop_entry().encode(), "icon": resource(ICON).read_bytes(), "mime": mime_xml().encode()}
    if os.path.lexists(base) and not base.is_dir():
        raise DesktopError(f"cannot install the desktop entry: {base} (XDG_DATA_HOME) is not a folder; nothing written")
    earlier = _created(base)
    before = _tree(base) | {p for p in paths.values() if os.path.lexists(p)}
    old = {}
    for key, path in paths.items():
        try:
            old[key] = path.read_bytes() if path.is_file() else None
        except OSError:
            old[key] = None
    try:
        for path in paths.values():
            path.parent.mkdir(parents=True, exist_ok=True)
        for key, path in paths.items():
            write_atomic(path, contents[key])
        _refresh(base)
        made = sorted({*(_tree(base) - before - set(paths.values())), *earlier})
        record = (f"{CREATED_KEY}=" + "".join(f"{p.relative_to(base)};" for p in made) + "\n").encode()
        write_atomic(paths["desktop"], contents["desktop"] + record)
    except (OSError, WriteError, subprocess.SubprocessError) as e:
        for key, path in paths.items():
            if old[key] is not None:
                try:
                    write_atomic(path, old[key])
                except (OSError, WriteError):
                    pass
        undo = (_tree(base) | {p for p in paths.values() if os.path.lexists(p)}) - before
        left = sorted(undo - set(_remove(undo)))
        if base / "mime" in before:              # others' types were there: their caches without ours
            _refresh_quietly(base)
        tail = "nothing installed" if not left else f"could not remove {', '.join(map(str, left))}"
        reason = _reason(e) if isinstance(e, OSError) else str(e)
        raise DesktopError(f"cannot install the desktop entry: {reason}; {tail}") from None
    return list(paths.values())


def uninstall(base: Path | None = None) -> list[Path]:
    """Our 3 files, then what install recorded as made by it: the caches' files when nothing else is left for
    them to describe, and the folders it made once empty."""
    base = base or data_home()
    made = _created(base)
    removed = []
    try:
        for path in targets(base).values():
            if path.is_file():
                path.unlink()
                removed.append(path)
    except OSError as e:
        done = f"removed {', '.join(map(str, removed))}" if removed else "nothing removed"
        raise DesktopError(f"cannot uninstall the desktop entry: {_reason(e) if isinstance(e, OSError) else e}; "
                           f"{done}") from None
    _refresh_quietly(base)
    # a cache file install made now describes others' entries when some are left: it stays
    used = {"mime": any((base / "mime" / "packages").glob("*")),
            "applications": any((base / "applications").glob("*.desktop"))}
    return removed + _remove([p for p in made if p.is_dir() or not used.get(p.relative_to(base).parts[0])])


def _refresh_quietly(base: Path) -> None:
    try:
        _refresh(base)
    except (OSError, subprocess.SubprocessError):
        pass                                   # the caches are the desktop's; ours are gone either way
