"""Checks started ahead: a child process started with `convert` prepares, on another core while the parent
converts, what a cold start otherwise pays for in sequence. Only the standard library here: this module is imported
before NumPy and ONNX are.

With the run check (ort_check), a forked child imports ONNX Runtime; the parent stages its output, sends the child
that file's path (ONNX Runtime reads the file: the model is serialised once) and waits for the verdict before
anything is renamed into place. Without it (--no-ort-check), a new interpreter at idle priority (it runs on a core
that would otherwise idle, never on the parent's share) makes LiteRT's read check of the input file (LiteRT's import
included) and registers the ONNX checker's operator schemas, needing neither NumPy nor the onnx package. The parent
never waits for those: LiteRT's word is taken if it is there when the parent has read the file, the staged output
goes to the child's checker if its schemas are registered by then, and each check runs in-process otherwise. The
child only vouches for what LiteRT accepts: a file it refuses is checked again in the parent, which words the
refusal as always; the checker's refusal comes back in the in-process check's words.

Where a child cannot be started or forking is unsafe (another thread running), where there is nothing to hide
(ONNX Runtime, or for the checks ONNX, imported already), for files too big to read twice, or when the child fails
in any way, each check runs in-process exactly as before.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import zlib

_HEAD = struct.Struct("<QQ")                    # model bytes, then request bytes
_ANSWER = struct.Struct("<Q")                   # each answer's length, then its JSON
CHECKED_AHEAD = 1 << 20                         # file size up to which the child reads the input and the output
CHECK_WAIT = 0.02                               # seconds the checker's verdict is awaited before it runs here


class Ahead:
    def __init__(self, run: bool = True, model: str | None = None):
        """`run`: ONNX Runtime's run check wanted (its child); else `model`: the TFLite file whose LiteRT read
        check, and whose output's ONNX checker, the child may take on."""
        self.pid: int | None = None
        self._unreaped: int | None = None            # a child killed, its exit not yet collected
        self._pending: tuple | None = None          # (model, sizes, its bytes) sent, or to check in-process
        self._run = run and "onnxruntime" not in sys.modules                    # the child's job
        self._checks = not run and model is not None and "onnx" not in sys.modules and _small(model)
        self._answers: dict = {}                    # what the child said so far: litert, ready, verdict
        self._checking = False                      # the child runs the ONNX checker on the staged output
        self._want_run = run
        threading = sys.modules.get("threading")
        if not hasattr(os, "fork") or not hasattr(os, "posix_spawn") or not sys.executable or \
                not (self._run or self._checks) or \
                (threading is not None and threading.active_count() > 1):
            self._run = self._checks = False
            return
        fds = []
        try:
            fds = [*os.pipe(), *os.pipe()]
            # the checks' child is a new interpreter: a forked one would share this process's pages while it
            # lives, and each page written here would be copied
            pid = _spawn(fds[0], fds[3], model) if self._checks and model is not None else os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            self._run = self._checks = False
            return
        down_r, down_w, up_r, up_w = fds
        if pid == 0:                                # the forked child: never returns
            os.close(down_w)
            os.close(up_r)
            _child(down_r, up_w, None)
        os.close(down_r)
        os.close(up_w)
        self.pid, self._down, self._up = pid, down_w, up_r

    @property
    def forked(self) -> bool:
        return self.pid is not None

    def litert_passed(self, buf: bytes) -> bool:
        """Whether the child's LiteRT has accepted these very bytes (the file as it read it) by now; False leaves
        the check to the caller, which makes it (and words a refusal) as always."""
        litert = self._said("litert", wait=0) if self._checks else None
        return litert is not None and litert.get("passed") is True and litert.get("size") == len(buf) and \
            litert.get("crc") == zlib.crc32(buf)

    def submit(self, model, sizes: dict, data) -> None:
        """Send the converted model to the child. `data`: its file's path (the export staged: the child reads it,
        no copy passes through here), its bytes, or (length, pieces) as Session.pieces makes them, streamed to the
        child without being joined; with no child they are joined for the in-process run check (its ONNX Runtime
        session holds a copy of its own). The checks' child takes only a staged file, once its schemas are ready."""
        path = data if isinstance(data, str) else None
        length, pieces = (0, ()) if path else (len(data), (data,)) if isinstance(data, bytes) else data
        if self._checks and self.pid is not None:
            if path is None or not _small(path) or not self._said("ready", wait=0):
                self.close(reap=False)              # not ready: the checker runs here, not after an import
            else:
                self._checking = True
                self._pending = (model, sizes, path)
                self._send({"check": True, "path": path}, 0, ())
            return
        if self.pid is None:
            self._pending = (model, sizes, path or (b"".join(pieces) if self._want_run else None))
            return
        self._pending = (model, sizes, path)
        from .ort_check import has_loop
        self._send({"run": not has_loop(model.graph), "path": path,
                    "sizes": {k: list(v) for k, v in sizes.items()}}, length, pieces)

    def check(self, model, *, written: bool = False) -> None:
        """The ONNX checker on the exported model (emit.convert.check_model), unless the child runs it on the
        staged file: then a refusal is verdict()'s to raise."""
        if not self._checking:
            from inspector.core.emit.convert import check_model
            check_model(model, written=written)

    def verdict(self) -> str | None:
        """The ONNX checker's refusal if the child ran it, or ort_check's answer for the model submitted if the run
        check is wanted: a note, None, or its ConversionError raised."""
        from inspector.core.ir.errors import ConversionError
        if self._pending is None:                   # nothing submitted: no run check, checker run in-process
            return None
        model, sizes, data = self._pending
        reply = self._said("verdict", wait=CHECK_WAIT if self._checking else None)
        self.close()
        if reply is not None and "error" in reply:
            raise ConversionError(reply["error"])
        if self._checking:
            self._checking = False
            if reply is None:                       # the child is gone or late: the checker runs here
                self.check(model, written=True)
            return None
        if not self._want_run:
            return None
        if reply is None:       # in-process, on the file or bytes already made (not serialised again) if kept
            from .ort_check import check_bytes, has_loop
            return check_bytes(data if data is not None else model.SerializeToString(), not has_loop(model.graph),
                               sizes)
        return reply["note"]

    def close(self, reap: bool = True) -> None:
        """Stop the child if it has nothing more to give (a conversion that failed before its check, or a verdict
        given): an error is not kept waiting for an import it no longer needs. `reap` False: its exit is collected
        at the next close, not awaited now; the checks' child's never is (at idle priority, it may be scheduled to
        end only once this process has: it is then the system's to collect)."""
        if self.pid is not None:
            import signal
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._unreaped, self.pid = self.pid, None
            self._stop()
        if reap and self._unreaped is not None:
            try:
                os.waitpid(self._unreaped, os.WNOHANG if self._checks else 0)
            except ChildProcessError:
                pass
            self._unreaped = None

    def _send(self, request: dict, length: int, pieces) -> None:
        text = json.dumps(request).encode()
        try:
            _write_all(self._down, _HEAD.pack(length, len(text)) + text)
            for piece in pieces:
                _write_all(self._down, piece)
                del piece
        except OSError:                             # the child is gone: the verdict comes from in-process
            self._stop()
        finally:
            if self.pid is not None:
                os.close(self._down)
                self._down = -1

    def _said(self, key: str, wait: float | None):
        """The child's answer `key` if it gave it: awaited at most `wait` seconds (0: only if already there), or
        for as long as the child lives (None)."""
        import select
        while key not in self._answers and self.pid is not None:
            if wait is not None and not select.select([self._up], [], [], wait)[0]:
                return None
            try:
                head = _read_exact(self._up, _ANSWER.size)
                answer = json.loads(_read_exact(self._up, _ANSWER.unpack(head)[0])) if len(head) == _ANSWER.size \
                    else None
            except (OSError, ValueError):
                answer = None
            if not isinstance(answer, dict):        # the child ended: nothing more comes
                self.close()
                break
            self._answers.update(answer)
        return self._answers.get(key)

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


