"""Atomic writes: a file is either replaced whole or left as it was, never half-written.

Every export, session save, `edit` and `convert -o` goes through write_atomic: the bytes go to a temporary file in
the target's own folder (so the final rename never crosses a filesystem), are fsynced, then os.replace puts them
in place. On any failure the temporary file is removed and a WriteError says what happened and that the existing
file is untouched. Paths in `protect` (the source model) are never replaced.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable

from .errors import InspectorError

_REASONS = {
    errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied", errno.EPERM: "the operation is not permitted",
    errno.EROFS: "the file system is read-only", errno.EFBIG: "the file is larger than this system allows",
    errno.ENOENT: "the folder does not exist", errno.ENOTDIR: "a part of the path is not a folder",
    errno.EISDIR: "the path is a folder",
}


class WriteError(InspectorError):
    """A file could not be written; the message says why and that nothing was changed."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _target(path: str | Path) -> Path:
    """Where the bytes end up: a symlink is followed so the link itself survives the replace."""
    p = Path(path).expanduser()
    return p.resolve() if p.is_symlink() else p.absolute()


def write_atomic(path: str | Path, data: bytes, *, protect: Iterable[str | Path] = ()) -> Path:
    """Write `data` to `path` all-or-nothing; returns the path written. WriteError on any failure."""
    shown = str(path)
    target = _target(path)
    for src in protect:
        src = Path(src).expanduser()
        if target == src.resolve() or _same(target, src):
            raise WriteError(shown, f"it is the source model ({src}); choose another file name "
                                    "(the source is never replaced)")
    folder = target.parent
    if target.is_dir():
        raise WriteError(shown, _REASONS[errno.EISDIR])
    if not folder.is_dir():
        raise WriteError(shown, f"folder {folder} does not exist")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            view = memoryview(data)
            while view:                      # os.write may write less than asked on a nearly full disk
                view = view[f.write(view):]
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode(target))
        os.replace(tmp, target)
        tmp = None
        _sync_folder(folder)
    except OSError as e:
        raise WriteError(shown, _REASONS.get(e.errno, e.strerror or str(e))
                         + "; nothing was written and any existing file is unchanged") from None
    finally:
        if tmp is not None:                  # also on KeyboardInterrupt: no stray temporary file
            Path(tmp).unlink(missing_ok=True)
    return target


def _mode(target: Path) -> int:
    """Keep an existing file's permissions; a new file gets the usual umask-filtered 0666 (mkstemp makes 0600)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable; some file systems cannot open a folder, which is harmless."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
