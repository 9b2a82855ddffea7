"""Memory exhaustion is one line, "not enough memory to convert X: needs about N GB": estimated from the model's
weights before the conversion allocates, and MemoryError / protobuf's EncodeError caught where they surface (a
3 GB address-space limit gave a segmentation fault, 4.5 GB a MemoryError traceback, the window "EncodeError")."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from google.protobuf.message import EncodeError

from inspector.cli import main
from inspector.core.io.tflite_builder import ModelBuilder

from .conftest import ROOT

LIMITED = """
import os, resource, sys
import ai_edge_litert.interpreter, onnxruntime, inspector.cli.convert
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (used + (int(sys.argv[1]) << 20), resource.RLIM_INFINITY))
from inspector.cli import main
sys.exit(main(sys.argv[2:]))
"""


def fc_model(path, units: int, k: int = 4096):
    """One FULLY_CONNECTED with units x k float32 weights (non-square), and its input [1, k]."""
    b = ModelBuilder()
    x = b.input("x", [1, k])
    y = b.tensor("y", [1, units])
    w = np.zeros((units, k), np.float32)
    w[np.arange(units), np.arange(units) % k] = 1.0
    b.op("FULLY_CONNECTED", [x, b.const("w", w), None], [y])
    b.output(y)
    path.write_bytes(b.build())
    return path


def test_a_model_that_cannot_fit_under_the_address_space_limit_is_refused_in_one_line(tmp_path):
    """64 MiB of weights with 200 MiB of address space left after start-up: refused before converting (today a
    segmentation fault or an EncodeError traceback), nothing written."""
    model, out = fc_model(tmp_path / "big.tflite", 4096), tmp_path / "big.onnx"
    run = subprocess.run([sys.executable, "-c", LIMITED, "200", "convert", str(model), "-o", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr[-2000:]
    assert run.stderr.startswith("error: not enough memory to convert big.tflite: needs about 0.4 GB (0.")
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr and not out.exists()


@pytest.mark.parametrize("where", ["initializers", "export"])
def test_memory_exhausted_past_the_estimate_is_one_line(tmp_path, monkeypatch, capsys, where):
    import inspector.core.emit.convert as conv
    model, out = fc_model(tmp_path / "m.tflite", 1536), tmp_path / "m.onnx"
    if where == "initializers":          # what protobuf raised at model.graph.initializer.extend under 3.5 GB
        monkeypatch.setattr(conv, "_add_initializers", lambda *a, **k: (_ for _ in ()).throw(
            EncodeError("Failed to serialize proto")))
    else:
        monkeypatch.setattr(conv.onnx.checker, "check_model", lambda *a, **k: (_ for _ in ()).throw(MemoryError()))
    assert main(["convert", str(model), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == "error: not enough memory to convert m.tflite: needs about 0.2 GB\n" and not out.exists()


def test_the_window_says_not_enough_memory_in_one_line(qtbot, tmp_path, monkeypatch):
    import inspector.core.emit.convert as conv
    from .test_gui_edit import make_window
    model = fc_model(tmp_path / "m.tflite", 1536)
    monkeypatch.setattr(conv, "_add_initializers", lambda *a, **k: (_ for _ in ()).throw(
        EncodeError("Failed to serialize proto")))
    w = make_window(qtbot, tmp_path)
    w.open_path(str(model))
    qtbot.waitUntil(lambda: w.statusBar().currentMessage().startswith("Conversion failed"), timeout=60_000)
    assert w.statusBar().currentMessage() == "Conversion failed: not enough memory to convert m.tflite: needs about " \
                                             "0.2 GB"
    assert getattr(w, "last_error", None) is None            # not "EncodeError: Failed to serialize proto"


def test_the_memory_available_is_what_proc_meminfo_says():
    """`available` reads only the two lines it needs: the same figure as a full parse of /proc/meminfo (within
    what the system's own allocations move between the two reads), and the one-call bound below it."""
    from inspector.core.ir import memory
    with open("/proc/meminfo") as f:
        info = {k: int(v.split()[0]) << 10 for k, _, v in (line.partition(":") for line in f) if v}
    full = info["MemAvailable"] + info.get("SwapFree", 0)
    assert abs(memory.available() - full) < 64 << 20
    assert 0 < memory._surely_available() <= memory.available()


def test_a_model_past_the_quick_bound_is_still_checked_against_meminfo(tmp_path, monkeypatch):
    """Past half the free RAM the estimate is checked against /proc/meminfo's figure: a model that needs more than
    it is refused in one line."""
    from inspector.core.io.tflite_reader import read_tflite
    from inspector.core.ir import memory
    graph = read_tflite(fc_model(tmp_path / "m.tflite", 64))
    want = memory.need(graph)
    memory.check(graph, "m.tflite")                              # fits
    monkeypatch.setattr(memory, "_surely_available", lambda: want - 1)
    monkeypatch.setattr(memory, "available", lambda: want - 1)
    with pytest.raises(memory.OutOfMemory, match="not enough memory to convert m.tflite"):
        memory.check(graph, "m.tflite")
    monkeypatch.setattr(memory, "_surely_available", lambda: want)
    memory.check(graph, "m.tflite")                              # within the quick bound: meminfo not read
