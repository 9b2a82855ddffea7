"""Pairing a TFLite model with an ONNX model made elsewhere (inspector.core.pairing.mapping / pair).

The second route is made in the test: (a) our converter with keep_io_layout=True (names kept, I/O layout differs),
(b) an ONNX graph written by hand with onnx.helper for a small non-square model: NHWC I/O around an NCHW body, an
extra Transpose pair, values named in the ways other converters name them (`_nchw`, `:0`, `_raw_output___3`) or not
at all, and a Softmax on the wrong axis. Numbers are judged against LiteRT.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector.core.emit.convert import convert
from inspector.core.pairing.pair import open_pair, write_with_metadata
from inspector.core.layout.fitting import fitting_perms
from inspector.core.pairing.mapping import match, normalise
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import validate


H, W, C = 6, 10, 3          # non-square: every tensor's layout can be read off its shape


def tflite_model(path):
    """x[1,6,10,3] -> CONV 3x3 (RELU) c[1,6,10,4] -> MAX_POOL 2x2 p[1,3,5,4] -> CONV 1x1 q[1,3,5,2]
    -> CONCAT(p, q) cat[1,3,5,6] -> SOFTMAX s[1,3,5,6]."""
    rng = np.random.default_rng(7)
    b = ModelBuilder()
    x = b.input("x", [1, H, W, C])
    w1 = b.const("w1", rng.normal(0, 0.5, (4, 3, 3, C)).astype(np.float32))
    b1 = b.const("b1", rng.normal(0, 0.1, 4).astype(np.float32))
    c = b.tensor("c", [1, H, W, 4])
    b.op("CONV_2D", [x, w1, b1], [c], {"padding": "SAME", "fused_activation_function": "RELU"})
    p = b.tensor("p", [1, 3, 5, 4])
    b.op("MAX_POOL_2D", [c], [p], {"padding": "VALID", "filter_height": 2, "filter_width": 2,
                                     "stride_h": 2, "stride_w": 2})
    w2 = b.const("w2", rng.normal(0, 0.5, (2, 1, 1, 4)).astype(np.float32))
    b2 = b.const("b2", rng.normal(0, 0.1, 2).astype(np.float32))
    q = b.tensor("q", [1, 3, 5, 2])
    b.op("CONV_2D", [p, w2, b2], [q], {"padding": "VALID"})
    cat = b.tensor("cat", [1, 3, 5, 6])
    b.op("CONCATENATION", [p, q], [cat], {"axis": 3})
    s = b.tensor("s", [1, 3, 5, 6])
    b.op("SOFTMAX", [cat], [s], {"beta": 1.0})
    b.output(s)
    return b.save(path)


def hand_onnx(graph, path, softmax_axis=1, concat_axis=1, concat_inputs=("v7", "q_raw_output___3")):
    """What another converter might write: NHWC I/O, NCHW inside, names partly kept, an extra Transpose pair in
    front of the 1x1 Conv, an extra output nothing in TFLite computes."""
    sg = graph.main
    data = {t.name: np.asarray(t.data) for t in sg.tensors if t.data is not None}
    nchw, nhwc = [0, 3, 1, 2], [0, 2, 3, 1]
    inits = [numpy_helper.from_array(np.transpose(data["w1"], nchw).copy(), "W1"),
             numpy_helper.from_array(data["b1"].copy(), "B1"),
             numpy_helper.from_array(np.transpose(data["w2"], nchw).copy(), "W2"),
             numpy_helper.from_array(data["b2"].copy(), "B2")]
    N = helper.make_node
    nodes = [
        N("Transpose", ["x"], ["x__transpose:0"], perm=nchw, name="tr_in"),
        # tf2onnx's way: the Conv carries the tensor's name, the fused Relu after it another one
        N("Conv", ["x__transpose:0", "W1", "B1"], ["c"], pads=[1, 1, 1, 1], name="conv1"),
        N("Relu", ["c"], ["Relu__5:0"], name="relu1"),
        N("MaxPool", ["Relu__5:0"], ["v7"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),   # no name: position
        N("Transpose", ["v7"], ["extra_a"], perm=nhwc, name="extra_t1"),     # a pair that cancels
        N("Transpose", ["extra_a"], ["extra_b"], perm=nchw, name="extra_t2"),
        N("Conv", ["extra_b", "W2", "B2"], ["q_raw_output___3"], name="conv2"),
        N("Concat", list(concat_inputs), ["cat_nchw"], axis=concat_axis, name="concat"),
        N("Softmax", ["cat_nchw"], ["v9"], axis=softmax_axis, name="softmax"),
        N("Transpose", ["v9"], ["output_0"], perm=nhwc, name="tr_out"),
        N("ReduceMean", ["Relu__5:0"], ["debug"], keepdims=0, name="debug_mean"),   # no TFLite counterpart
    ]
    g = helper.make_graph(nodes, "other", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, H, W, C])],
                          [helper.make_tensor_value_info("output_0", TensorProto.FLOAT, [1, 3, 5, 6]),
                           helper.make_tensor_value_info("debug", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], producer_name="hand")
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=concat_axis == 1)     # a wrong Concat axis fails shape inference
    onnx.save(model, path)
    return model


@pytest.fixture
def pair_files(tmp_path):
    tfl = tflite_model(tmp_path / "m.tflite")
    graph = read_tflite(tfl)
    good, bad = tmp_path / "good.onnx", tmp_path / "wrong_axis.onnx"
    hand_onnx(graph, good, softmax_axis=1)
    hand_onnx(graph, bad, softmax_axis=-1)          # tflite2onnx's 4-D Softmax bug: the axis stays -1 (W in NCHW)
    return tfl, good, bad


def tensor(graph, name):
    return graph.main.tensor_by_name(name).index


def test_normalise_strips_converter_suffixes():
    assert [normalise(n) for n in ["a/b:0", "conv_nchw", "x__transpose", "y_raw_output___12", "z_NCHW",
                                   "conv2d_1"]] == ["a/b", "conv", "x", "y", "z", "conv2d_1"]
    assert fitting_perms((1, 6, 10, 3), [1, 3, 6, 10]) == [(0, 3, 1, 2)]
    assert fitting_perms((1, 6, 10, 3), [-1, 6, 10, 3])[0] == (0, 1, 2, 3)
    assert fitting_perms((1, 6, 10, 3), [1, 6, 3, 3]) == []


def test_hand_built_mapping(pair_files):
    tfl, good, _ = pair_files
    graph = read_tflite(tfl)
    m = match(graph, onnx.load(good))
    t = {n: tensor(graph, n) for n in ["x", "c", "p", "q", "cat", "s"]}
    assert m.tensor_values[t["x"]] == ["x", "x__transpose:0"]
    assert m.tensor_values[t["c"]] == ["Relu__5:0"] and m.how[t["c"]] == "name"     # after the fused Relu
    assert m.tensor_values[t["p"]] == ["v7", "extra_a", "extra_b"] and m.how[t["p"]] == "position"
    assert m.image(t["q"]) == "q_raw_output___3" and m.image(t["cat"]) == "cat_nchw"
    assert m.tensor_values[t["s"]] == ["v9", "output_0"] and m.how[t["s"]] == "io"   # v9: transposed back
    # Layouts read off the shapes: NCHW inside, NHWC at the copies and the output.
    assert m.layout("Relu__5:0") == (0, 3, 1, 2) and m.layout("extra_a") == (0, 1, 2, 3)
    assert m.layout("output_0") == (0, 1, 2, 3)
    # Nodes: the Conv's first node and the Transpose in front belong to CONV_2D#0, the pair to the 1x1 Conv.
    assert m.op_nodes[0] == ["tr_in", "conv1", "relu1"]
    assert m.op_nodes[1] == ["pool"] and m.op_nodes[2] == ["extra_t1", "extra_t2", "conv2"]
    assert m.op_nodes[4] == ["softmax", "tr_out"]
    assert m.node_op["concat"] == 3
    # What has no counterpart is listed, not paired.
    assert m.unmatched_nodes == ["debug_mean"] and m.unmatched_io == ["debug"]
    assert m.unmatched_tensors == [] and m.unmatched_ops == []
    assert m.coverage(graph) == {"tensors": [6, 6], "ops": [5, 5], "by": {"name": 4, "io": 1, "position": 1}}


def test_hand_built_findings(pair_files):
    tfl, good, _ = pair_files
    pair = open_pair(str(tfl), str(good))
    kinds = {}
    for f in pair.findings:
        kinds.setdefault(f.kind, []).append(f)
    (cancel,) = kinds["transpose-pair"]
    assert cancel.nodes == ["extra_t1", "extra_t2"] and cancel.op == 2
    assert cancel.tensor == tensor(pair.graph, "p")
    # The input and output Transposes: our plan takes NCHW in and gives NCHW out, so it needs neither.
    assert sorted(f.nodes[0] for f in kinds["transpose-unneeded"]) == ["tr_in", "tr_out"]
    io = {f.tensor: f.message for f in kinds["io-layout"]}
    assert set(io) == {tensor(pair.graph, "x"), tensor(pair.graph, "s")}
    assert "theirs is NHWC, ours is NCHW" in io[tensor(pair.graph, "x")]
    assert pair.counts["transposes"] == {"ours": pair.ours.transposes, "theirs": 4}
    assert pair.ours.transposes == 0            # a pure CNN: no Transpose at all in ours
    assert pair.counts["nodes"]["theirs"] == 11
    # Inside, their layouts are ours (NCHW); the output's image is the NCHW Softmax result, the input stays NHWC.
    assert pair.layouts() == {"same": 5, "differ": [{"tensor": "x", "theirs": "NHWC", "ours": "NCHW"}],
                              "unknown": 0}
    assert pair.counts["bytes"]["theirs"] == good.stat().st_size


def test_validation_passes_on_the_faithful_model(pair_files):
    tfl, good, _ = pair_files
    pair = open_pair(str(tfl), str(good))
    v = pair.validate(seed=3)
    assert v.ok and v.first_bad() is None
    assert [e.name for e in v.tensors] == ["c", "p", "q", "cat", "s"]
    assert all(e.max_rel < 1e-5 for e in v.tensors)
    assert v.perms[tensor(pair.graph, "p")] == (0, 3, 1, 2)      # compared in the layout its shape shows
    assert v.perms[tensor(pair.graph, "s")] == (0, 3, 1, 2)      # its image: the Softmax output, NCHW


def test_validation_points_at_the_wrong_axis(pair_files):
    tfl, _, bad = pair_files
    pair = open_pair(str(tfl), str(bad))
    v = pair.validate(seed=3)
    assert not v.ok
    first = v.first_bad()
    assert first.name == "s" and first.op == 4 and pair.graph.main.ops[first.op].opcode == "SOFTMAX"
    assert pair.mapping.op_nodes[first.op][0] == "softmax"
    ok = {e.name: e.ok for e in v.tensors}
    assert ok == {"c": True, "p": True, "q": True, "cat": True, "s": False}
    j = v.to_json(pair.graph, pair.mapping)
    assert j["first_bad"]["opcode"] == "SOFTMAX#4" and j["first_bad"]["nodes"] == ["softmax", "tr_out"]


def test_own_converter_keep_io_layout(pair_files, tmp_path):
    """Route (a): names match exactly, every op maps, the I/O layouts differ from our default."""
    tfl, _, _ = pair_files
    graph = read_tflite(tfl)
    kept = convert(graph, keep_io_layout=True)
    path = tmp_path / "kept.onnx"
    onnx.save(kept.model, path)
    pair = open_pair(str(tfl), str(path))
    m = pair.mapping
    assert m.unmatched_tensors == [] and m.unmatched_ops == [] and m.unmatched_nodes == []
    for t, values in kept.trace.tensor_values.items():       # our trace is the truth here
        if t in m.scope:
            assert m.image(t) in values
    assert all(m.node_op[n] == k for n, k in kept.trace.node_op.items())
    assert {f.kind for f in pair.findings} >= {"io-layout", "transpose-unneeded"}
    assert pair.counts["transposes"]["theirs"] - pair.counts["transposes"]["ours"] == 2
    assert pair.validate().ok


@pytest.mark.parametrize("rel", ["ops/avgpool-concat.float32.tflite", "ops/split.float32.tflite",
                                 "keras/custom_unet_small_fp32.tflite",
                                 "realworld/face_detection_front.tflite", "keras/custom_transformer_block_fp32.tflite",
                                 "keras/mobilenetv3small_fp32.tflite"])
def test_corpus_renamed(corpus, tmp_path, rel):
    """Corpus models against our keep-io-layout conversion with every inner value and node renamed: the mapping
    must come from graph position and shape alone, and agree with our converter's trace."""
    graph = read_tflite(corpus / rel)
    kept = convert(graph, keep_io_layout=True)
    own = validate(kept)                        # through our own trace, before the names go
    model = kept.model
    g = model.graph
    keep = {v.name for v in list(g.input) + list(g.output)} | {i.name for i in g.initializer}
    new = {o: f"v{i}" for i, o in enumerate(o for n in g.node for o in n.output if o and o not in keep)}
    for n in g.node:
        n.input[:] = [new.get(x, x) for x in n.input]
        n.output[:] = [new.get(x, x) for x in n.output]
        n.name = ""
    for vi in g.value_info:
        vi.name = new.get(vi.name, vi.name)
    path = tmp_path / "renamed.onnx"
    onnx.save(model, path)
    pair = open_pair(str(corpus / rel), str(path))
    m = pair.mapping
    assert m.unmatched_tensors == [] and m.unmatched_ops == []
    assert m.how[graph.main.outputs[0]] == "name"
    inner = [t for t in m.scope if t not in graph.main.inputs + graph.main.outputs]
    assert inner and all(m.how[t] == "position" for t in inner)
    for t in inner:
        assert m.image(t) in [new.get(v, v) for v in kept.trace.tensor_values[t]], graph.main.tensors[t].name
    v = pair.validate()
    assert v.ok and len(v.tensors) == len(inner) + len(graph.main.outputs)
    # The same verdict per tensor as our own validation through our own trace (MobileNetV3 has a HARD_SWISH
    # whose kernels differ by 1.03e-4 of its scale: flagged by both, or by neither).
    assert own.intermediates
    assert {e.tensor for e in v.tensors if not e.ok} == {e.tensor for e in own.intermediates + own.outputs if not e.ok}


