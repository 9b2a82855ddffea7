"""The run check (ort_check) started ahead: a child process forked when `convert` starts imports ONNX Runtime while
the parent converts, on another core, so a cold start pays about max(conversion, ONNX Runtime's import) instead of
their sum. The parent then stages its output, sends the child that file's path (ONNX Runtime reads the file: the
model is serialised once) and waits for the verdict before anything is renamed into place. Only the standard
library here: this module is imported before NumPy and ONNX are.

Where forking is unavailable or unsafe (another thread running, ONNX Runtime already imported, so nothing to hide),
or when the child fails in any way, the check runs in-process exactly as before.
"""
from __future__ import annotations

import json
import os
import struct
import sys

_HEAD = struct.Struct("<QQ")                    # model bytes, then request bytes


class Ahead:
    def __init__(self):
        self.pid: int | None = None
        self._pending = None                        # (model, sizes, its bytes) sent, or to check in-process
        threading = sys.modules.get("threading")
        if not hasattr(os, "fork") or "onnxruntime" in sys.modules or \
                (threading is not None and threading.active_count() > 1):
            return
        fds = []
        try:
            fds = [*os.pipe(), *os.pipe()]
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            return
        down_r, down_w, up_r, up_w = fds
        if pid == 0:                                # the child: never returns
            os.close(down_w)
            os.close(up_r)
            _child(down_r, up_w)
        os.close(down_r)
        os.close(up_w)
        self.pid, self._down, self._up = pid, down_w, up_r

    @property
    def forked(self) -> bool:
        return self.pid is not None

    def submit(self, model, sizes: dict, data) -> None:
        """Send the converted model to the child (it starts building its ONNX Runtime session at once). `data`: its
        file's path (the export staged: ONNX Runtime reads it, no copy passes through here), its bytes, or (length,
        pieces) as Session.pieces makes them, streamed to the child without being joined; with no child they are
        joined for the in-process check (its ONNX Runtime session holds a copy of its own)."""
        path = data if isinstance(data, str) else None
        length, pieces = (0, ()) if path else (len(data), (data,)) if isinstance(data, bytes) else data
        if self.pid is None:
            self._pending = (model, sizes, path or b"".join(pieces))
            return
        self._pending = (model, sizes, path)
        from .ort_check import has_loop
        request = json.dumps({"run": not has_loop(model.graph), "path": path,
                              "sizes": {k: list(v) for k, v in sizes.items()}}).encode()
        try:
            _write_all(self._down, _HEAD.pack(length, len(request)) + request)
            for piece in pieces:
                _write_all(self._down, piece)
                del piece
        except OSError:                             # the child is gone: the verdict comes from in-process
            self._stop()
        finally:
            if self.pid is not None:
                os.close(self._down)
                self._down = -1

    def verdict(self) -> str | None:
        """ort_check's answer for the model submitted: a note, None, or its ConversionError raised."""
        from inspector.core.ir.errors import ConversionError
        from .ort_check import check_bytes, has_loop
        model, sizes, data = self._pending
        reply = self._reply() if self.pid is not None else None
        if reply is None:       # in-process, on the file or bytes already made (not serialised again) if kept
            return check_bytes(data if data is not None else model.SerializeToString(), not has_loop(model.graph),
                               sizes)
        if "error" in reply:
            raise ConversionError(reply["error"])
        return reply["note"]

    def close(self) -> None:
        """Stop the child if no verdict was asked for (a conversion that failed before its check): an error is
        not kept waiting for an import it no longer needs."""
        if self.pid is not None:
            import signal
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._stop()

    def _reply(self):
        try:
            text = _read_all(self._up)
        except OSError:
            text = b""
        self._stop()
        try:
            reply = json.loads(text) if text else None
        except ValueError:
            return None
        return reply if isinstance(reply, dict) and ("error" in reply or "note" in reply) else None

    def _stop(self) -> None:
        for fd in (getattr(self, "_down", -1), getattr(self, "_up", -1)):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._down = self._up = -1
        try:
            if self.pid is not None:
                os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = None


def _child(down: int, up: int) -> None:
    """Import ONNX Runtime, wait for a model, check it, answer in JSON; any failure answers nothing (the parent
    then checks in-process). Leaves by os._exit: none of the parent's buffers, atexit handlers or finalizers run."""
    try:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)        # an interrupt is the parent's to report
        import onnxruntime  # noqa: F401  (the point: this import overlaps the parent's conversion)
        head = _read_exact(down, _HEAD.size)
        if len(head) == _HEAD.size:
            n_data, n_request = _HEAD.unpack(head)
            request = json.loads(_read_exact(down, n_request))
            data = request.get("path") or _read_exact(down, n_data)
            if isinstance(data, str) or len(data) == n_data:
                from inspector.core.ir.errors import ConversionError
                from .ort_check import check_bytes
                try:
                    reply = {"note": check_bytes(data, request["run"],
                                                 {k: tuple(v) for k, v in request["sizes"].items()})}
                except ConversionError as e:
                    reply = {"error": str(e)}
                _write_all(up, json.dumps(reply).encode())
    except BaseException:                                     # noqa: BLE001 (the parent checks in-process)
        pass
    finally:
        os._exit(0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[: 1 << 24]):]


def _read_exact(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _read_all(fd: int) -> bytes:
    parts: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
