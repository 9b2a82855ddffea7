"""Converter core: one test per category rule and per known trap, every model checked against LiteRT.

Shapes are non-square (H != W != C) so a wrong permutation changes results instead of hiding.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from inspector.core.layout import layout as L
from inspector.core.emit.convert import convert
from inspector.core.ir.errors import ConversionError
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import validate

RNG = np.random.default_rng(3)
CF = (0, 3, 1, 2)


def w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def conv(b, x, cin, cout, h, wd, name="c", weights=None, fused="NONE"):
    """A 3x2 SAME conv (non-square kernel) producing [1, h, wd, cout]."""
    y = b.tensor(name, [1, h, wd, cout])
    wt = weights if weights is not None else b.const(name + "_w", w(cout, 3, 2, cin))
    b.op("CONV_2D", [x, wt, b.const(name + "_b", w(cout))], [y],
         {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": fused})
    return y


def check(b, tmp_path, **kw):
    """Convert, validate against LiteRT, and return the result (asserts the outputs agree)."""
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    result = convert(read_tflite(path), **kw)
    v = validate(result)
    assert v.ok, [(e.name, e.max_rel) for e in v.outputs]
    return result


def ops(result, op_type):
    return [n for n in result.model.graph.node if n.op_type == op_type]


# --- category rules --------------------------------------------------------------------------------------------
def test_implicit_chain_needs_no_transpose_and_is_nchw(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    y = conv(b, conv(b, x, 3, 4, 5, 7, "a", fused="RELU"), 4, 6, 5, 7, "b")
    b.output(y)
    r = check(b, tmp_path)
    assert r.transposes == 0
    dims = [d.dim_value for d in r.model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, 5, 7]                                        # NCHW graph input
    assert r.plan.perms[y] == CF


def test_transparent_ops_carry_the_layout_and_broadcast_rank1_bias(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = conv(b, x, 3, 4, 5, 7, "a")
    bias = b.input("bias", [4])                                         # non-constant, lower rank
    s = b.tensor("s", [1, 5, 7, 4])
    b.op("ADD", [a, bias], [s], {"fused_activation_function": "RELU6"})
    t = b.tensor("t", [1, 5, 7, 4])
    b.op("ABS", [s], [t])
    b.output(t)
    r = check(b, tmp_path)
    assert r.transposes == 0 and r.plan.perms[t] == CF
    assert r.plan.perms.get(bias, (0,)) == (0,)                         # the [C] input keeps its layout


def test_rank_mismatch_broadcast_without_layout(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [2, 3, 5])
    y = b.input("y", [5])
    z = b.tensor("z", [2, 3, 5])
    b.op("MUL", [x, y], [z])
    b.output(z)
    r = check(b, tmp_path)
    assert r.transposes == 0 and not r.plan.conflicts


def test_attribute_concat_axis_is_remapped(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a, c = conv(b, x, 3, 4, 5, 7, "a"), conv(b, x, 3, 2, 5, 7, "c")
    y = b.tensor("y", [1, 5, 7, 6])
    b.op("CONCATENATION", [a, c], [y], {"axis": 3, "fused_activation_function": "NONE"})
    b.output(y)
    r = check(b, tmp_path)
    (node,) = ops(r, "Concat")
    assert [a.i for a in node.attribute if a.name == "axis"] == [1]
    assert r.transposes == 0


def test_terminate_reshape_gets_one_transpose_with_reason(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = conv(b, x, 3, 4, 5, 7, "a")
    y = b.tensor("y", [1, 140])
    b.op("RESHAPE", [a, b.const("shape", np.array([1, 140], np.int32))], [y], {"new_shape": [1, 140]})
    b.output(y)
    r = check(b, tmp_path)
    assert r.transposes == 1
    (c,) = r.plan.conflicts
    assert c.kind == "terminate" and "RESHAPE" in c.reason and c.node in r.trace.inserted


def test_reshape_of_size1_axes_needs_no_transpose(tmp_path):
    """Conv -> Mean(keep) -> Reshape: moving size-1 axes keeps memory order, so no Transpose."""
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = conv(b, x, 3, 4, 5, 7, "a")
    m = b.tensor("m", [1, 1, 1, 4])
    b.op("MEAN", [a, b.const("axes", np.array([1, 2], np.int32))], [m], {"keep_dims": True})
    y = b.tensor("y", [1, 4])
    b.op("RESHAPE", [m, b.const("shape", np.array([1, 4], np.int32))], [y], {"new_shape": [1, 4]})
    b.output(y)
    r = check(b, tmp_path)
    assert r.transposes == 0


# --- traps an older converter gets wrong --------------------------------------------------------------------------
def test_softmax_4d_after_conv_uses_channel_axis(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = conv(b, x, 3, 4, 5, 7, "a")
    y = b.tensor("y", [1, 5, 7, 4])
    b.op("SOFTMAX", [a], [y], {"beta": 1.0})
    b.output(y)
    r = check(b, tmp_path)
    # spelled out over the channel axis (ONNX Runtime transposes for a Softmax whose axis is not the last)
    assert not ops(r, "Softmax")
    inits = {i.name: list(numpy_helper.to_array(i)) for i in r.model.graph.initializer}
    assert [inits[n.input[1]] for n in ops(r, "ReduceMax") + ops(r, "ReduceSum")] == [[1], [1]]


def test_transpose_after_conv_folds_layout_into_perm(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = conv(b, x, 3, 4, 5, 7, "a")
    y = b.tensor("y", [1, 4, 7, 5])
    b.op("TRANSPOSE", [a, b.const("perm", np.array([0, 3, 2, 1], np.int32))], [y])
    b.output(y)
    r = check(b, tmp_path)
    (node,) = ops(r, "Transpose")                                       # the op itself, remapped: no extra one
    assert list(node.attribute[0].ints) == list(L.compose(L.inverse(CF), (0, 3, 2, 1)))


@pytest.mark.parametrize("keep", [True, False])
def test_mean_over_channel_axis(tmp_path, keep):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = conv(b, x, 3, 4, 5, 7, "a")
    y = b.tensor("y", [1, 5, 7, 1] if keep else [1, 5, 7])
    b.op("MEAN", [a, b.const("axes", np.array([3], np.int32))], [y], {"keep_dims": keep})
    b.output(y)
    r = check(b, tmp_path)
    (node,) = ops(r, "ReduceMean")
    axes = next(i for i in r.model.graph.initializer if i.name == node.input[1])
    assert list(np.frombuffer(axes.raw_data, np.int64)) == [1]


@pytest.mark.parametrize("padding,in_hw,out_hw", [("SAME", (5, 7), (10, 14)), ("VALID", (5, 7), (11, 16)),
                                                  ("SAME", (4, 6), (8, 12))])
def test_transpose_conv_stride2(tmp_path, padding, in_hw, out_hw):
    b = ModelBuilder()
    x = b.input("x", [1, *in_hw, 3])
    y = b.tensor("y", [1, *out_hw, 2])
    b.op("TRANSPOSE_CONV", [b.const("os", np.array([1, *out_hw, 2], np.int32)), b.const("f", w(2, 3, 4, 3)), x],
         [y], {"padding": padding, "stride_h": 2, "stride_w": 2})
    b.output(y)
    r = check(b, tmp_path)
    assert r.transposes == 0


def test_fully_connected_without_bias_and_3d_keep_num_dims(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [2, 3, 5])
    y = b.tensor("y", [2, 3, 4])
    b.op("FULLY_CONNECTED", [x, b.const("fw", w(4, 5)), None], [y], {"keep_num_dims": True})
    z = b.tensor("z", [6, 4])
    b.op("FULLY_CONNECTED", [x, b.const("fw2", w(4, 5)), b.const("fb", w(4))], [z],
         {"keep_num_dims": False, "fused_activation_function": "RELU"})
    b.output(y, z)
    check(b, tmp_path)


def test_shared_constant_transposed_once_per_layout(tmp_path):
    """Two convs share one weight; a constant used in NCHW and in TFLite layout gets one initializer each."""
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    shared = b.const("shared_w", w(3, 3, 2, 3))
    a = conv(b, x, 3, 3, 5, 7, "a", weights=shared)
    c = conv(b, a, 3, 3, 5, 7, "c", weights=shared)
    k = b.const("k", w(1, 5, 7, 3))
    s = b.tensor("s", [1, 5, 7, 3])
    b.op("ADD", [c, k], [s])                                            # k read in NCHW here
    flat = b.tensor("flat", [1, 105])
    b.op("RESHAPE", [x, b.const("shape", np.array([1, 105], np.int32))], [flat], {"new_shape": [1, 105]})
    kf = b.tensor("kf", [1, 105])
    b.op("RESHAPE", [k, b.const("shape2", np.array([1, 105], np.int32))], [kf], {"new_shape": [1, 105]})
    m = b.tensor("m", [1, 105])
    b.op("MUL", [flat, kf], [m])                                        # and in TFLite layout here
    b.output(s, m)
    r = check(b, tmp_path)
    names = [i.name for i in r.model.graph.initializer]
    assert sum(n.startswith("shared_w") for n in names) == 1
    assert sum(n.startswith("k") and not n.startswith("kf") for n in names) == 2


@pytest.mark.parametrize("mult", [1, 2, 3])
def test_depthwise_multiplier(tmp_path, mult):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    y = b.tensor("y", [1, 3, 4, 3 * mult])
    b.op("DEPTHWISE_CONV_2D", [x, b.const("dw", w(1, 3, 2, 3 * mult)), b.const("db", w(3 * mult))], [y],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2, "depth_multiplier": mult,
          "fused_activation_function": "RELU"})
    b.output(y)
    check(b, tmp_path)


# --- pins and I/O policy ------------------------------------------------------------------------------------------
def _conv_reshape_conv():
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    a = conv(b, x, 3, 4, 5, 7, "a")
    r = b.tensor("r", [1, 7, 5, 4])
    b.op("RESHAPE", [a, b.const("shape", np.array([1, 7, 5, 4], np.int32))], [r], {"new_shape": [1, 7, 5, 4]})
    y = conv(b, r, 4, 2, 7, 5, "y")
    b.output(y)
    return b, a, r, y


def test_pin_keep_changes_the_plan_and_still_validates(tmp_path):
    b, a, r, y = _conv_reshape_conv()
    base = check(b, tmp_path)
    assert base.transposes == 0          # the Reshape only regroups H and W within each channel: it runs on NCHW
    pinned = check(b, tmp_path, pins={"a": "keep"})
    assert pinned.plan.perms[a] == (0, 1, 2, 3)
    kinds = sorted(c.kind for c in pinned.plan.conflicts)
    assert kinds == ["meet", "pin"] and pinned.transposes == 2          # the pin moved the Transpose, it says why
    out = check(b, tmp_path, pins={"y": "keep"})                        # graph output stays NHWC
    dims = [d.dim_value for d in out.model.graph.output[0].type.tensor_type.shape.dim]
    assert dims == [1, 7, 5, 2]


def test_pin_custom_permutation_and_bad_pins(tmp_path):
    b, a, r, y = _conv_reshape_conv()
    r1 = check(b, tmp_path, pins={"r": "0,3,1,2"})
    assert r1.plan.perms[r] == CF
    graph = read_tflite(tmp_path / "m.tflite")
    with pytest.raises(ConversionError, match="no tensor named"):
        convert(graph, pins={"nope": "keep"})
    with pytest.raises(ConversionError, match="not a permutation"):
        convert(graph, pins={"r": "0,1,1,2"})


def test_keep_io_layout_puts_transposes_at_the_boundary(tmp_path):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    y = conv(b, x, 3, 4, 5, 7, "a")
    b.output(y)
    r = check(b, tmp_path, keep_io_layout=True)
    assert r.transposes == 2
    dims = [d.dim_value for d in r.model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 5, 7, 3]
    assert {c.kind for c in r.plan.conflicts} == {"meet", "io"}


def test_trace_maps_every_op_and_io(tmp_path):
    b, a, r, y = _conv_reshape_conv()
    res = check(b, tmp_path)
    node_names = {n.name for n in res.model.graph.node}
    for op_index, nodes in res.trace.op_nodes.items():
        assert nodes and set(nodes) <= node_names
        assert all(res.trace.node_op[n] == op_index for n in nodes)
    assert res.trace.tensor_values[y][0] in {v.name for v in res.model.graph.value_info} | {"y"}


def test_fused_tanh_follows_litert_and_says_so(tmp_path):
    """LiteRT's kernels ignore a fused TANH; the conversion matches the interpreter and warns."""
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    y = conv(b, x, 3, 4, 5, 7, "a", fused="TANH")
    b.output(y)
    r = check(b, tmp_path)
    assert not ops(r, "Tanh") and any("TANH is ignored" in w for w in r.warnings)


def test_validate_cli_on_keep_io_resize(tmp_path):
    """ONNX Runtime's optimiser refuses Resize-with-axes between Transposes; validation retries without it."""
    from inspector.cli import main
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    y = b.tensor("y", [1, 10, 21, 3])
    b.op("RESIZE_BILINEAR", [x, b.const("size", np.array([10, 21], np.int32))], [y], {"half_pixel_centers": True})
    b.output(y)
    (tmp_path / "m.tflite").write_bytes(b.build())
    assert main(["convert", str(tmp_path / "m.tflite"), "-o", str(tmp_path / "m.onnx"), "--keep-io-layout"]) == 0
    assert main(["validate", str(tmp_path / "m.tflite"), str(tmp_path / "m.onnx")]) == 0
