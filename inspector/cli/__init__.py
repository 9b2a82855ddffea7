"""`layout-inspector` command line: one module per subcommand, each with add_parser(sub) and run(args) -> int.

Exit codes: 0 success, 1 a model or conversion error (one line `error: <file>: <reason>` on stderr),
2 a usage error. `--debug` shows the full traceback.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from inspector import __version__
from inspector.core.ir.errors import InspectorError, printable


class UsageError(InspectorError):
    """The command line itself is wrong (an option's value, a combination): exit 2, found before any work."""


# Subcommand modules in help order; each lives in inspector/cli/<name>.py (- spelled _).
COMMANDS = ["info", "convert", "validate", "ops", "check", "edit", "compare", "gui", "install-desktop"]


def _modules(only: str | None = None):
    for name in [only] if only in COMMANDS else COMMANDS:
        try:
            yield name, importlib.import_module(f"inspector.cli.{name.replace('-', '_')}")
        except ModuleNotFoundError as e:
            if e.name != f"inspector.cli.{name.replace('-', '_')}":
                raise


def _command(argv: list[str]) -> str | None:
    """The subcommand argv names (its first word that is not an option), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The full parser; given the command line, only the subcommand it names (each one's module imports what it
    needs, and a cold `convert` should not pay for `gui` or `validate`). Without a known subcommand, all of them,
    for the help text and argparse's error message."""
    parser = argparse.ArgumentParser(prog="layout-inspector",
                                     description="Convert TFLite models to ONNX; see, fix and prove the layouts.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if argv is not None and _command(argv) is None and "--version" in argv:
        return parser                       # it prints the version and exits: no subcommand is read
    for _, mod in _modules(_command(argv) if argv is not None else None):
        mod.add_parser(sub)
    return parser


class _Escaping:
    """A text stream that writes control characters escaped: names from a hostile model are printed as data,
    never as terminal commands (colours, cursor moves, window titles, bidi reordering)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(printable(text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


# What OpenBLAS reads for its thread count, in its order of precedence.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _one_blas_thread() -> None:
    """numpy's OpenBLAS starts a thread per core when numpy is imported, each spinning a while for work that never
    comes: nothing here multiplies matrices with numpy (ONNX Runtime and LiteRT run their own thread pools), so a
    command starts with one thread unless the user chose a count or numpy is loaded already (main called from
    other code). The environment is inherited: the run check's and a batch's workers start so too."""
    if "numpy" not in sys.modules and not any(k in os.environ for k in BLAS_THREADS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


# Commands that run with the cyclic collector on: validation holds models in LiteRT and ONNX Runtime at length,
# and the window collects on a timer of its own (gui/gc_guard).
COLLECTED = ("validate", "gui")


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: this process's) and return its exit status. Without `argv` main is the
    program (`layout-inspector`, `python -m inspector`): the process ends here once the command is done (_leave)."""
    command = _command(sys.argv[1:] if argv is None else argv)
    code = _run(argv, command)
    if argv is None and command not in KEEP_TEARDOWN:
        _leave(code)
    return code


def _run(argv: list[str] | None, command: str | None) -> int:
    _one_blas_thread()
    # A command's start-up makes modules, classes and functions that live to its end, and the cyclic collector
    # scanned them again and again for nothing; a conversion pauses it anyway.
    paused = gc.isenabled() and command not in COLLECTED
    if paused:
        gc.disable()
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaping(out or _nowhere()), _Escaping(err or _nowhere())   # None: a closed fd
    try:
        code = _main(argv)
        sys.stdout.flush()              # here, so that a reader gone away is seen below, not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone(out)
    except OSError as e:                # the flush: a full disk or a failing device behind standard output
        if e.filename is not None or e.errno is None:
            raise
        print(f"error: cannot write to standard output: {os.strerror(e.errno)}", file=sys.stderr)
        return 1
    finally:
        sys.stdout, sys.stderr = out, err
        if paused:
            gc.enable()


# Commands the interpreter's own exit ends: the window (Qt's objects and settings go down with it).
KEEP_TEARDOWN = ("gui",)


def _leave(code: int) -> None:
    """End the program once its command is done, its files written and closed: the standard streams flushed and
    the atexit handlers run (multiprocessing's, logging's), then os._exit, without the interpreter's teardown of
    every module and of the C++ libraries loaded (numpy's, ONNX's operator schemas, LiteRT's), which cost a small
    model's `convert` more than its conversion. While another thread runs (none of ours does), the normal exit."""
    import atexit
    threading = sys.modules.get("threading")       # (not imported: no thread started but the main one)
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if (threading is not None and threading.active_count() > 1) or run_exit_functions is None:
        return
    run_exit_functions()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:          # None: the descriptor was closed when the program started
                stream.flush()
        except (OSError, ValueError):       # a reader gone away, a closed stream: nothing left to deliver
            pass
    if "ctypes" in sys.modules:             # what a C library printed through stdio (os._exit does not flush it)
        try:
            sys.modules["ctypes"].CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass
    os._exit(code)


def _nowhere():
    """Where a command's messages go when its standard stream was closed (`2>&-`: Python's sys.stderr is None):
    nowhere, instead of an AttributeError at the first message."""
    return open(os.devnull, "w")


def _reader_gone(out) -> int:
    """`... | head`: the reader closed the pipe. Quietly, as a command killed by SIGPIPE would: what is still
    buffered goes nowhere (else Python reports the failed flush at exit) and the exit status is 128 + SIGPIPE."""
    import os
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    except (OSError, ValueError, AttributeError):      # not a real file (tests capture it): nothing to flush
        pass
    return 141


def _main(argv: list[str] | None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except InspectorError as e:
        if args.debug:
            import traceback                    # (only here: importing it costs every start a few ms)
            traceback.print_exc()
        print(f"error: {e}".splitlines()[0] if not args.debug else f"error: {e}", file=sys.stderr)
        rest = str(e).splitlines()[1:]
        if rest and not args.debug:
            print("\n".join(rest), file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except MemoryError:                         # where no estimate caught it first: one line, never a traceback
        from inspector.core.ir.memory import OutOfMemory, need_for_file
        model = getattr(args, "model", None)
        print(f"error: {OutOfMemory(os.path.basename(model), need_for_file(model)) if model else 'out of memory'}",
              file=sys.stderr)
        return 1
