"""The checker after the metadata pass reuses what the pass read (denotation.Reading: the parsed records and the
Propagator, with only the value infos the pass edited read again): it must give exactly what a pass and a checker
from scratch give, on corpus models, after pins and with the user's edits on top."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.core.ir.diff import changed
from inspector.core.emit.incremental import Reconverter
from inspector.core.io.loader import load_model
from inspector.core.metadata import parsed
from inspector.core.metadata.denotation import annotate
from inspector.core.metadata.edits import MetadataEdits
from inspector.core.metadata.lint import Linter
from inspector.core.metadata.parsed import Memo
from inspector.core.session.pipeline import ConvertOptions, Incremental, converted
from inspector.gui.rerun_child import STRIP_BYTES, annotated_and_checked


def scratch(graph, pins, edits):
    """A conversion, then the pass and the checker each on a fresh Memo: nothing reused."""
    result = converted(graph, pins, ConvertOptions(), check=False, weights_over=STRIP_BYTES)
    notes = list(result.warnings) + annotate(result, edits)
    return result.model.SerializeToString(), notes, Linter(Memo()).lint(result.model)


def reused(graph, pins, edits, cache, monkeypatch):
    """As the window's child runs it after a pin: the checker reuses the pass's reading (one `parts` in all)."""
    calls = []
    real = parsed.Memo.parts
    monkeypatch.setattr(parsed.Memo, "parts", lambda self, model: calls.append(1) or real(self, model))
    result = Incremental(cache).converted(graph, pins, ConvertOptions(), check=False, weights_over=STRIP_BYTES)
    model, notes, _, findings = annotated_and_checked(result, edits)
    monkeypatch.undo()
    assert len(calls) == 1              # the checker read nothing whole again
    return model.SerializeToString(), notes, findings


def user_edits(graph) -> MetadataEdits:
    """Edits the pass does not make itself: the first input denoted IMAGE and it, the first output and a value info
    midway with channels-last axes (the graph reads them channels-first: findings, also where a node's step is
    replayed from the pass's run), and an Image.* key."""
    g = converted(graph, {}, ConvertOptions(), check=False).model.graph
    dims = {}
    inner = [vi for vi in g.value_info if len(vi.type.tensor_type.shape.dim) >= 3]
    for vi in (g.input[0], g.output[0], *inner[len(inner) // 2:][:1]):
        rank = len(vi.type.tensor_type.shape.dim)
        if rank >= 3:
            dims[vi.name] = ["DATA_BATCH"] + ["DATA_FEATURE"] * (rank - 2) + ["DATA_CHANNEL"]
    return MetadataEdits(types={g.input[0].name: "IMAGE"}, dims=dims, image={"Image.BitmapPixelFormat": "Rgb8"})


def conv_outputs(sg, k: int = 2) -> list[str]:
    ops = [op for op in sg.ops if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    return [sg.tensors[ops[len(ops) * (i + 1) // (k + 1)].outputs[0]].name for i in range(k)] if ops else []


def check_model(graph, monkeypatch) -> int:
    """Pins and undos in a row, with and without user edits; returns how many findings were compared."""
    a, b = (conv_outputs(graph.main) + [None, None])[:2]
    steps = [{}, {a: "keep"} if a else {}, {a: "keep", b: "NCHW"} if b else {}, {}]
    cache, seen = Reconverter(), 0
    for i, pins in enumerate(steps):
        edits = user_edits(graph) if i % 2 else MetadataEdits()
        want, got = scratch(graph, pins, edits), reused(graph, pins, edits, cache, monkeypatch)
        assert got[0] == want[0]                        # the annotated model, to the byte
        assert got[1] == want[1]                        # the notes
        assert got[2] == want[2]                        # every field of every finding, in order
        seen += len(got[2])
    return seen


@pytest.mark.parametrize("name", ["torch/mobilenet_v2_w050.tflite", "torch/siamese_two_inputs.tflite",
                                  "keras/mobilenetv2_int8.tflite", "realworld/mediapipe_selfie_segmentation.tflite"])
def test_the_checker_reusing_the_pass_gives_what_a_fresh_one_gives(corpus, name, monkeypatch):
    assert check_model(load_model(corpus / name), monkeypatch) > 0


def test_on_a_non_square_model_with_findings(tmp_path, monkeypatch):
    """A 5x7 image, 3 channels, through CONV_2D, RELU and ADD: the user's channels-last denotations contradict
    the convolution's reading, so there are dimension findings to compare."""
    from inspector.core.io.tflite_builder import ModelBuilder
    b = ModelBuilder()
    w = b.const("w", np.full((3, 3, 3, 3), 0.01, np.float32))
    bias = b.const("b", np.zeros(3, np.float32))
    x = b.input("x", [1, 5, 7, 3])
    made = [x]
    for i, op in enumerate(["CONV_2D", "RELU", "CONV_2D", "ADD", "RELU"]):
        y = b.tensor(f"t{i}", [1, 5, 7, 3])
        ins = [made[-1], w, bias] if op == "CONV_2D" else [made[-1], made[-3]] if op == "ADD" else [made[-1]]
        b.op(op, ins, [y], {"padding": "SAME"} if op == "CONV_2D" else None)
        made.append(y)
    b.output(made[-1])
    graph = load_model(b.save(tmp_path / "small.tflite"))
    assert check_model(graph, monkeypatch) > 0


def test_reread_keeps_records_and_reads_the_edited_ones_again():
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 7])])
    model = helper.make_model(g)
    memo = Memo()
    before = memo.parts(model)
    model.graph.output[0].type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    after = memo.reread(before, model, {"y"})
    assert after.inputs[0] is before.inputs[0] and after.nodes == before.nodes
    assert after.outputs[0].dims == ("", "DATA_CHANNEL", "", "") and before.outputs[0].dims == ("",) * 4
    model.graph.input.append(onnx.ValueInfoProto(name="z"))    # not the model read: nothing to reuse
    assert memo.reread(before, model, set()) is None
    assert changed({"a": (1, 2), "b": 1}, {"a": (1, 3), "c": 1}) == {"a", "b", "c"}
    assert changed({"a": [1, 2], "b": [1]}, {"a": [1, 2], "c": [1]}) == {"b", "c"}     # unhashable: the loop


def full_value(data: bytes) -> tuple:
    """What a Value record says, read from the whole ValueInfoProto (as parsed.Value did before it read only the
    name and the type's bytes)."""
    import onnx
    vi = onnx.ValueInfoProto.FromString(data)
    tt, dims = vi.type.tensor_type, vi.type.tensor_type.shape.dim
    tensor = vi.type.HasField("tensor_type")
    shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims) \
        if tensor and tt.HasField("shape") else None
    plain = onnx.ValueInfoProto.FromString(data)
    plain.type.ClearField("denotation")
    for d in plain.type.tensor_type.shape.dim:
        d.ClearField("denotation")
    marked = vi.type.HasField("denotation") or any(d.HasField("denotation") for d in dims)
    return (vi.name, tensor, vi.type.denotation, tt.elem_type, shape, tuple(d.denotation for d in dims),
            plain.SerializeToString() if marked else data)


def test_records_read_field_by_field_equal_the_whole_message():
    """parsed.Value reads a value's name and its type's bytes (each distinct type once), parsed.Node its names and
    keeps its attributes' bytes until asked: both say what the whole message says, for denoted, symbolic,
    typeless, non-tensor and twice-typed values, and for nodes with and without attributes."""
    import onnx
    from onnx import TensorProto, helper
    vis = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 3, 5, 7]),
           helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3, 5, 7]),            # a's type again
           helper.make_tensor_value_info("c", TensorProto.INT64, ["n", 2, None]),
           helper.make_tensor_value_info("d", TensorProto.FLOAT, None),                     # no shape
           onnx.ValueInfoProto(name="e"),                                                   # no type at all
           helper.make_tensor_sequence_value_info("f", TensorProto.FLOAT, [2, 3])]
    denoted = helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 3, 5, 7])
    denoted.type.denotation = "TENSOR"
    denoted.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    blank = helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 3, 5, 7])
    blank.type.denotation = ""                                  # set, though empty: still written
    blobs = [vi.SerializeToString() for vi in [*vis, denoted, blank]]
    twice = helper.make_tensor_value_info("i", TensorProto.FLOAT, [2, 3])
    other = onnx.ValueInfoProto(type=helper.make_tensor_type_proto(TensorProto.INT8, [4, 5, 6]))
    blobs.append(twice.SerializeToString() + other.SerializeToString())     # two type fields: merged
    parsed._TYPES.clear()
    for data in blobs + blobs:                                  # the second time from what was kept
        v = parsed.Value(data)
        assert (v.name, v.tensor, v.denotation, v.elem_type, v.shape, v.dims, v.type_key) == full_value(data)
    assert parsed.Value(blobs[-1]).shape == (2, 3, 4, 5, 6)              # (repeated dims merged: appended)
    nodes = [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 2, 3, 1]),
             helper.make_node("Relu", ["y"], ["z"]),
             helper.make_node("Conv", ["z", "w", ""], ["c"], domain="com.microsoft", pads=[1, 2, 1, 2])]
    for n in nodes:
        rec = parsed.Node(n.SerializeToString())
        assert (rec.op_type, rec.domain, rec.name, rec.input, rec.output) == (
            n.op_type, n.domain, n.name, tuple(n.input), tuple(n.output))
        assert list(rec.attribute) == list(n.attribute) and list(rec.attribute) == list(n.attribute)


