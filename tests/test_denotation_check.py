"""Denotation checking: image metadata consistency, dimension denotation propagation and verification."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from inspector.core.metadata.denotation import consistency_findings, propagate
from inspector.core.metadata.lint import lint as check
from inspector.core.metadata.edits import MetadataEdits

B, C, F, T = "DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE", "DATA_TIME"
NCHW = [B, C, F, F]


def model(nodes, inputs, outputs, inits=(), opset=18, value_info=()):
    """A checked ONNX model from (name, shape) inputs/outputs; float32 everywhere."""
    vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)   # noqa: E731
    g = helper.make_graph(nodes, "g", [vi(*i) for i in inputs], [vi(*o) for o in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits],
                          value_info=[vi(*v) for v in value_info])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


def denote(m, **dims):
    MetadataEdits(dims={k: list(v) for k, v in dims.items()}).apply(m)
    return m


def nhcw_pool():
    """The Dimension Denotation proposal's example: an NCHW input transposed to NHCW, then pooled."""
    return denote(model([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3], name="to_nhcw"),
                         helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[2, 2], name="pool")],
                        [("x", [1, 3, 6, 8])], [("y", [1, 6, 2, 7])]), x=NCHW)


def conv_net():
    """A clean NCHW net: Conv, BatchNorm, Relu, MaxPool, residual Add with a broadcast bias, Resize,
    GlobalAveragePool, Flatten, Gemm; non-square everywhere."""
    w = np.zeros((4, 3, 3, 3), np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "bias"], ["a"], name="add_bias"),
        helper.make_node("Add", ["a", "c"], ["res"], name="residual"),
        helper.make_node("MaxPool", ["res"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Resize", ["p", "", "scales"], ["up"], mode="nearest", name="resize"),
        helper.make_node("ReduceMean", ["up", "axes"], ["m"], keepdims=1, name="mean_hw"),
        helper.make_node("GlobalAveragePool", ["up"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc"),
    ]
    inits = [("w", w), ("s", np.ones(4, np.float32)), ("b", np.zeros(4, np.float32)),
             ("mu", np.zeros(4, np.float32)), ("var", np.ones(4, np.float32)),
             ("bias", np.zeros((4, 1, 1), np.float32)), ("scales", np.array([1, 1, 2, 2], np.float32)),
             ("axes", np.array([2, 3], np.int64)), ("fc", np.zeros((4, 5), np.float32))]
    return denote(model(nodes, [("x", [1, 3, 6, 10])], [("y", [1, 5]), ("m", [1, 4, 1, 1])], inits), x=NCHW)


def test_nhcw_transpose_before_a_pool_is_a_finding_naming_node_and_both_denotations():
    findings = check(nhcw_pool())
    assert len(findings) == 1
    f = findings[0]
    assert f.node == "pool" and f.kind == "format"
    assert "[DATA_BATCH, DATA_CHANNEL, DATA_FEATURE, DATA_FEATURE]" in f.message       # expected
    assert "[DATA_BATCH, DATA_FEATURE, DATA_CHANNEL, DATA_FEATURE]" in f.message       # actual
    assert f.to_dict()["node"] == "pool" and "message" in f.to_dict()


def test_clean_nchw_conv_net_has_no_findings_and_denotations_flow_to_the_end():
    m = conv_net()
    dens, findings = propagate(m)
    assert findings == []
    assert check(m) == []
    for name in ("c", "bn", "r", "a", "res", "p", "up", "m", "g"):
        assert list(dens[name]) == NCHW, name
    assert "f" not in dens and "y" not in dens          # Flatten and Gemm end them


def test_no_declared_denotations_means_no_findings_but_conv_outputs_are_known():
    m = nhcw_pool()
    MetadataEdits(dims={"x": []}).apply(m)
    dens, findings = propagate(m)
    assert findings == [] and "t" not in dens
    assert list(dens["y"]) == NCHW                     # the pool's own output format


def test_conv_output_transposed_to_nhcw_is_caught_without_any_declared_denotation():
    w = np.zeros((4, 3, 1, 1), np.float32)
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
               helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 1, 3], name="tr"),
               helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[1, 1], name="pool")],
              [("x", [1, 3, 6, 8])], [("y", [1, 6, 4, 8])], [("w", w)])
    (f,) = check(m)
    assert f.node == "pool"


def test_transpose_back_and_forth_is_clean():
    m = denote(model([helper.make_node("Transpose", ["x"], ["nhwc"], perm=[0, 2, 3, 1]),
                      helper.make_node("Relu", ["nhwc"], ["r"]),
                      helper.make_node("Transpose", ["r"], ["nchw"], perm=[0, 3, 1, 2]),
                      helper.make_node("AveragePool", ["nchw"], ["y"], kernel_shape=[2, 2], name="pool")],
                     [("x", [1, 3, 6, 8])], [("y", [1, 3, 5, 7])]), x=NCHW)
    dens, findings = propagate(m)
    assert findings == [] and list(dens["r"]) == [B, F, F, C]