def _small(path: str) -> bool:
    try:
        return os.stat(path).st_size <= CHECKED_AHEAD
    except (OSError, ValueError):
        return False


def _spawn(down: int, up: int, model: str) -> int:
    """Start the checks' child: this interpreter, isolated (no environment, no current folder), with this package's
    folder first on its path, reading requests on its standard input and answering on its standard output."""
    import inspector
    root = os.path.dirname(os.path.dirname(os.path.abspath(inspector.__file__)))
    code = ("import sys; sys.path.insert(0, sys.argv[2]); from inspector.core.proof.ort_ahead import _child; "
            "_child(0, 1, sys.argv[1])")
    pid = os.posix_spawn(sys.executable, [sys.executable, "-I", "-c", code, model, root], os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, down, 0), (os.POSIX_SPAWN_DUP2, up, 1),
                                       (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
    try:                        # it runs on a core that would idle, never on this process's share
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    return pid


def _child(down: int, up: int, model: str | None) -> None:
    """Without `model`: import ONNX Runtime, wait for a model, check it, answer. With it: LiteRT's read check of
    that file, answered; the checker's schemas registered, answered; then the checker's verdict on the staged output.
    Any failure answers nothing (the parent then checks in-process). Leaves by os._exit: none of the parent's
    buffers, atexit handlers or finalizers run."""
    try:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)        # an interrupt is the parent's to report
        if model is not None:
            _answer(up, {"litert": _litert(model)})
            checker = _checker()
            _answer(up, {"ready": True})
        else:
            import onnxruntime  # noqa: F401  (the point: this import overlaps the parent's conversion)
        head = _read_exact(down, _HEAD.size)
        if len(head) == _HEAD.size:
            n_data, n_request = _HEAD.unpack(head)
            request = json.loads(_read_exact(down, n_request))
            data = request.get("path") or _read_exact(down, n_data)
            if isinstance(data, str) or len(data) == n_data:
                from inspector.core.ir.errors import ConversionError
                try:
                    if request.get("check"):
                        checker(data)
                        reply: dict = {}
                    else:
                        from .ort_check import check_bytes
                        reply = {"note": check_bytes(data, request["run"],
                                                     {k: tuple(v) for k, v in request["sizes"].items()})}
                except ConversionError as e:
                    reply = {"error": str(e)}
                _answer(up, {"verdict": reply})
    except BaseException:                                     # noqa: BLE001 (the parent checks in-process)
        pass
    finally:
        os._exit(0)


