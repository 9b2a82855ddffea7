"""The Session document: decisions (pins, metadata, options), re-runs, session files, CLI replay."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from inspector.cli import main
from inspector.core.ir.errors import ConversionError, InspectorError, MetadataError
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.session.session import Session
from inspector.core.io.tflite_builder import ModelBuilder

RNG = np.random.default_rng(11)


def conv_reshape_conv(path, rng, bias: bool = False):
    """x [1, 5, 7, 3] -> conv -> reshape [1, 7, 4, 5] -> conv [1, 7, 4, 2], weights (and with `bias`, biases: what
    LiteRT's kernels run) drawn from `rng` in op order. The Reshape regroups [5, 7, 4] as [7, 4, 5], mixing channels
    into space, so it needs TFLite's memory order: two Transposes by default."""
    def const(name, shape):
        return b.const(name, rng.standard_normal(shape).astype(np.float32))
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = b.tensor("a", [1, 5, 7, 4])
    b.op("CONV_2D", [x, const("wa", (4, 3, 2, 3)), const("ba", 4) if bias else None], [a], {"padding": "SAME"})
    r = b.tensor("r", [1, 7, 4, 5])
    b.op("RESHAPE", [a, b.const("shape", np.array([1, 7, 4, 5], np.int32))], [r], {"new_shape": [1, 7, 4, 5]})
    y = b.tensor("y", [1, 7, 4, 2])
    b.op("CONV_2D", [r, const("wy", (2, 3, 2, 5)), const("by", 2) if bias else None], [y], {"padding": "SAME"})
    b.output(y)
    return b.save(path)


@pytest.fixture
def model(tmp_path):
    """conv -> reshape -> conv (conv_reshape_conv): pinning the first conv's output moves one Transpose."""
    return conv_reshape_conv(tmp_path / "m.tflite", RNG)


def test_pin_rerun_and_change_summary(model):
    s = Session.open(model)
    events = []
    s.subscribe(lambda event: events.append(type(event).__name__))
    first = s.convert()
    assert s.result.transposes == 2 and str(first) == "2 conflicts left"
    before = s.set_pin("y", "keep")
    assert before is None and s.pins == {"y": "keep"}
    change = s.convert()
    assert s.result.transposes == 3
    assert str(change) == "1 Transpose added, 3 conflicts left"
    s.set_pin("y", before)                                     # undo = set the previous value back
    assert s.pins == {} and str(s.convert()) == "1 Transpose removed, 2 conflicts left"
    assert events[:3] == ["PlanChanged", "PinsChanged", "PlanChanged"]


def test_bad_decisions_are_refused_before_they_are_stored(model):
    s = Session.open(model)
    with pytest.raises(ConversionError, match="no tensor named"):
        s.set_pin("nope", "keep")
    with pytest.raises(ConversionError, match="not understood"):
        s.set_pin("a", "sideways")
    with pytest.raises(MetadataError, match="Rgb8"):
        s.set_metadata(MetadataEdits(image={"Image.BitmapPixelFormat": "rgb9"}))
    assert s.pins == {} and s.metadata.is_empty()


def test_session_file_round_trip_and_cli_replay_is_identical(model, tmp_path):
    s = Session.open(model)
    s.set_pin("a", "keep")
    s.set_metadata(MetadataEdits(types={"x": "IMAGE"}, image={"image.bitmappixelformat": "rgb8"},
                                 props={"author": "me"}))
    saved = s.save(str(tmp_path / "m.inspector.json"))
    s.export(str(tmp_path / "window.onnx"))
    data = json.loads(open(saved).read())
    assert data["pins"] == {"a": "keep"} and data["model"] == "m.tflite" and data["model_sha256"]

    assert main(["convert", str(model), "-o", str(tmp_path / "cli.onnx"), "--session", saved]) == 0
    assert (tmp_path / "window.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    m = onnx.load(str(tmp_path / "cli.onnx"))
    props = {p.key: p.value for p in m.metadata_props}
    assert props["Image.BitmapPixelFormat"] == "Rgb8" and props["author"] == "me"
    assert m.graph.input[0].type.denotation == "IMAGE"

    again = Session.open(model)
    assert again.load_decisions(saved) == []
    assert again.pins == {"a": "keep"}


def test_session_from_another_model_version_warns(model, tmp_path):
    s = Session.open(model)
    saved = s.save(str(tmp_path / "s.json"))
    data = json.loads(open(saved).read())
    data["model_sha256"] = "0" * 64
    open(saved, "w").write(json.dumps(data))
    assert "different version" in Session.open(model).load_decisions(saved)[0]
    open(saved, "w").write("{not json")
    with pytest.raises(InspectorError, match="not a readable session file"):
        Session.open(model).load_decisions(saved)


def test_version_1_session_pins_keep_their_old_meaning(model, tmp_path, capsys):
    """Version 1 wrote "NHWC" for "convert to channels-first"; since version 2 "NHWC" names the ONNX axes (keep)."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"version": 1, "model": "m.tflite", "pins": {"y": "NHWC"}}))
    old = Session.open(model)
    old.load_decisions(str(path))
    old.convert()
    assert old.pins == {"y": "channels-first"} and old.result.transposes == 2
    path.write_text(json.dumps({"version": 2, "model": "m.tflite", "pins": {"y": "NHWC"}}))
    new = Session.open(model)
    new.load_decisions(str(path))
    new.convert()
    assert new.pins == {"y": "NHWC"} and new.result.transposes == 3
    assert main(["convert", str(model), "-o", str(tmp_path / "o.onnx"), "--pin", "y=NHWC"]) == 0
    assert "y=channels-first converts it" in capsys.readouterr().err
    # A pin that names no tensor is an error line first and alone: no note about a pin that never applied.
    assert main(["convert", str(model), "-o", str(tmp_path / "p.onnx"), "--pin", "nope=NHWC"]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_export_never_replaces_the_source(model):
    s = Session.open(model)
    with pytest.raises(InspectorError, match="source model"):
        s.export(str(model))
    assert model.read_bytes()[4:8] == b"TFL3"


def test_report_lists_each_conflict_with_its_node(model):
    s = Session.open(model)
    s.convert()
    rep = s.report()
    nodes = {n.name for n in s.result.model.graph.node if n.op_type == "Transpose"}
    assert rep["transposes"] == 2 and {c["node"] for c in rep["conflicts"]} == nodes
    assert {c["kind"] for c in rep["conflicts"]} == {"terminate", "meet"}


def test_a_pin_is_checked_without_being_applied(model):
    """check_pin refuses what set_pin would refuse and changes nothing (the window checks before it pushes the
    undoable command, whose every redo then sets the pin the same way)."""
    s = Session.open(model)
    with pytest.raises(ConversionError, match="not understood"):
        s.check_pin("a", "sideways")
    s.check_pin("y", "keep")
    assert s.pins == {}