def test_elementwise_mix_of_nchw_and_nhwc_is_a_finding_but_size_one_broadcast_is_not():
    # [1, 5, 6, 5] read as NCHW (C=5, H=6, W=5) and as NHWC (H=5, W=6, C=5): same shape, different meaning.
    m = denote(model([helper.make_node("Add", ["x", "z"], ["y"], name="mix")],
                     [("x", [1, 5, 6, 5]), ("z", [1, 5, 6, 5])], [("y", [1, 5, 6, 5])]),
               x=NCHW, z=[B, F, F, C])
    (f,) = check(m)
    assert f.node == "mix" and "axis 1, 3" in f.message and "'x'" in f.message and "'z'" in f.message
    ok = denote(model([helper.make_node("Mul", ["x", "s"], ["y"], name="scale")],
                      [("x", [1, 3, 6, 8]), ("s", [1, 1, 6, 1])], [("y", [1, 3, 6, 8])]),
                x=NCHW, s=[B, C, F, C])   # s's size-1 axes broadcast: their meaning does not matter
    assert check(ok) == []


def test_reductions_squeeze_unsqueeze_and_concat():
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
             helper.make_node("Unsqueeze", ["m", "uax"], ["u"]),
             helper.make_node("Squeeze", ["u", "uax"], ["s"]),
             helper.make_node("Concat", ["x", "x"], ["cat"], axis=1),
             helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0)]
    m = denote(model(nodes, [("x", [1, 3, 6, 8])],
                     [("s", [1, 3]), ("cat", [1, 6, 6, 8])],
                     [("axes", np.array([2, 3], np.int64)), ("uax", np.array([-1], np.int64))]), x=NCHW)
    dens, findings = propagate(m)
    assert findings == []
    assert dens["m"] == (B, C) and dens["u"] == (B, C, "") and dens["s"] == (B, C)
    assert list(dens["cat"]) == NCHW and dens["am"] == (B, F, F)


def test_resize_scaling_the_channel_axis_is_a_finding():
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize")]
    bad = denote(model(nodes, [("x", [1, 3, 6, 8])], [("y", [1, 6, 6, 8])],
                       [("scales", np.array([1, 2, 1, 1], np.float32))]), x=NCHW)
    (f,) = check(bad)
    assert f.node == "resize" and "DATA_CHANNEL" in f.message
    # An NHWC tensor resized on axes 1 and 2 is legitimate.
    nhwc = denote(model(nodes, [("x", [1, 6, 8, 3])], [("y", [1, 12, 16, 3])],
                        [("scales", np.array([1, 2, 2, 1], np.float32))]), x=[B, F, F, C])
    assert check(nhwc) == []


def test_declared_output_contradicting_the_propagated_one_names_the_producing_node():
    m = denote(model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1], name="to_nhwc")],
                     [("x", [1, 3, 6, 8])], [("y", [1, 6, 8, 3])]), x=NCHW, y=NCHW)
    (f,) = check(m)
    assert f.node == "to_nhwc" and f.kind == "mismatch"


def test_time_axes_are_accepted_where_a_conv_slides():
    w = np.zeros((4, 2, 3), np.float32)
    m = denote(model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv1d")],
                     [("x", [1, 2, 9])], [("y", [1, 4, 7])], [("w", w)]), x=[B, C, T])
    dens, findings = propagate(m)
    assert findings == [] and dens["y"] == (B, C, T)


# -- image metadata consistency -------------------------------------------------------------------------------------

def image_model(shape, pixel_format=None, pixel_range=None, dims=None, dtype=TensorProto.FLOAT):
    x = helper.make_tensor_value_info("x", dtype, list(shape))
    y = helper.make_tensor_value_info("y", dtype, list(shape))
    m = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 18)])
    image = {k: v for k, v in (("Image.BitmapPixelFormat", pixel_format), ("Image.NominalPixelRange",
                                                                           pixel_range)) if v}
    MetadataEdits(types={"x": "IMAGE"}, dims={"x": dims} if dims else {}, image=image).apply(m)
    return m


def test_consistent_image_has_no_findings():
    assert consistency_findings(image_model([1, 3, 6, 8], "Rgb8", "Normalized_0_1", NCHW)) == []
    assert consistency_findings(image_model([1, 6, 8, 4], "Bgra8", "NominalRange_0_255", [B, F, F, C],
                                            TensorProto.UINT8)) == []


@pytest.mark.parametrize("shape, fmt, dims, words", [
    ([1, 3, 6, 8], "Gray8", NCHW, "1 channel(s), but its DATA_CHANNEL axis has 3"),
    ([1, 6, 8, 3], "Rgba8", [B, F, F, C], "4 channel(s), but its DATA_CHANNEL axis has 3"),
    ([1, 3, 6, 8], "Rgb8", None, "which axis holds the channels"),
    ([3, 6, 8], "Rgb8", [C, F, F], "needs a 4-D tensor"),
])
def test_image_shape_channel_count_and_channel_axis(shape, fmt, dims, words):
    (f,) = consistency_findings(image_model(shape, fmt, None, dims))
    assert words in f.message and f.tensor == "x"


def test_eight_bit_range_on_a_float_input_says_what_it_implies():
    (f,) = consistency_findings(image_model([1, 3, 6, 8], "Rgb8", "NominalRange_0_255", NCHW))
    assert "float" in f.message and "0..255" in f.message and f.kind == "range"
    (f,) = consistency_findings(image_model([1, 3, 6, 8], "Rgb8", "Normalized_1_1", NCHW, TensorProto.UINT8))
    assert "8-bit integer" in f.message


def test_image_without_metadata_and_metadata_without_image():
    (f,) = consistency_findings(image_model([1, 3, 6, 8], None, None, NCHW))
    assert "no Image.* metadata" in f.message
    m = image_model([1, 3, 6, 8], "Rgb8", None, NCHW)
    MetadataEdits(types={"x": "TENSOR"}).apply(m)
    (f,) = consistency_findings(m)
    assert "no tensor is denoted IMAGE" in f.message
