"""One guarded opener for every file we read: models, ONNX external data, session files and autosaves.

A path from the user or from a model can name anything: `/dev/zero` (a read that never ends), a FIFO (an open
that blocks until someone writes), a folder, or a 4 GB "session". Every input is opened non-blocking and judged by
fstat on the open descriptor (what was checked is what is read): regular files only, and no more bytes than its
kind allows. A refusal is the caller's typed error, one line naming the file and the reason.
"""
from __future__ import annotations

import os
import stat
from typing import Callable

from inspector.core.ir.errors import ModelLoadError

SESSION_LIMIT = 4 << 20          # a session or autosave: pins and metadata, a few kB in practice

Refuse = Callable[[str, str], Exception]       # (path, reason) -> the error to raise


def _open(path: str, refuse: Refuse) -> tuple[int, os.stat_result]:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise refuse(path, _what(path) or e.strerror or str(e)) from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise refuse(path, e.strerror or str(e)) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise refuse(path, f"not a regular file ({_kind(st.st_mode)}); only files are read")
    return fd, st


def file_size(path: str, refuse: Refuse = ModelLoadError) -> int:
    """The size of a regular file, without opening it; refused as read_input would."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise refuse(path, e.strerror or str(e)) from None
    if not stat.S_ISREG(st.st_mode):
        raise refuse(path, f"not a regular file ({_kind(st.st_mode)}); only files are read")
    return st.st_size


def _kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "not a file")


def _what(path: str) -> str:
    """Why open failed when the path is no file at all (a folder on Windows is 'permission denied')."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return "" if stat.S_ISREG(st.st_mode) else f"not a regular file ({_kind(st.st_mode)}); only files are read"


def _read_all(fd: int, want: int, offset: int | None = None) -> bytes:
    """Up to `want` bytes (at `offset`, else from the current position), looping on short reads: Linux returns at
    most 2,147,479,552 bytes per read, and a read may return less at any time. Shorter only at the file's end."""
    first = os.pread(fd, want, offset) if offset is not None else os.read(fd, want)
    if len(first) == want or not first:
        return first
    parts, got = [first], len(first)
    while got < want:
        chunk = os.pread(fd, want - got, offset + got) if offset is not None else os.read(fd, want - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_input(path: str, *, what: str = "file", limit: int | None = None,
               refuse: Refuse = ModelLoadError) -> bytes:
    """The whole file. Refused: anything but a regular file, or more than `limit` bytes."""
    path = str(path)
    fd, st = _open(path, refuse)
    try:
        if limit is not None and st.st_size > limit:
            raise refuse(path, f"{st.st_size} bytes is more than a {what} may hold ({limit} bytes)")
        data = _read_all(fd, st.st_size) if st.st_size else b""
        if len(data) < st.st_size or not st.st_size:     # some files report size 0; some shrink while read
            parts, total = [data], len(data)
            while chunk := os.read(fd, 1 << 30 if limit is None else limit + 1 - total):
                parts.append(chunk)
                total += len(chunk)
                if limit is not None and total > limit:
                    raise refuse(path, f"more than a {what} may hold ({limit} bytes)")
            data = b"".join(parts)
        return data
    except OSError as e:
        raise refuse(path, e.strerror or str(e)) from None
    finally:
        os.close(fd)


def read_head(path: str, n: int, refuse: Refuse = ModelLoadError) -> bytes:
    """The first `n` bytes (to tell a format by its header); fewer only when the file is shorter."""
    fd, _ = _open(path, refuse)
    try:
        return _read_all(fd, n)
    except OSError as e:
        raise refuse(path, e.strerror or str(e)) from None
    finally:
        os.close(fd)


def read_range(path: str, offset: int, length: int | None, refuse: Refuse) -> bytes:
    """`length` bytes at `offset` (None: to the end), after checking the range against the open file's size."""
    fd, st = _open(path, refuse)
    try:
        length = st.st_size - offset if length is None else length
        if offset < 0 or length < 0 or offset + length > st.st_size:
            raise refuse(path, f"range {offset}+{length} is beyond its {st.st_size} bytes")
        data = _read_all(fd, length, offset) if length else b""
        if len(data) < length:                     # the file shrank after fstat
            raise refuse(path, f"range {offset}+{length} ends after {offset + len(data)} bytes: the file shrank")
        return data
    except OSError as e:
        raise refuse(path, e.strerror or str(e)) from None
    finally:
        os.close(fd)
