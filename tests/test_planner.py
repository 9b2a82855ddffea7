"""The global layout planner on generated PyTorch-/ONNX-origin patterns (non-square, validated against LiteRT):
TRANSPOSE-wrapped convolutions with NCHW I/O, permute -> LayerNorm -> permute, pixel shuffle as RESHAPE/TRANSPOSE,
a detection head reshaped to [1, anchors, values]; plus pins as hard constraints and the what-if API."""
from __future__ import annotations

import numpy as np

from inspector.core.layout import layout as L
from inspector.core.emit.convert import planner
from inspector.core.layout.solve import greedy, transposes
from inspector.core.io.tflite_builder import ModelBuilder

from .test_convert_core import check, conv

NCHW_TO_NHWC, NHWC_TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def transpose(b, x, shape, perm, name):
    y = b.tensor(name, shape)
    b.op("TRANSPOSE", [x, b.const(name + "_p", np.array(perm, np.int32))], [y])
    return y


def dims(value_info):
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


def greedy_count(result):
    pb = planner(result.graph).problem
    return transposes(pb, greedy(pb))[0]


def torch_cnn(h=6, w=10):
    """litert-torch's shape of a CNN: NCHW input, TRANSPOSE to NHWC, convs, TRANSPOSE back to NCHW output."""
    b = ModelBuilder()
    x = b.input("x", [1, 3, h, w])
    y = conv(b, conv(b, transpose(b, x, [1, h, w, 3], NCHW_TO_NHWC, "to_nhwc"), 3, 5, h, w, "a", fused="RELU"),
             5, 4, h, w, "b")
    b.output(transpose(b, y, [1, 4, h, w], NHWC_TO_NCHW, "to_nchw"))
    return b


def test_transpose_wrapped_convs_keep_nchw_io_and_need_no_transpose(tmp_path):
    r = check(torch_cnn(), tmp_path)
    assert r.transposes == 0 and r.plan.optimality.proven
    assert dims(r.model.graph.input[0]) == [1, 3, 6, 10] and dims(r.model.graph.output[0]) == [1, 4, 6, 10]
    assert "already channels-first" in r.plan.io_rules[r.graph.main.inputs[0]]
    assert greedy_count(r) == 0


def test_keras_image_input_still_becomes_nchw(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 6, 10, 3])
    b.output(conv(b, x, 3, 4, 6, 10))
    r = check(b, tmp_path)
    assert dims(r.model.graph.input[0]) == [1, 3, 6, 10] and "image-like" in r.plan.io_rules[r.graph.main.inputs[0]]


def test_permute_layernorm_permute_stays_channels_first(tmp_path):
    """torch's LayerNorm over channels of an NCHW map: permute to NHWC, normalise the last axis, permute back."""
    h, w, c = 6, 10, 5
    b = ModelBuilder()
    x = b.input("x", [1, 3, h, w])
    y = conv(b, transpose(b, x, [1, h, w, 3], NCHW_TO_NHWC, "t0"), 3, c, h, w, "a")
    nchw = transpose(b, y, [1, c, h, w], NHWC_TO_NCHW, "t1")
    last = transpose(b, nchw, [1, h, w, c], NCHW_TO_NHWC, "t2")       # permute(0, 2, 3, 1)
    axis = b.const("axis", np.array([3], np.int32))
    mean = b.tensor("mean", [1, h, w, 1])
    b.op("MEAN", [last, axis], [mean], {"keep_dims": True})
    d = b.tensor("d", [1, h, w, c])
    b.op("SQUARED_DIFFERENCE", [last, mean], [d])
    var = b.tensor("var", [1, h, w, 1])
    b.op("MEAN", [d, axis], [var], {"keep_dims": True})
    inv = b.tensor("inv", [1, h, w, 1])
    b.op("RSQRT", [var], [inv])
    cen = b.tensor("cen", [1, h, w, c])
    b.op("SUB", [last, mean], [cen])
    norm = b.tensor("norm", [1, h, w, c])
    b.op("MUL", [cen, inv], [norm])
    back = transpose(b, norm, [1, c, h, w], NHWC_TO_NCHW, "t3")        # permute(0, 3, 1, 2)
    b.output(conv(b, transpose(b, back, [1, h, w, c], NCHW_TO_NHWC, "t4"), c, 4, h, w, "b"))
    r = check(b, tmp_path)
    assert r.transposes == 0 and r.plan.optimality.proven
    assert greedy_count(r) >= r.transposes


