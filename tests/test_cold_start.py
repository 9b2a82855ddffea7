"""A cold start imports what its command needs: `--version` and `--help` nothing heavy, `info` no ONNX, `convert`
no window, no validation, no Session events and only the op families its model uses, and ONNX Runtime never in its own process (the run check imports it in a child forked
at the start, ort_ahead). Each command runs in a fresh interpreter that prints the modules it ended with."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from inspector.core.io.tflite_builder import ModelBuilder

from .conftest import ROOT

HEAVY = ("numpy", "onnx", "onnxruntime", "ai_edge_litert", "PySide6", "shiboken6", "pyqtgraph", "tflite",
         "google.protobuf")
RUN = ("import json, sys\n"
       "from inspector.cli import main\n"
       "try:\n"
       "    main(sys.argv[1:])\n"
       "except SystemExit:\n"
       "    pass\n"
       "print('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")


def modules(*argv: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", RUN, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    line = next((x for x in out.stdout.splitlines() if x.startswith("MODULES ")), None)
    assert line, out.stdout + out.stderr
    return set(json.loads(line[len("MODULES "):]))


def present(mods: set[str], *roots: str) -> list[str]:
    """Which of `roots` (a package or module) the set holds."""
    return [r for r in roots if r in mods or any(m.startswith(r + ".") for m in mods)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    b = ModelBuilder()
    x = b.input("x", [1, 3, 5, 7])
    y = b.tensor("y", [1, 3, 5, 7])
    b.op("RELU", [x], [y])
    b.output(y)
    path = tmp_path_factory.mktemp("cold") / "relu.tflite"
    path.write_bytes(b.build())
    return path


@pytest.mark.parametrize("line", ["--version", "--help", "convert --help", ""])
def test_version_and_help_import_nothing_heavy(line):
    argv = line.split()
    mods = modules(*argv)
    assert present(mods, *HEAVY) == []
    assert "inspector.cli" in mods                     # the command line did run
    if argv == ["--version"]:                          # no subcommand's module is read to print the version
        assert sorted(m for m in mods if m.startswith("inspector.")) == [
            "inspector.cli", "inspector.core", "inspector.core.ir", "inspector.core.ir.errors"]


def test_info_reads_without_onnx(model):
    mods = modules("info", str(model))
    assert present(mods, "numpy", "inspector.core.io.tflite_reader") == ["numpy", "inspector.core.io.tflite_reader"]
    assert present(mods, "onnx", "onnxruntime", "PySide6", "pyqtgraph", "tflite", "inspector.core.emit",
                   "inspector.core.layout.plan", "inspector.gui") == []
    assert "ai_edge_litert._pywrap_litert_interpreter_wrapper" in mods         # LiteRT's read check ran,
    assert "ai_edge_litert.interpreter" not in mods                            # without the Interpreter's module


@pytest.mark.parametrize("check", [True, False])
def test_convert_imports_what_converting_needs(model, tmp_path, check):
    out = tmp_path / "relu.onnx"
    mods = modules("convert", str(model), "-o", str(out), *([] if check else ["--no-ort-check"]))
    assert out.exists()
    assert present(mods, "numpy", "onnx", "inspector.core.emit.convert") == [
        "numpy", "onnx", "inspector.core.emit.convert"]
    # ONNX Runtime is the run check's child's; never the window, the validation's runs, pairing or the tflite package
    assert present(mods, "onnxruntime") == []
    assert present(mods, "PySide6", "shiboken6", "pyqtgraph", "tflite", "inspector.gui", "inspector.core.pairing",
                   "inspector.core.proof.validate", "inspector.core.proof.steps") == []
    # one model: neither the batch's workers and summary nor the window's session files
    assert present(mods, "inspector.cli.batch", "inspector.core.session.session_file",
                   "ai_edge_litert.interpreter") == []
    # no event is made for a Session nobody listens to; without the run check nothing of the proof package
    assert present(mods, "inspector.core.session.events", "inspector.core.session.model_explorer") == []
    assert present(mods, "inspector.core.proof") == (["inspector.core.proof"] if check else [])
    # of the op table, only the family of the model's one op (RELU) and of no other op
    from inspector.core.emit.ops.families import FAMILIES
    assert [f for f in FAMILIES if f"inspector.core.emit.ops.{f}" in mods] == ["elementwise"]


def test_the_dataclasses_convert_imports_have_their_own_docstring(model, tmp_path):
    """@dataclass renders a docstring from inspect.signature for a class without one, at import: a cost every cold
    start pays for each such class of the modules `convert` imports."""
    import dataclasses
    import importlib
    mods = modules("convert", str(model), "-o", str(tmp_path / "relu.onnx"), "--no-ort-check")
    classes = [c for m in sorted(mods) if m.startswith("inspector.") for c in vars(importlib.import_module(m)).values()
               if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == m]
    assert len(classes) > 10
    assert [f"{c.__module__}.{c.__name__}" for c in classes if (c.__doc__ or "").startswith(c.__name__ + "(")] == []


REFUSED = ("import json, sys\n"
           "from inspector.core.emit.ops import conv\n"
           "conv.bias_1d = lambda ctx, op, slot: ctx.input(op, slot)   # a [1, 1, 1, C] bias: ONNX Runtime refuses\n"
           "from inspector.cli import main\n"
           "code = main(sys.argv[1:])\n"
           "print('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n"
           "sys.exit(code)\n")


@pytest.mark.parametrize("check", [True, False])
def test_the_run_check_in_its_child_still_refuses(tmp_path, check):
    """The model the run check exists for (ONNX Runtime refuses a ConvTranspose's 4-D bias, the ONNX checker
    does not): the child's verdict stops the write, while the converting process never imported ONNX Runtime;
    --no-ort-check writes it."""
    from tests.test_fidelity import transpose_conv
    graph = transpose_conv(tmp_path, (1, 1, 1, 6), quantized=False)
    out = tmp_path / "out.onnx"
    p = subprocess.run([sys.executable, "-c", REFUSED, "convert", graph.path, "-o", str(out),
                        *([] if check else ["--no-ort-check"])], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    line = next((x for x in p.stdout.splitlines() if x.startswith("MODULES ")), None)
    assert line, p.stdout + p.stderr
    assert present(set(json.loads(line[len("MODULES "):])), "onnxruntime") == []
    if check:
        assert p.returncode == 1 and not out.exists(), p.stderr
        assert "ONNX Runtime cannot run the converted model" in p.stderr and "Traceback" not in p.stderr
    else:
        assert p.returncode == 0 and out.exists(), p.stderr


def test_the_run_check_in_process_judges_the_bytes_already_made(tmp_path, monkeypatch):
    """Without a child (another thread runs, so no fork), the verdict comes in-process from the bytes `convert`
    serialised once for the check and the file, not from a second serialisation of the model: given a model that
    runs and the bytes of one ONNX Runtime refuses, it refuses."""
    import threading

    from inspector.core.emit.convert import convert
    from inspector.core.io.tflite_builder import ModelBuilder
    from inspector.core.io.tflite_reader import read_tflite
    from inspector.core.ir.errors import ConversionError
    from inspector.core.proof.ort_ahead import Ahead
    from inspector.core.proof.ort_check import input_sizes
    from tests.test_fidelity import transpose_conv
    from tests.test_convert_core import conv
    from inspector.core.emit.ops import conv as conv_ops
    with monkeypatch.context() as m:        # a [1, 1, 1, C] ConvTranspose bias, as REFUSED makes: ORT refuses it
        m.setattr(conv_ops, "bias_1d", lambda ctx, op, slot: ctx.input(op, slot))
        refused = convert(transpose_conv(tmp_path, (1, 1, 1, 6), quantized=False), check=False)
    b = ModelBuilder()
    b.output(conv(b, b.input("x", [1, 5, 7, 3]), 3, 4, 5, 7))
    (tmp_path / "fine.tflite").write_bytes(b.build())
    fine = convert(read_tflite(tmp_path / "fine.tflite"))          # ONNX Runtime runs this one
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        ahead = Ahead()
    finally:
        stop.set()
        other.join()
    assert not ahead.forked
    ahead.submit(fine.model, input_sizes(fine), refused.model.SerializeToString())
    with pytest.raises(ConversionError, match="ONNX Runtime cannot run the converted model"):
        ahead.verdict()


STARTS = ("import gc, json, os, sys\n"
          "from inspector import cli\n"
          "collections, during, command = [], [], cli._main\n"
          "gc.callbacks.append(lambda phase, info: phase == 'start' and collections.append(info['generation']))\n"
          "def timed(argv):                           # the collections while the command runs\n"
          "    before = len(collections)\n"
          "    code = command(argv)\n"
          "    during.extend(collections[before:])\n"
          "    return code\n"
          "cli._main = timed\n"
          "cli.main(sys.argv[1:])\n"
          "print('\\nSTART ' + json.dumps({'threads': len(os.listdir('/proc/self/task')), 'collections': during,\n"
          "                               'enabled': gc.isenabled(), 'blas': os.environ.get('OPENBLAS_NUM_THREADS')}))\n")


def start(env: dict, *argv: str) -> dict:
    import os
    p = subprocess.run([sys.executable, "-c", STARTS, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={k: v for k, v in os.environ.items() if k not in env} | {k: v for k, v in env.items() if v})
    line = next((x for x in p.stdout.splitlines() if x.startswith("START ")), None)
    assert line, p.stdout + p.stderr
    return json.loads(line[len("START "):])


@pytest.mark.parametrize("chosen", [None, "2"])
def test_a_command_starts_numpy_with_one_blas_thread_unless_the_user_chose(model, tmp_path, chosen):
    """numpy's OpenBLAS would start a thread per core at import (2 here) for matrix products nothing here makes:
    a command's process has the one thread, and the user's OPENBLAS_NUM_THREADS (or GOTO_, OMP_) stands."""
    got = start({"OPENBLAS_NUM_THREADS": chosen, "GOTO_NUM_THREADS": None, "OMP_NUM_THREADS": None},
                "convert", str(model), "-o", str(tmp_path / "relu.onnx"), "--no-ort-check")
    assert (got["threads"], got["blas"]) == ((1, "1") if chosen is None else (2, "2"))


def test_a_command_runs_without_the_cyclic_collector_and_gives_it_back(model, tmp_path):
    """What a command's start-up makes (modules, classes) lives to its end: no collection scans it while `convert`
    or `info` runs; the collector is on again when main returns (a caller's own process), and on for validate."""
    for argv in (["convert", str(model), "-o", str(tmp_path / "relu.onnx"), "--no-ort-check"], ["info", str(model)]):
        got = start({}, *argv)
        assert got["collections"] == [] and got["enabled"], argv


def test_validate_runs_with_the_cyclic_collector(model, tmp_path, monkeypatch):
    import gc

    from inspector import cli
    seen = []
    monkeypatch.setattr(cli, "_main", lambda argv: seen.append(gc.isenabled()) or 0)
    for argv in (["validate", str(model), "x.onnx"], ["convert", str(model), "-o", "x.onnx"]):
        assert cli.main(argv) == 0
    assert seen == [True, False] and gc.isenabled()


LEAVES = ("import atexit, sys\n"
          "class Torn:\n"
          "    def __del__(self):\n"
          "        print('torn down', flush=True)\n"
          "kept = Torn()                     # the interpreter's teardown deletes it\n"
          "atexit.register(lambda: print('atexit ran', flush=True))\n"
          "from inspector.cli import main\n"
          "how = sys.argv.pop(1)\n"
          "raise SystemExit(main() if how == 'program' else main(sys.argv[1:]))\n")


@pytest.mark.parametrize("how", ["program", "called"])
def test_the_program_ends_without_the_interpreters_teardown(model, tmp_path, how):
    """main() as the program (no argv) ends the process once the command is done: its output complete, its exit
    status, the atexit handlers run, but no teardown of the modules and C++ libraries (what the teardown deletes
    is not deleted). Called with an argv (a test, a script), main returns and the process exits as usual."""
    out = tmp_path / "relu.onnx"
    ok = subprocess.run([sys.executable, "-c", LEAVES, how, "convert", str(model), "-o", str(out), "--no-ort-check"],
                        capture_output=True, text=True, cwd=ROOT, timeout=120)
    info = subprocess.run([sys.executable, "-c", LEAVES, how, "info", str(model)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    bad = subprocess.run([sys.executable, "-c", LEAVES, how, "convert", str(tmp_path / "none.tflite"), "-o",
                          str(tmp_path / "none.onnx")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert ok.returncode == 0 and out.exists() and ok.stdout.startswith(f"wrote {out}: 1 nodes"), ok.stderr
    assert info.returncode == 0 and "operators:\n      1  RELU\n" in info.stdout, info.stderr
    assert bad.returncode == 1 and bad.stderr.startswith("error: "), bad.stderr
    for p in (ok, info, bad):
        assert "atexit ran" in p.stdout
        assert ("torn down" in p.stdout) == (how == "called")