def test_an_open_checks_from_what_its_metadata_pass_read(tmp_path, monkeypatch):
    """The open's conversion (loader_job.convert_and_lay_out, as in the child) lists the findings a checker from
    scratch lists, reading the model whole once (the pass's reading reused, as after a pin)."""
    from inspector.core.io.tflite_builder import ModelBuilder
    from inspector.gui import loader_job
    b = ModelBuilder()
    w = b.const("w", np.full((3, 3, 3, 3), 0.01, np.float32))
    x = b.input("x", [1, 5, 7, 3])
    y, z = b.tensor("y", [1, 5, 7, 3]), b.tensor("z", [1, 5, 7, 3])
    b.op("CONV_2D", [x, w, b.const("b", np.zeros(3, np.float32))], [y], {"padding": "SAME"})
    b.op("RELU", [y], [z])
    b.output(z)
    graph = load_model(b.save(tmp_path / "m.tflite"))
    calls = []
    real = parsed.Memo.parts
    monkeypatch.setattr(parsed.Memo, "parts", lambda self, model: calls.append(1) or real(self, model))
    result, _notes, _vg, _layout = loader_job.convert_and_lay_out(graph, Reconverter(), False)
    monkeypatch.undo()
    assert len(calls) == 1
    fresh = Linter(Memo()).lint(result.model)
    assert [(f.message, f.code, f.severity) for f in result.findings] == [(f.message, f.code, f.severity)
                                                                         for f in fresh]
