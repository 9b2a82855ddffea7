"""What the commands print, read as a person reads a terminal: no traceback when `| head` closes the pipe, a symbolic
dimension by its name, no LiteRT log line, each Transpose reason naming its tensor once."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector.cli import main
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.proof.litert_log import quiet_litert

from .conftest import ROOT

SAMPLE = ROOT / "inspector" / "resources" / "sample.tflite"


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "inspector", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, **kw)


@pytest.mark.parametrize("args", [["info", SAMPLE], ["ops", "--markdown"], ["ops"]])
def test_closed_pipe_ends_quietly(args):
    """The reader is gone before the first write (as `head` is after its lines): the write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "inspector", *map(str, args)], stdout=w, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(w)
    assert p.stderr == ""
    assert p.returncode == 141


def test_info_names_a_symbolic_dimension(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 5, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 5, 7])
    y.type.tensor_type.shape.dim[0].Clear()                  # a dynamic dimension without a name
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:5] == ["inputs:", "  x  [batch, 3, 5, 7]  float32", "outputs:", "  y  [?, 3, 5, 7]  float32"]


def test_validate_prints_no_litert_log(tmp_path):
    onnx_path = tmp_path / "sample.onnx"
    assert _cli("convert", SAMPLE, "-o", onnx_path).returncode == 0
    v = _cli("validate", SAMPLE, onnx_path)
    assert v.returncode == 0 and v.stdout.startswith("ok")
    assert v.stderr == ""


def test_quiet_litert_keeps_other_lines(capfd):
    with quiet_litert():
        os.write(2, b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n")
        os.write(2, b"ERROR: a real error\n")
    assert capfd.readouterr().err == "ERROR: a real error\n"


def test_convert_names_a_long_tensor_once(tmp_path):
    """A Terminate op (RESHAPE) after a Conv needs the TFLite layout back: one Transpose, its reason printed once."""
    long = "model/block_" + "very_long_layer_name/" * 4 + "conv"
    b = ModelBuilder()
    x = b.input("x", [1, 6, 10, 3], "float32")
    w = b.const("w", np.ones((4, 1, 1, 3), np.float32))
    bias = b.const("b", np.zeros(4, np.float32))
    c = b.tensor(long, [1, 6, 10, 4], "float32")
    b.op("CONV_2D", [x, w, bias], [c], {"padding": "SAME"})
    y = b.tensor("y", [1, 240], "float32")
    b.op("RESHAPE", [c, b.const("s", np.array([1, 240], np.int32))], [y], {"new_shape": [1, 240]})
    b.output(y)
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    r = _cli("convert", path, "-o", tmp_path / "m.onnx", "--no-ort-check")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "transpose at" in ln]
    assert len(lines) == 1 and lines[0].count(long) == 1
    assert lines[0] == f"  transpose at {long}: is NCHW but RESHAPE#1 (Terminate) needs the TFLite layout"


@pytest.mark.parametrize("closed", [1, 2])
def test_a_closed_standard_stream_is_no_failure(tmp_path, closed):
    """`convert ... >&-` or `2>&-`: Python leaves that stream None; the command still converts and exits 0 (an
    AttributeError at its first message, or at the program's final flush, made it exit 1)."""
    out = tmp_path / "m.onnx"
    keep = 2 if closed == 1 else 1
    p = subprocess.run([sys.executable, "-m", "inspector", "convert", str(SAMPLE), "-o", str(out)],
                       stdin=subprocess.DEVNULL, **{("stderr" if keep == 2 else "stdout"): subprocess.PIPE},
                       cwd=ROOT, timeout=300, preexec_fn=lambda: os.close(closed))
    assert p.returncode == 0, (p.stdout or p.stderr)
    assert out.stat().st_size > 0


def test_a_full_disk_behind_standard_output_is_one_error_line():
    """`info ... >/dev/full`: the flush fails with ENOSPC; one `error:` line and exit 1, not a traceback."""
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "inspector", "info", str(SAMPLE)], stdout=full,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip() == "error: cannot write to standard output: No space left on device"


def test_the_run_check_reads_an_output_whose_name_is_not_utf8(tmp_path):
    """The run check hands ONNX Runtime the staged file's path, which it takes as UTF-8 text only: a name with a
    byte that is not UTF-8 was a false "ONNX Runtime cannot run the converted model"."""
    out = os.path.join(os.fsencode(tmp_path), b"m\xff.onnx")
    p = subprocess.run([sys.executable.encode(), b"-m", b"inspector", b"convert", bytes(SAMPLE), b"-o", out],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(out) > 0