def _litert(path: str) -> dict:
    """Whether LiteRT accepts the file (its read check, as the reader makes it), with the bytes' size and CRC."""
    from inspector.core.io.litert_check import litert_verify
    with open(path, "rb") as f:
        buf = f.read()
    try:
        litert_verify(buf, path)
        passed = True
    except Exception:                                         # noqa: BLE001 (the parent checks and words it)
        passed = False
    return {"passed": passed, "size": len(buf), "crc": zlib.crc32(buf)}


def _checker():
    """emit.convert.check_model's full check of a file, from ONNX's C++ extension alone, its schemas registered:
    what onnx.checker.check_model(path, full_check=True) calls, without the onnx package's import (NumPy,
    protobuf, its helpers), which is most of the child's work otherwise. Returns check(path)."""
    import importlib.machinery
    import importlib.util
    from inspector.core.ir.errors import checker_refused
    package = importlib.util.find_spec("onnx")               # found, not imported
    spec = importlib.machinery.PathFinder.find_spec("onnx.onnx_cpp2py_export", package.submodule_search_locations)
    C = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(C)
    C.defs.get_schema("Relu")                                 # the first schema looked up registers them all

    def check(path: str) -> None:
        try:
            C.checker.check_model_path(path, True, False, False)   # full_check=True, the other defaults
        except (C.checker.ValidationError, C.shape_inference.InferenceError) as e:
            raise checker_refused(e) from None
    return check


def _answer(fd: int, answer: dict) -> None:
    text = json.dumps(answer).encode()
    _write_all(fd, _ANSWER.pack(len(text)) + text)


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
