"""A cold start imports what its command needs: `--version` and `--help` nothing heavy, `info` no ONNX, `convert`
no window and no validation, and ONNX Runtime only when its run check will run. Each command runs in a fresh
interpreter that prints the modules it ended with."""
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


@pytest.mark.parametrize("check", [True, False])
def test_convert_imports_what_converting_needs(model, tmp_path, check):
    out = tmp_path / "relu.onnx"
    mods = modules("convert", str(model), "-o", str(out), *([] if check else ["--no-ort-check"]))
    assert out.exists()
    assert present(mods, "numpy", "onnx", "inspector.core.emit.convert") == [
        "numpy", "onnx", "inspector.core.emit.convert"]
    # ONNX Runtime for its run check only; never the window, the validation's runs, pairing or the tflite package
    assert present(mods, "onnxruntime") == (["onnxruntime"] if check else [])
    assert present(mods, "PySide6", "shiboken6", "pyqtgraph", "tflite", "inspector.gui", "inspector.core.pairing",
                   "inspector.core.proof.validate", "inspector.core.proof.steps") == []
