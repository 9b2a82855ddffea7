"""`validate --input-shape NAME=D1,D2,...` (issue 31): a dynamic dimension stored as 1 that LiteRT cannot run at
that size gets its size from the user; without it, one error line names the input and the option."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from inspector.cli import main
from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.ir.errors import InspectorError
from inspector.core.proof.input_shapes import parse
from inspector.core.proof.validate import validate

H, C, K = 5, 3, 4           # rows, channels in, channels out; the width is dynamic (stored 1), the kernel 3 wide


def framed(tmp_path):
    """x [1, H, -1, C] (stored [1, H, 1, C]) -> CONV_2D 2x3 VALID: at width 1 there is no output column."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x = b.input("frames", [1, H, 1, C], shape_signature=[1, H, -1, C])
    y = b.tensor("y", [1, H - 1, 1, K], shape_signature=[1, H - 1, -1, K])
    b.op("CONV_2D", [x, b.const("w", rng.uniform(-1, 1, (K, 2, 3, C)).astype(np.float32)),
                     b.const("b", rng.uniform(-1, 1, K).astype(np.float32))], [y], {"padding": "VALID"})
    b.output(y)
    path = tmp_path / "framed.tflite"
    b.save(path)
    onnx.save(convert(read_tflite(path)).model, tmp_path / "framed.onnx")
    return path


def test_a_dynamic_width_set_by_the_user_gives_a_verdict(tmp_path):
    result = convert(read_tflite(framed(tmp_path)))
    v = validate(result, input_shapes={"frames": (1, H, 13, C)})
    assert v.verdict == "ok" and v.outputs[0].shape == (1, H - 1, 11, K)
    assert v.intermediates == [] or all(e.ok for e in v.intermediates)


def test_without_it_one_line_names_the_input_and_the_option(tmp_path, capsys):
    path = framed(tmp_path)
    with pytest.raises(InspectorError) as e:
        validate(convert(read_tflite(path)))
    text = str(e.value)
    assert "\n" not in text and "'frames'" in text and "--input-shape frames=1,5,N,3" in text
    assert main(["validate", str(path), str(tmp_path / "framed.onnx")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--input-shape" in err[0] and "'frames'" in err[0], err


def test_the_option_on_the_command_line(tmp_path, capsys):
    path = framed(tmp_path)
    assert main(["validate", str(path), str(tmp_path / "framed.onnx"), "--input-shape", "frames=1,5,13,3",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "ok" and any("[1, 5, 13, 3]" in n for n in out["notes"])
    # Wrong names, ranks and static sizes are refused with what the model has.
    for bad, says in (("nope=1,5,13,3", "no input 'nope'"), ("frames=1,5,13", "rank 4"),
                      ("frames=1,6,13,3", "dimension 1 is not dynamic"), ("frames=1,5,0,3", "integer >= 1")):
        assert main(["validate", str(path), str(tmp_path / "framed.onnx"), "--input-shape", bad]) != 0
        assert says in capsys.readouterr().err


def test_parse_keeps_names_with_equals_signs():
    assert parse(["a=b=1,2", "x:0=3"]) == {"a=b": (1, 2), "x:0": (3,)}


@pytest.mark.corpus
def test_the_dynamic_length_mel_front_end_validates_at_a_length_given(corpus, tmp_path, capsys):
    rel = corpus / "tfbuilt/tf_melfront_dynlen_fp32.tflite"
    onnx.save(convert(read_tflite(rel)).model, tmp_path / "m.onnx")
    assert main(["validate", str(rel), str(tmp_path / "m.onnx")]) != 0
    assert "--input-shape serving_default_wav:0=1,N" in capsys.readouterr().err
    assert main(["validate", str(rel), str(tmp_path / "m.onnx"), "--input-shape", "serving_default_wav:0=1,12000",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "ok" and out["outputs"][0]["max_abs"] is not None


def test_the_window_takes_the_sizes_in_its_validate_dock(qtbot, tmp_path):
    """Typed into the Validate dock's field and run with a click on Validate, as a user does: first without the
    sizes (the one line, in the panel's status), then with them (a verdict)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from .test_gui_edit import make_window, open_model
    path = framed(tmp_path)
    w = make_window(qtbot, tmp_path)
    open_model(qtbot, w, path)
    w.editor.validation_dock.show()
    w.editor.validation_dock.raise_()
    panel = w.editor.validation
    assert panel.shapes.placeholderText() == "frames=1,5,N,3"
    qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=120_000)
    assert panel.validation is None and "--input-shape frames=1,5,N,3" in panel.status.text()
    qtbot.mouseClick(panel.shapes, Qt.LeftButton)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is panel.shapes, timeout=2000)
    qtbot.keyClicks(panel.shapes, "frames=1,5,9,3")
    qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not panel.running and panel.validation is not None, timeout=120_000)
    v = panel.validation
    assert v.verdict == "ok" and v.outputs[0].shape == (1, H - 1, 7, K)
    assert panel.status.text().startswith("ok: ") and "fed as [1, 5, 9, 3]" in panel.status.text()
    w.grab().save(str(tmp_path / "validate_input_shapes.png"))
