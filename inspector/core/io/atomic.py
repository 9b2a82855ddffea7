"""Atomic writes: a run's files are either all replaced whole or all left as they were, never half-written.

Every export, session save, `edit`, `convert -o` and report goes through an OutputSet (write_atomic is a set of
one). The targets are checked as one set before any work: each is a regular file or absent, none is an input or
another target (after resolving links), no symlink loop, no name over the file system's limit. Each file's bytes go
to a temporary in the target's own folder (so the rename never crosses a file system) and are fsynced; commit()
renames them all into place at the end. On any failure every temporary is removed and files already renamed get
their old contents back, and a WriteError says what happened.

Temporaries are named `.layout-inspector.NAME.XXXXXXXX.tmp`. A killed run leaves one behind; the next write into
that folder removes ours older than STALE_SECONDS (never another program's file, never a fresh one of a run in
progress). A batch's workers each write one temporary its parent named (`temporary_for`, `stage`), so the parent
removes it if the worker dies and `adopt`s it into the set otherwise.
"""
from __future__ import annotations

import errno
import os
import random
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from inspector.core.ir.errors import InspectorError

TMP_PREFIX = ".layout-inspector."
TMP_SUFFIX = ".tmp"
_TMP = re.compile(r"^\.layout-inspector\..*\.[a-z0-9_]{8}\.tmp$")
STALE_SECONDS = 300             # a run's write phase takes seconds; a temporary this old was left by a killed run
UNCHANGED = "; nothing was written and any existing file is unchanged"
NAME_MAX = 255                  # bytes in one path component (Linux, macOS, Windows)
Data = bytes | Iterable[bytes]  # a file's bytes, or its pieces in order (onnx_bytes.pieces: no whole copy held)

_REASONS = {
    errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied", errno.EPERM: "the operation is not permitted",
    errno.EROFS: "the file system is read-only", errno.EFBIG: "the file is larger than this system allows",
    errno.ENOENT: "the folder does not exist", errno.ENOTDIR: "a part of the path is not a folder",
    errno.EISDIR: "the path is a folder", errno.ELOOP: "a symbolic link loop",
    errno.ENAMETOOLONG: "the file name is too long",
}


def reason(e: OSError) -> str:
    """An OSError in words, without its errno number."""
    return _REASONS.get(e.errno or 0, e.strerror or str(e))