def test_pixel_shuffle_as_reshape_and_transpose(tmp_path):
    """pixel_shuffle(2) lowered as litert-torch does: [1,H,W,C*4] -> [1,H,W,C,2,2] -> TRANSPOSE -> [1,2H,2W,C]."""
    h, w, c, s = 3, 5, 2, 2
    b = ModelBuilder()
    x = b.input("x", [1, 3, h, w])
    y = conv(b, transpose(b, x, [1, h, w, 3], NCHW_TO_NHWC, "t0"), 3, c * s * s, h, w, "a")
    r6 = b.tensor("r6", [1, h, w, c, s, s])
    b.op("RESHAPE", [y, b.const("s6", np.array([1, h, w, c, s, s], np.int32))], [r6])
    t6 = transpose(b, r6, [1, h, s, w, s, c], [0, 1, 4, 2, 5, 3], "t6")
    up = b.tensor("up", [1, h * s, w * s, c])
    b.op("RESHAPE", [t6, b.const("s4", np.array([1, h * s, w * s, c], np.int32))], [up])
    out = conv(b, up, c, 3, h * s, w * s, "b")
    b.output(transpose(b, out, [1, 3, h * s, w * s], NHWC_TO_NCHW, "t7"))
    r = check(b, tmp_path)
    # Reshapes are Terminate: the conv's NCHW map goes back to TFLite order before the first, the shuffle's
    # TRANSPOSE then writes a layout the second Reshape must undo, and the next conv reads NCHW again: 3.
    assert r.plan.optimality.proven and r.transposes <= min(3, greedy_count(r))
    assert dims(r.model.graph.input[0]) == [1, 3, h, w] and dims(r.model.graph.output[0]) == [1, 3, h * s, w * s]


def test_detection_head_reshape_needs_exactly_one_transpose_per_level(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 3, 8, 12])
    f = conv(b, transpose(b, x, [1, 8, 12, 3], NCHW_TO_NHWC, "t0"), 3, 6, 8, 12, "f")
    heads = []
    for k, (hh, ww) in enumerate([(8, 12), (4, 6)]):
        src = f
        if k:
            src = b.tensor("pool", [1, hh, ww, 6])
            b.op("MAX_POOL_2D", [f], [src], {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2,
                                              "filter_width": 2})
        m = conv(b, src, 6, 2 * 4, hh, ww, f"box{k}")        # 2 anchors x 4 values
        r3 = b.tensor(f"r{k}", [1, hh * ww * 2, 4])
        b.op("RESHAPE", [m, b.const(f"s{k}", np.array([1, hh * ww * 2, 4], np.int32))], [r3])
        heads.append(r3)
    out = b.tensor("boxes", [1, (8 * 12 + 4 * 6) * 2, 4])
    b.op("CONCATENATION", heads, [out], {"axis": 1})
    b.output(out)
    r = check(b, tmp_path)
    assert r.transposes == 2 and r.plan.optimality.proven
    assert all(c.kind == "terminate" for c in r.plan.conflicts)


def test_pins_are_hard_and_what_if_matches_convert(tmp_path):
    b = torch_cnn()
    r = check(b, tmp_path)
    sg = r.graph.main
    a = next(t.index for t in sg.tensors if t.name == "a")
    asker = planner(r.graph)
    keep = L.identity(4)
    asked = asker.transposes_if(a, keep)
    pinned = check(torch_cnn(), tmp_path, pins={"a": "keep"})
    assert pinned.plan.perms[a] == keep and pinned.transposes == asked.transposes >= 1
    assert asked.proven and L.channels_first(4) in asker.candidates(a)