def test_ambiguous_siblings_stay_unmatched(tmp_path):
    """Two branches with the same shape, op type and no weights to tell them apart: listed, not guessed."""
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6])
    a, n, y = b.tensor("a", [1, 4, 6]), b.tensor("n", [1, 4, 6]), b.tensor("y", [1, 4, 6])
    b.op("ABS", [x], [a])
    b.op("ABS", [x], [n])
    b.op("SUB", [a, n], [y])
    b.output(y)
    graph = read_tflite(b.save(tmp_path / "m.tflite"))
    N = helper.make_node
    g = helper.make_graph([N("Abs", ["x"], ["u1"]), N("Abs", ["x"], ["u2"]), N("Sub", ["u1", "u2"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6])])
    m = match(graph, helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    assert sorted(graph.main.tensors[t].name for t in m.unmatched_tensors) == ["a", "n"]
    assert m.unmatched_ops == [0, 1] and m.unmatched_nodes == ["Abs#0", "Abs#1"]
    assert m.op_nodes == {2: ["Sub#2"]}


def test_metadata_edit_leaves_the_graph_alone(pair_files, tmp_path):
    from inspector.core.io.atomic import WriteError
    from inspector.core.metadata.edits import MetadataEdits
    _, good, _ = pair_files
    model = onnx.load(good)
    edits = MetadataEdits(types={"x": "IMAGE"}, dims={"x": ["DATA_BATCH", "DATA_FEATURE", "DATA_FEATURE",
                                                            "DATA_CHANNEL"]},
                          image={"Image.BitmapPixelFormat": "RGB8"}, props={"source": "hand"})
    out = tmp_path / "edited.onnx"
    write_with_metadata(model, edits, str(out), protect=[good])
    edited = onnx.load(out)
    assert edited.graph.input[0].type.denotation == "IMAGE"
    assert [d.denotation for d in edited.graph.input[0].type.tensor_type.shape.dim][3] == "DATA_CHANNEL"
    assert {p.key: p.value for p in edited.metadata_props} == {"Image.BitmapPixelFormat": "Rgb8", "source": "hand"}

    def bare(m):
        g = onnx.GraphProto()
        g.CopyFrom(m.graph)
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            vi.type.denotation = ""
            for d in vi.type.tensor_type.shape.dim:
                d.denotation = ""
        return g.SerializeToString(deterministic=True)
    assert bare(edited) == bare(onnx.load(good))
    assert edited.graph.SerializeToString() != onnx.load(good).graph.SerializeToString()   # the edit is there
    rest = [f for f in onnx.ModelProto.DESCRIPTOR.fields if f.name not in ("graph", "metadata_props")]
    assert all(getattr(edited, f.name) == getattr(model, f.name) for f in rest)
    with pytest.raises(WriteError, match="source model"):
        write_with_metadata(model, edits, str(good), protect=[good])


def test_cli_compare_json(pair_files, capsys):
    from inspector.cli import main
    tfl, _, bad = pair_files
    assert main(["compare", str(tfl), str(bad), "--json"]) == 1          # outputs differ: exit 1, as validate
    out = json.loads(capsys.readouterr().out)
    assert {"matched", "unmatched_tflite", "unmatched_onnx", "transposes", "validation", "findings",
            "counts"} <= set(out)
    assert out["matched"] == 6 and out["unmatched_tflite"] == []
    assert out["unmatched_onnx"] == [{"kind": "node", "name": "debug_mean"}, {"kind": "value", "name": "debug"}]
    assert out["transposes"] == {"ours": 0, "theirs": 4}
    assert out["validation"]["ok"] is False and out["validation"]["first_bad"]["opcode"] == "SOFTMAX#4"
    assert any(f["kind"] == "transpose-pair" for f in out["findings"])


def test_cli_compare_text(pair_files, capsys):
    from inspector.cli import main
    tfl, good, _ = pair_files
    assert main(["compare", str(tfl), str(good)]) == 0
    text = capsys.readouterr().out
    assert "6/6 tensors" in text and "cancel" in text and "debug_mean" in text
    assert main(["compare", str(good), str(tfl)]) == 1
    assert "must be TFLite" in capsys.readouterr().err


def test_as_result_gives_viewers_a_trace(pair_files):
    """The GUI syncs selection through result.trace: the pair hands it the mapping, and their needless Transposes
    as conflicts on their nodes."""
    tfl, good, _ = pair_files
    pair = open_pair(str(tfl), str(good))
    r = pair.as_result()
    assert r.trace is pair.mapping and r.model is pair.model
    assert r.trace.op_nodes[2] == ["extra_t1", "extra_t2", "conv2"]
    assert set(r.trace.inserted) == {"extra_t1", "extra_t2", "tr_in", "tr_out"}
    assert r.trace.inserted["extra_t1"].op == 2 and r.trace.inserted["tr_in"].tensor == tensor(pair.graph, "x")
    assert len(r.plan.conflicts) == 3 and r.categories == pair.ours.categories


def test_a_model_onnx_runtime_refuses_is_still_compared(pair_files, tmp_path, capsys):
    """Concat on the wrong axis (NCHW axis 2: 4 and 2 channels cannot meet): ONNX Runtime refuses the model; the
    mapping and findings still come, validation fails with the reason, never a traceback."""
    from inspector.cli import main
    tfl, _, _ = pair_files
    bad = tmp_path / "concat_axis.onnx"
    hand_onnx(read_tflite(tfl), bad, concat_axis=2)
    pair = open_pair(str(tfl), str(bad))
    m = pair.mapping
    assert m.matched == 6 and m.layout("cat_nchw") is None     # matched by name; shape inference gives it none
    assert m.layout("v9") == (0, 3, 1, 2)      # from the declared output, back through the Transpose
    v = pair.validate()
    assert not v.ok and v.outputs == [] and any("ONNX Runtime cannot run it" in n for n in v.notes)
    assert main(["compare", str(tfl), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "matched 6/6 tensors" in out and "FAIL the outputs could not be compared" in out


def test_first_wrong_op_is_the_earliest_not_the_last(pair_files, tmp_path):
    """Concat's inputs swapped (q before p: 2 + 4 channels, the same shape): Concat and the Softmax after it are
    both wrong; the report points at the Concat."""
    tfl, _, _ = pair_files
    swapped = tmp_path / "swapped.onnx"
    hand_onnx(read_tflite(tfl), swapped, concat_inputs=("q_raw_output___3", "v7"))
    pair = open_pair(str(tfl), str(swapped))
    v = pair.validate()
    assert {e.name for e in v.tensors if not e.ok} == {"cat", "s"}
    assert v.first_bad().name == "cat" and pair.graph.main.ops[v.first_bad().op].opcode == "CONCATENATION"
