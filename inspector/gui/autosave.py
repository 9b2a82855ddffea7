"""Autosave: the session's decisions go to a side file after every edit, so a crash or a kill loses nothing.

The side file lives in the application's data folder (model folders may be read-only), one per model path and
window. On the next open of that model the window offers to restore each one newer than the model's session file
holding other decisions than the ones just loaded, and says when the model is open in another window too.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import NamedTuple

try:
    import fcntl
except ImportError:                      # Windows: a lock names its process instead
    fcntl = None

from PySide6.QtCore import QStandardPaths

from inspector.core.io.atomic import write_atomic
from inspector.core.session.session_file import SessionError, read_decisions


_INSTANCES = itertools.count(1)


def default_folder() -> Path:
    base = QStandardPaths.writableLocation(QStandardPaths.AppLocalDataLocation) or str(Path.home() / ".layout-inspector")
    return Path(base) / "autosave"


class Offer(NamedTuple):
    """An autosave worth offering: its file, its decisions, and whether a window still open writes it."""
    path: Path
    decisions: object
    live: bool


class Autosave:
    """One window's autosave: its own side file per model (`NAME-KEY.PID-N.autosave.json`), so two windows on one
    model never overwrite each other's unsaved decisions, and a lock file beside it (`….lock`, held with flock while
    the model is open here) that tells other windows this one is alive."""

    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder is not None else default_folder()
        self.notice = ""                 # set by pending(): a damaged autosave was set aside
        self.instance = f"{os.getpid()}-{next(_INSTANCES)}"
        self._lock: tuple[Path, int] | None = None

    @staticmethod
    def _key(model: str) -> str:
        key = hashlib.sha1(str(Path(model).resolve()).encode()).hexdigest()[:12]
        return f"{Path(model).stem}-{key}"

    def path_for(self, model: str) -> Path:
        return self.folder / f"{self._key(model)}.{self.instance}.autosave.json"

    def _lock_for(self, path: Path) -> Path:
        """The lock file of the window that writes the autosave `path` (an older, unnamed one has none)."""
        return path.with_name(path.name.removesuffix(".autosave.json") + ".lock")

    def others(self, model: str) -> list[Path]:
        """Every autosave of `model` but this window's (an older version's unnamed one included)."""
        key, mine = self._key(model), self.path_for(model).name
        try:
            names = os.listdir(self.folder)
        except OSError:
            return []
        return sorted((self.folder / n for n in names if n != mine and n.endswith(".autosave.json") and
                       (n == f"{key}.autosave.json" or n.startswith(f"{key}."))),
                      key=lambda p: _mtime_of(p), reverse=True)

    def hold(self, model: str | None) -> int:
        """This window now shows `model` (None: nothing): hold its lock, release the one before; returns how many
        other windows hold the same model open."""
        self.release()
        if model is None:
            return 0
        lock = self._lock_for(self.path_for(model))
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return 0                     # no lock: the autosave itself will say why it cannot be written
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, str(os.getpid()).encode())
        self._lock = (lock, fd)
        key = self._key(model)
        try:
            names = os.listdir(self.folder)
        except OSError:
            return 0
        return sum(1 for n in names if n.startswith(f"{key}.") and n.endswith(".lock") and
                   self.folder / n != lock and _alive(self.folder / n))

    def release(self) -> None:
        if self._lock is not None:
            lock, fd = self._lock
            self._lock = None
            lock.unlink(missing_ok=True)
            os.close(fd)

    def encode(self, session) -> tuple[Path, bytes, str]:
        """(side file, its bytes, the model it protects): the session's decisions now, for store() to write later,
        from any thread."""
        data = dict(session.decisions(), model_path=str(Path(session.path).resolve()))
        return self.path_for(session.path), (json.dumps(data, indent=2) + "\n").encode(), session.path

    def store(self, path: Path, data: bytes, model: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return write_atomic(path, data, protect=[model])

    def discard(self, session, path: Path | None = None) -> None:
        """Remove this window's autosave (or `path`, one offered and not written by a window still open, with the
        lock its killed window left)."""
        try:
            (path or self.path_for(session.path)).unlink()
        except FileNotFoundError:
            pass
        if path is not None and not _alive(self._lock_for(path)):
            self._lock_for(path).unlink(missing_ok=True)

    def pending(self, session) -> list[Offer]:
        """The autosaves worth offering for this session, newest first: this window's and every other window's,
        newer than the model's session file, holding other decisions than the ones just loaded. One that fails
        the session-file checks is set aside as NAME.corrupt and `notice` says so in one line."""
        self.notice = ""
        found = []
        saved = Path(session.default_session_path())
        since = _mtime_of(saved) if saved.is_file() else None
        current = session.decisions()
        for p in [self.path_for(session.path), *self.others(session.path)]:
            if not p.is_file() or (since is not None and since >= _mtime_of(p)):
                continue
            try:
                d = read_decisions(str(p), session.graph)
            except SessionError as e:
                self.notice = self.set_aside(p, e)
                continue
            if (d.pins, d.metadata.to_dict()) == (current["pins"], current["metadata"]) and \
                    all(current["options"].get(k) == v for k, v in d.options.items()):
                continue
            found.append(Offer(p, d, p != self.path_for(session.path) and _alive(self._lock_for(p))))
        return found

    @staticmethod
    def set_aside(p: Path, e: SessionError) -> str:
        corrupt = p.with_name(p.name + ".corrupt")
        try:
            os.replace(p, corrupt)
        except OSError as err:
            return f"The autosave {p.name} is damaged and could not be set aside ({err.strerror}): {e.problems[0]}"
        return f"The autosave was damaged and is set aside as {corrupt.name}: {e.problems[0]}"


def _mtime_of(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _alive(lock: Path) -> bool:
    """Whether a window holds `lock`: its flock is taken (a killed process's is released by the kernel); without
    flock, whether the process it names runs."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
        pid = int(os.read(fd, 32) or b"0")
        os.kill(pid, 0)
        return pid > 0
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)
