"""The validation headline states the verdict and the measure it was decided by; the number it shows agrees with
the verdict (never "OK" beside a relative error of 1)."""
from __future__ import annotations

import re

import pytest

from .test_gui_edit import make_window, open_model, validated


def _validated(qtbot, tmp_path, model, panels=None):
    """The validation panel's headline and result after opening `model` and validating it in the window (the panel
    itself appended to `panels` when given)."""
    w = make_window(qtbot, tmp_path)
    open_model(qtbot, w, model)
    panel = validated(qtbot, w)
    if panels is not None:
        panels.append(panel)
    return panel.status.text(), panel.validation


def test_float_headline_shows_the_error_the_verdict_was_decided_by(qtbot, tmp_path, corpus):
    text, v = _validated(qtbot, tmp_path, corpus / "ops/conv-reshape-multiple-conv.float32.tflite")
    m = re.match(r"(ok|suspicious|fail): worst error (\S+) of the output's scale \(tolerance (\S+?)[,)]", text)
    assert m, text
    assert m.group(1) == v.verdict == "ok"
    worst, tol = float(m.group(2)), float(m.group(3))
    assert worst == pytest.approx(max(e.max_rel for e in v.outputs), rel=0.05) and worst <= tol == v.rtol
    assert "OK" not in text and "MISMATCH" not in text


def test_quantized_headline_is_in_quantization_steps(qtbot, tmp_path, corpus):
    text, v = _validated(qtbot, tmp_path, corpus / "ops/conv.uint8.tflite")
    m = re.match(r"(ok|fail): worst (\S+) quantization steps, (\S+)% within 2 \(rule", text)
    assert m, text
    assert m.group(1) == v.verdict and float(m.group(2)) == max(e.steps for e in v.outputs)
    assert "relative error" not in text


def test_custom_op_litert_cannot_run_shows_what_precedes_it_as_the_command_line_does(qtbot, tmp_path):
    """The window cuts the reference where `validate` from files does, and says the same."""
    import onnx

    from inspector.core.emit.convert import convert
    from inspector.core.io.tflite_reader import read_tflite
    from inspector.core.proof.validate import headline, validate_files

    from .test_proof import _conv_then_landmarks
    path = tmp_path / "lm.tflite"
    path.write_bytes(_conv_then_landmarks())
    panels = []
    text, v = _validated(qtbot, tmp_path, path, panels)
    graph = read_tflite(path)
    onnx.save(convert(graph).model, tmp_path / "lm.onnx")
    files = validate_files(graph, str(tmp_path / "lm.onnx"))
    assert text.startswith(headline(files) + "; 2 intermediate tensors")
    assert text.startswith("fail: outputs not compared (LiteRT cannot run op 2, Landmarks2TransformMatrix); "
                           "2 of 2 tensors before it ok")
    assert files.notes[0] in text and "cut before op 2 (Landmarks2TransformMatrix)" in files.notes[0]
    assert [(e.name, e.verdict) for e in v.intermediates] == [(e.name, e.verdict) for e in files.intermediates] \
        == [("conv", "ok"), ("points", "ok")]
    # The plot has a point for each tensor compared, none for the outputs LiteRT never computed.
    assert sorted(name for _op, name in panels[0].points) == ["conv", "points"]
    assert len(panels[0].scatter.points()) == 2
