"""Autosave: the session's decisions go to a side file after every edit, so a crash or a kill loses nothing.

The side file lives in the application's data folder (model folders may be read-only), one per model path. On the
next open of that model the window offers to restore it when it is newer than the model's session file and holds
other decisions than the ones just loaded.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from PySide6.QtCore import QStandardPaths

from inspector.core.atomic import write_atomic


def default_folder() -> Path:
    base = QStandardPaths.writableLocation(QStandardPaths.AppLocalDataLocation) or str(Path.home() / ".layout-inspector")
    return Path(base) / "autosave"


class Autosave:
    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder is not None else default_folder()

    def path_for(self, model: str) -> Path:
        key = hashlib.sha1(str(Path(model).resolve()).encode()).hexdigest()[:12]
        return self.folder / f"{Path(model).stem}-{key}.autosave.json"

    def write(self, session) -> Path:
        data = dict(session.decisions(), model_path=str(Path(session.path).resolve()))
        self.folder.mkdir(parents=True, exist_ok=True)
        return write_atomic(self.path_for(session.path), (json.dumps(data, indent=2) + "\n").encode(),
                            protect=[session.path])

    def discard(self, session) -> None:
        try:
            self.path_for(session.path).unlink()
        except FileNotFoundError:
            pass

    def pending(self, session) -> Path | None:
        """The autosave worth offering for this session, or None."""
        p = self.path_for(session.path)
        if not p.is_file():
            return None
        saved = Path(session.default_session_path())
        if saved.is_file() and saved.stat().st_mtime >= p.stat().st_mtime:
            return None
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            return None
        current = session.decisions()
        if all(data.get(k) == current.get(k) for k in ("pins", "metadata", "options")):
            return None
        return p
