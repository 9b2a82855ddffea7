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

from inspector.core.io.atomic import write_atomic
from inspector.core.session.session_file import SessionError, read_decisions


def default_folder() -> Path:
    base = QStandardPaths.writableLocation(QStandardPaths.AppLocalDataLocation) or str(Path.home() / ".layout-inspector")
    return Path(base) / "autosave"


class Autosave:
    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder is not None else default_folder()
        self.notice = ""                 # set by pending(): a damaged autosave was set aside

    def path_for(self, model: str) -> Path:
        key = hashlib.sha1(str(Path(model).resolve()).encode()).hexdigest()[:12]
        return self.folder / f"{Path(model).stem}-{key}.autosave.json"

    def encode(self, session) -> tuple[Path, bytes, str]:
        """(side file, its bytes, the model it protects): the session's decisions now, for store() to write later,
        from any thread."""
        data = dict(session.decisions(), model_path=str(Path(session.path).resolve()))
        return self.path_for(session.path), (json.dumps(data, indent=2) + "\n").encode(), session.path

    def store(self, path: Path, data: bytes, model: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return write_atomic(path, data, protect=[model])

    def discard(self, session) -> None:
        try:
            self.path_for(session.path).unlink()
        except FileNotFoundError:
            pass

    def pending(self, session):
        """(path, Decisions) of the autosave worth offering for this session, or None. An autosave that fails
        the session-file checks is set aside as NAME.corrupt and `notice` says so in one line."""
        self.notice = ""
        p = self.path_for(session.path)
        if not p.is_file():
            return None
        saved = Path(session.default_session_path())
        if saved.is_file() and saved.stat().st_mtime >= p.stat().st_mtime:
            return None
        try:
            d = read_decisions(str(p), session.graph)
        except SessionError as e:
            self.notice = self.set_aside(p, e)
            return None
        current = session.decisions()
        if (d.pins, d.metadata.to_dict()) == (current["pins"], current["metadata"]) and \
                all(current["options"].get(k) == v for k, v in d.options.items()):
            return None
        return p, d

    @staticmethod
    def set_aside(p: Path, e: SessionError) -> str:
        corrupt = p.with_name(p.name + ".corrupt")
        try:
            os.replace(p, corrupt)
        except OSError as err:
            return f"The autosave {p.name} is damaged and could not be set aside ({err.strerror}): {e.problems[0]}"
        return f"The autosave was damaged and is set aside as {corrupt.name}: {e.problems[0]}"