def test_peephole_folds_chains_and_turns_size1_moves_into_reshapes():
    import onnx
    from onnx import TensorProto, helper

    from inspector.core.emit import peephole
    from inspector.core.proof.validate import run_onnx
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 1, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 1, 5])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 1, 3, 5])
    nodes = [helper.make_node("Transpose", ["x"], ["a"], "t1", perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["a"], ["y"], "t2", perm=[0, 3, 1, 2]),       # inverse of t1
             helper.make_node("Transpose", ["x"], ["z"], "t3", perm=[0, 2, 1, 3])]       # moves only the size-1 axis
    g = helper.make_graph(nodes, "g", [x], [y, z])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    feed = {"x": np.random.default_rng(0).uniform(-1, 1, (2, 3, 1, 5)).astype(np.float32)}
    before = run_onnx(model, feed, [])
    lines = peephole.clean(model.graph)
    assert len(lines) == 3 and [n.op_type for n in model.graph.node] == ["Identity", "Reshape"]
    onnx.checker.check_model(model, full_check=True)
    after = run_onnx(model, feed, [])
    assert all(np.array_equal(before[k], after[k]) for k in ("y", "z"))


def test_linear_over_channels_of_a_channels_first_map_is_a_1x1_conv(tmp_path):
    """ConvNeXt's block in litert-torch's form: depthwise conv, flatten H and W, Linear over channels, GELU,
    Linear back, unflatten, residual add: the flatten carries channels-first and the Linears become 1x1 Convs."""
    h, w, c, hidden = 6, 10, 4, 8
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    x = b.input("x", [1, 3, h, w])
    y = conv(b, transpose(b, x, [1, h, w, 3], NCHW_TO_NHWC, "t0"), 3, c, h, w, "a")
    flat = b.tensor("flat", [1, h * w, c])
    b.op("RESHAPE", [y, b.const("s3", np.array([1, h * w, c], np.int32))], [flat])
    up = b.tensor("up", [1, h * w, hidden])
    b.op("FULLY_CONNECTED", [flat, b.const("w1", rng.uniform(-1, 1, (hidden, c)).astype(np.float32)),
                             b.const("b1", rng.uniform(-1, 1, hidden).astype(np.float32))], [up],
         {"keep_num_dims": True})
    act = b.tensor("act", [1, h * w, hidden])
    b.op("GELU", [up], [act])
    down = b.tensor("down", [1, h * w, c])
    b.op("FULLY_CONNECTED", [act, b.const("w2", rng.uniform(-1, 1, (c, hidden)).astype(np.float32)), None],
         [down], {"keep_num_dims": True})
    back = b.tensor("back", [1, h, w, c])
    b.op("RESHAPE", [down, b.const("s4", np.array([1, h, w, c], np.int32))], [back])
    res = b.tensor("res", [1, h, w, c])
    b.op("ADD", [back, y], [res])
    b.output(transpose(b, res, [1, c, h, w], NHWC_TO_NCHW, "t1"))
    r = check(b, tmp_path)
    assert r.transposes == 0 and r.plan.optimality.proven
    assert sum(n.op_type == "Conv" for n in r.model.graph.node) == 3



def test_an_absorbed_transpose_leaves_no_identity_but_the_one_an_output_needs(tmp_path):
    """litert-torch's input TRANSPOSE becomes no node (its readers read the graph input); the output TRANSPOSE's
    Identity stays: the graph output needs a producer of its own name. Each tensor is still compared: the absorbed
    one through the value it equals."""
    b = torch_cnn()
    r = check(b, tmp_path)
    assert [n.op_type for n in r.model.graph.node] == ["Conv", "Relu", "Conv", "Identity"]
    assert r.model.graph.node[-1].output[0] == r.model.graph.output[0].name
    sg = r.graph.main
    absorbed = next(t.index for t in sg.tensors if t.name == "to_nhwc")
    assert r.trace.tensor_values[absorbed][0] == r.model.graph.input[0].name
    assert "to_nhwc" not in {v.name for v in r.model.graph.value_info}
    from inspector.core.proof.validate import validate
    v = validate(r)
    assert v.ok and any(e.tensor == absorbed and e.ok for e in v.intermediates)