class WriteError(InspectorError):
    """A file could not be written; the message says why and that nothing was changed."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _resolve(p: Path) -> Path:
    """Where a path leads; an input that is a symlink loop leads nowhere (its reader refuses it)."""
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p.absolute()


def _resolve_in(p: Path, folders: dict[str, str]) -> str:
    """str(_resolve(p)), each folder resolved once (`folders` caches them): a batch resolves thousands of inputs
    in a few folders."""
    head, name = os.path.split(p)
    if name in ("", ".", "..") or os.path.islink(p):
        return str(_resolve(p))
    if head not in folders:
        folders[head] = str(_resolve(Path(head or ".")))
    return os.path.join(folders[head], name)


def _path(p: str | Path) -> Path:
    """Path(p).expanduser(), without re-parsing a Path (a batch makes thousands)."""
    p = p if isinstance(p, Path) else Path(p)
    return p.expanduser() if str(p)[:1] == "~" else p


def _target(path: str | Path, shown: str) -> tuple[Path, os.stat_result | None]:
    """Where the bytes end up, and its stat if it exists: a symlink is followed so the link itself survives the
    replace. WriteError for a loop, an over-long name, a folder or an existing file that is not a regular file (a
    FIFO or device would be replaced by a regular file)."""
    p = _path(path)
    if any(len(part) > NAME_MAX for part in os.fsencode(p).split(os.fsencode(os.sep))):
        raise WriteError(shown, f"the file name is longer than {NAME_MAX} bytes")
    try:
        target = p.resolve() if os.path.islink(p) else p.absolute()
        st = os.stat(target)
    except RuntimeError:                        # pathlib's "Symlink loop"
        raise WriteError(shown, _REASONS[errno.ELOOP]) from None
    except FileNotFoundError:                   # a new file (or a dangling link: written where it points)
        return target, None
    except OSError as e:
        raise WriteError(shown, reason(e)) from None
    if stat.S_ISDIR(st.st_mode):
        raise WriteError(shown, _REASONS[errno.EISDIR])
    if not stat.S_ISREG(st.st_mode):
        raise WriteError(shown, "it exists and is not a regular file (a pipe, device or socket is never replaced)")
    return target, st


class OutputSet:
    """The files one run writes, checked together up front and renamed together at the end.

        out = OutputSet(inputs=[model])            # inputs are never replaced (`protect`)
        out.add(args.output); out.add(args.report) # WriteError now, before any work, for a bad or clashing target
        ... work ...
        with out:                                  # any exception inside removes every temporary
            out.write(args.output, onnx_bytes); out.write(args.report, json_bytes)
        # leaving the block without error renames all of them into place (commit)
    """

    def __init__(self, inputs: Iterable[str | Path | None] = ()):
        self._inputs = [_path(p) for p in inputs if p]
        self._folders: set[str] = set()                # target folders known to exist
        self._input_keys: dict | None = None            # resolved path or (dev, inode) -> the inputs it names
        self._targets: dict[Path, str] = {}             # resolved target -> the name the user gave
        self._target_ids: dict[tuple[int, int], str] = {}
        self._shown: dict[str, Path] = {}               # the name the user gave -> resolved target
        self._staged: dict[Path, str] = {}              # resolved target -> its temporary file
        self._then: dict[Path, Callable[[str], None]] = {}     # resolved target -> told its temporary once written

    def _inputs_at(self, target: Path, ident: tuple[int, int] | None) -> list[Path]:
        """The inputs `target` is (by path after links, or by identity); each input is looked at once per set,
        so checking N targets against N inputs stays linear."""
        if self._input_keys is None:
            self._input_keys = {}
            folders: dict[str, str] = {}
            for src in self._inputs:
                for key in {_resolve_in(src, folders), _identity(src)} - {None}:
                    self._input_keys.setdefault(key, []).append(src)
        return self._input_keys.get(str(target), []) + (self._input_keys.get(ident, []) if ident else [])

    def add(self, path: str | Path, *, may_replace: str | Path | None = None, hint: str = "") -> Path:
        """Check one target against the file system, the inputs (except `may_replace`, the one input this target
        may overwrite: `--force`; `hint` says how to allow it) and the targets added before."""
        shown = str(path)
        target, st = _target(path, shown)
        ident = (st.st_dev, st.st_ino) if st else None
        for src in self._inputs_at(target, ident):
            if may_replace is not None and src == _path(may_replace):
                continue
            raise WriteError(shown, f"it is the source model ({src}); choose another file name "
                                    f"(the source is never replaced{hint})")
        other_shown = self._targets.get(target) or (self._target_ids.get(ident) if ident else None)
        if other_shown is not None:
            raise WriteError(shown, f"it is the same file as {other_shown}; each output needs its own file")
        folder = os.path.dirname(target)
        if folder not in self._folders:
            if not os.path.isdir(folder):
                raise WriteError(shown, f"folder {target.parent} does not exist")
            self._folders.add(folder)
        self._targets[target] = shown
        self._shown[shown] = target
        if ident:
            self._target_ids[ident] = shown
        return target

    def _resolved(self, path: str | Path) -> Path:
        target = self._shown.get(str(path))
        return target if target is not None else self.add(path)

    def write(self, path: str | Path, data: Data) -> str:
        """Stage `data` for `path` in a temporary beside it (added first if it was not); returns the temporary."""
        target = self._resolved(path)
        remove_stale(target.parent)
        try:
            self._staged[target] = _stage(target, data, None)
        except OSError as e:
            self.abort()
            raise WriteError(self._targets[target], reason(e) + UNCHANGED) from None
        then = self._then.pop(target, None)
        if then is not None:
            then(self._staged[target])
        return self._staged[target]

    def when_staged(self, path: str | Path, then: Callable[[str], None]) -> None:
        """Call `then` with the temporary of `path` as soon as its bytes are written, before anything else happens
        to it (the CLI's run check starts reading it while export runs the checker)."""
        self._then[self._resolved(path)] = then

    def adopt(self, path: str | Path, tmp: str) -> None:
        """Take `tmp`, a temporary another process wrote for `path` with `stage`, into the set: renamed at commit,
        removed at abort."""
        self._staged[self._resolved(path)] = tmp

    def staged(self) -> int:
        return len(self._staged)

    def commit(self) -> list[Path]:
        """Rename every staged file into place; if one rename fails, the ones before it are put back."""
        done: list[tuple[Path, str | None]] = []            # (target, backup of what it replaced)
        try:
            for target, tmp in list(self._staged.items()):
                backup = _backup(target)
                done.append((target, backup))
                os.replace(tmp, target)
                del self._staged[target]
        except BaseException as e:
            for target, backup in reversed(done):
                if target not in self._staged:               # renamed: restore (or remove) it
                    if backup is not None:
                        os.replace(backup, target)
                    else:
                        target.unlink(missing_ok=True)
                elif backup is not None:
                    Path(backup).unlink(missing_ok=True)
            self.abort()
            if isinstance(e, OSError):
                shown = self._targets.get(done[-1][0], "") if done else ""
                raise WriteError(shown, reason(e) + UNCHANGED) from None
            raise
        for target, backup in done:
            if backup is not None:
                Path(backup).unlink(missing_ok=True)
        for folder in {t.parent for t, _ in done}:
            _sync_folder(folder)
        return [t for t, _ in done]

    def abort(self) -> None:
        """Remove every temporary written so far; the targets are untouched."""
        for tmp in self._staged.values():
            Path(tmp).unlink(missing_ok=True)
        self._staged.clear()

    def __enter__(self) -> "OutputSet":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def write_atomic(path: str | Path, data: Data, *, protect: Iterable[str | Path] = ()) -> Path:
    """Write `data` to `path` all-or-nothing; returns the path written. WriteError on any failure."""
    out = OutputSet(protect)
    target = out.add(path)
    with out:
        out.write(path, data)
    return target


def temporary_for(target: Path) -> str:
    """A fresh temporary's name beside `target` (a resolved path: `OutputSet.add`'s), in the pattern stale
    temporaries are recognised by."""
    folder, name = os.path.split(target)
    return os.path.join(folder, f"{TMP_PREFIX}{name[:64]}.{random.getrandbits(32):08x}{TMP_SUFFIX}")


def stage(target: Path, data: Data, tmp: str, shown: str) -> None:
    """Write `data` to the new file `tmp` (`temporary_for(target)`), fsynced, with the mode `target` will have;
    WriteError on failure, with `tmp` removed. A batch's worker does this; its parent adopts or removes `tmp`."""
    try:
        _stage(target, data, tmp)
    except OSError as e:
        raise WriteError(shown, reason(e)) from None


def _stage(target: Path, data: Data, tmp: str | None) -> str:
    """`data` (bytes, or pieces of them written one after the other) in a new temporary beside `target`
    (mkstemp's, or the given name); the temporary is removed on any failure, KeyboardInterrupt included."""
    name: str | None                             # None once the temporary is complete: kept
    if tmp is None:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f"{TMP_PREFIX}{target.name[:64]}.", suffix=TMP_SUFFIX)
    else:
        fd, name = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), tmp
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
                view = memoryview(piece)
                while view:                      # os.write may write less than asked on a nearly full disk
                    view = view[f.write(view):]
                del view, piece                  # a large piece is freed before the next one is made
            f.flush()
            os.fsync(f.fileno())
        os.chmod(name, _mode(target))
        done, name = name, None
        return done
    finally:
        if name is not None:
            Path(name).unlink(missing_ok=True)


def touch(paths: Iterable[str]) -> None:
    """Mark temporaries of a run still in progress as fresh (a long batch's staged outputs are not stale)."""
    for p in paths:
        try:
            os.utime(p)
        except OSError:
            continue


def _backup(target: Path) -> str | None:
    """A hard link to the file `target` is about to replace, so a failed commit can put it back."""
    if not target.exists():
        return None
    name = temporary_for(target)
    try:
        os.link(target, name)
    except OSError:                               # no hard links here (some network or FAT file systems)
        return None
    return name


def remove_stale(folder: Path) -> None:
    """Remove our own temporaries older than STALE_SECONDS from `folder` (left by a killed run)."""
    cutoff = time.time() - STALE_SECONDS
    uid = os.getuid() if hasattr(os, "getuid") else None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for e in entries:
        if not _TMP.match(e.name):
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff and (uid is None or st.st_uid == uid):
                os.unlink(e.path)
        except OSError:
            continue


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
