"""Forms chosen for ONNX Runtime's speed, each against LiteRT on non-square maps: a quantized MAX_POOL_2D runs its
stored integers as floats (ONNX Runtime's int8/uint8 MaxPool is a slow generic loop) and hands them back through
QuantizeLinear where a convolution reads them, so that it fuses into an integer kernel (a CONCATENATION read by one
too); a SOFTMAX over the channels of a channels-first map is spelled out (ONNX Runtime's Softmax and QLinearSoftmax
transpose for an axis that is not the last)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder

from .test_quant import nodes, save
from .test_quant_seeds import litert_and_onnx

RNG = np.random.default_rng(61)


def ort_optimised(result, tmp_path) -> list[str]:
    """Op types of the graph ONNX Runtime runs (its QDQ fusions applied), for the CPU provider."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    ort.InferenceSession(result.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(tmp_path / "optimised.onnx")).graph.node]


def pool(b, x, shape, dtype, q, kernel=(2, 3), stride=(2, 2), act="NONE"):
    oh, ow = -(-shape[1] // stride[0]), -(-shape[2] // stride[1])
    p = b.tensor("p", [1, oh, ow, shape[3]], dtype, quant=q)
    b.op("MAX_POOL_2D", [x], [p], {"padding": "SAME", "filter_height": kernel[0], "filter_width": kernel[1],
                                   "stride_h": stride[0], "stride_w": stride[1], "fused_activation_function": act})
    return p, [1, oh, ow, shape[3]]


def conv(b, x, shape, sx, out_ch, q_out, k=3, name="c"):
    """An int8 CONV_2D (symmetric per-tensor weights) over x [1, H, W, C], SAME."""
    sw = 0.02
    w = b.const(f"{name}_w", RNG.integers(-127, 128, (out_ch, k, k, shape[3])).astype(np.int8), quant=(sw, 0))
    bias = b.const(f"{name}_b", RNG.integers(-2000, 2000, out_ch).astype(np.int32), quant=(sx * sw, 0))
    y = b.tensor(name, [*shape[:3], out_ch], "int8", quant=q_out)
    b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME", "fused_activation_function": "NONE"})
    return y


@pytest.mark.parametrize("dtype, q", [("int8", (0.05, -9)), ("uint8", (0.03, 131))])
def test_quantized_max_pool_is_exact_and_runs_in_float(tmp_path, dtype, q):
    """Every stored integer pooled as LiteRT pools it (0 steps), by default and with --exact-int; no integer
    MaxPool is left, in our graph or in the one ONNX Runtime runs."""
    shape = [1, 11, 14, 5]
    b = ModelBuilder()
    x = b.input("x", shape, dtype, quant=q)
    p, _ = pool(b, x, shape, dtype, q)
    b.output(p)
    graph = save(b, tmp_path)
    info = np.iinfo(dtype)
    xs = [RNG.integers(info.min, info.max + 1, shape).astype(dtype) for _ in range(3)]
    for result in (convert(graph), convert(graph, exact_int=True)):
        producers = {o: n.op_type for n in result.model.graph.node for o in n.output}
        assert [producers[n.input[0]] for n in nodes(result, "MaxPool")] == ["Cast"]
        for x in xs:
            (ref,), (got,) = litert_and_onnx(graph, result, [x])
            assert got.dtype == ref.dtype
            np.testing.assert_array_equal(got, ref)
        assert "MaxPool" in ort_optimised(result, tmp_path)


@pytest.mark.parametrize("act, then_conv", [("RELU", True), ("RELU6", False), ("RELU_N1_TO_1", False)])
def test_quantized_max_pool_clamps_its_fused_activation_at_the_zero_point(tmp_path, act, then_conv):
    """A fused activation on a quantized pool is LiteRT's clamp on the integers at the output's zero point and
    scale (a Relu on the stored integers, zero point -9, was up to 5 steps off; RELU6 was refused): 0 steps, by
    default and with --exact-int, also when a convolution reads the pool."""
    shape, q = [1, 11, 14, 5], (0.05, -9)
    b = ModelBuilder()
    x = b.input("x", shape, "int8", quant=q)
    p, pshape = pool(b, x, shape, "int8", q, act=act)
    b.output(conv(b, p, pshape, q[0], 4, (0.3, 3)) if then_conv else p)
    graph = save(b, tmp_path)
    for result in (convert(graph), convert(graph, exact_int=True)):
        for _ in range(3):
            (ref,), (got,) = litert_and_onnx(graph, result, [RNG.integers(-128, 128, shape).astype(np.int8)])
            diff = np.abs(got.astype(np.int32) - ref)
            assert diff.max() <= (1 if then_conv else 0) and (diff == 0).mean() > 0.95


def test_convolution_after_a_quantized_max_pool_stays_fused(tmp_path):
    """MAX_POOL_2D then two CONV_2D (int8): the pool's integers come back through QuantizeLinear with the tensor's
    own scale, so ONNX Runtime sees a Q->DQ pair before the convolution and fuses it into QLinearConv (an int8
    pool read straight by DequantizeLinear left the convolution in float). Within 1 step of LiteRT (the
    single rounding of a QDQ convolution, tests/test_quant_seeds.py)."""
    shape, q = [1, 11, 14, 5], (0.05, -9)
    b = ModelBuilder()
    x = b.input("x", shape, "int8", quant=q)
    p, pshape = pool(b, x, shape, "int8", q)
    c = conv(b, p, pshape, q[0], 4, (0.3, 3))
    y = conv(b, c, [*pshape[:3], 4], 0.3, 3, (0.5, -1), k=1, name="y")
    b.output(y)
    graph = save(b, tmp_path)
    result = convert(graph)
    # (the second convolution stays float: ONNX Runtime rewrites to uint8 only Q->DQ pairs, not a graph output)
    assert ort_optimised(result, tmp_path).count("QLinearConv") == 1
    for _ in range(3):
        (ref,), (got,) = litert_and_onnx(graph, result, [RNG.integers(-128, 128, shape).astype(np.int8)])
        diff = np.abs(got.astype(np.int32) - ref)
        assert diff.max() <= 1 and (diff == 0).mean() > 0.95


def channel_softmax(tmp_path, dtype: str, beta: float, scale_in: float = 0.1, before: str = "MAX_POOL_2D"):
    """x [1, 7, 10, 3] -> CONV_2D or MAX_POOL_2D (channels-first in ONNX) -> SOFTMAX over the channels. int8: the
    pool alone (exact) leaves the softmax the only source of error against LiteRT."""
    shape = [1, 7, 10, 3]
    b = ModelBuilder()
    if dtype == "float32":
        x = b.input("x", shape, "float32")
        w = b.const("w", RNG.uniform(-2, 2, (6, 3, 3, 3)).astype(np.float32))
        bias = b.const("b", RNG.uniform(-1, 1, 6).astype(np.float32))
        c = b.tensor("c", [1, 7, 10, 6], "float32")
        b.op("CONV_2D", [x, w, bias], [c], {"padding": "SAME", "fused_activation_function": "NONE"})
        y = b.tensor("y", [1, 7, 10, 6], "float32")
    elif before == "CONV_2D":
        x = b.input("x", shape, "int8", quant=(0.05, 2))       # (a convolution reading an int8 graph input
        p, _ = pool(b, x, shape, "int8", (0.05, 2), kernel=(2, 2), stride=(1, 1))   # never fuses)
        c = conv(b, p, shape, 0.05, 6, (scale_in, -4))
        y = b.tensor("y", [1, 7, 10, 6], "int8", quant=(1 / 256, -128))
    else:
        x = b.input("x", shape, "int8", quant=(scale_in, -4))
        c, _ = pool(b, x, shape, "int8", (scale_in, -4), kernel=(2, 2), stride=(1, 1))
        y = b.tensor("y", shape, "int8", quant=(1 / 256, -128))
    b.op("SOFTMAX", [c], [y], {"beta": beta})
    b.output(y)
    return save(b, tmp_path)


@pytest.mark.parametrize("beta", [1.0, 0.7])
def test_float_channel_softmax_is_spelled_out(tmp_path, beta):
    graph = channel_softmax(tmp_path, "float32", beta)
    result = convert(graph)
    assert not nodes(result, "Softmax") and nodes(result, "ReduceMax")
    for _ in range(3):
        (ref,), (got,) = litert_and_onnx(graph, result, [RNG.uniform(-3, 3, (1, 7, 10, 3)).astype(np.float32)])
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("scale_in, beta, shift", [
    (0.1, 1.0, "constant"),     # the input's whole range (25.5) is within 80: exp(x - top of the range)
    (0.12, 0.6, "constant"),
    (0.5, 1.0, "row max"),      # a range of 127.5 could underflow exp: the row maximum
])
def test_int8_channel_softmax_matches_litert(tmp_path, scale_in, beta, shift):
    """Within 1 step of LiteRT and equal on nearly all elements, as the fused form was."""
    graph = channel_softmax(tmp_path, "int8", beta, scale_in)
    result = convert(graph)
    assert not nodes(result, "Softmax")
    assert bool(nodes(result, "ReduceMax")) == (shift == "row max")
    for _ in range(3):
        (ref,), (got,) = litert_and_onnx(graph, result, [RNG.integers(-128, 128, (1, 7, 10, 3)).astype(np.int8)])
        diff = np.abs(got.astype(np.int32) - ref)
        assert diff.max() <= 1 and (diff == 0).mean() > 0.97


def test_convolution_before_a_channel_softmax_stays_fused(tmp_path):
    """With the constant shift the softmax's DequantizeLinear has one consumer, so ONNX Runtime still rewrites
    the Q->DQ pair after the convolution and fuses it (QLinearConv); a row maximum read it twice."""
    result = convert(channel_softmax(tmp_path, "int8", 1.0, 0.1, before="CONV_2D"))
    assert not nodes(result, "ReduceMax")
    assert "QLinearConv" in ort_optimised(result, tmp_path)


def test_concatenation_read_by_a_convolution_is_handed_back_through_quantize(tmp_path):
    """Two int8 pools -> CONCATENATION (one scale: it joins the stored integers) -> CONV_2D -> CONV_2D. The
    joined integers reach the first convolution through QuantizeLinear, which ONNX Runtime needs to fuse it
    (QLinearConv); the pools, read by the concatenation, come back by a Cast. The joined tensor equals LiteRT's
    (0 steps, read unoptimised)."""
    from inspector.core.proof.validate import run_onnx, run_tflite
    shape, q = [1, 9, 12, 4], (0.04, 6)
    b = ModelBuilder()
    x = b.input("x", shape, "int8", quant=q)
    a, _ = pool(b, x, shape, "int8", q, kernel=(2, 2), stride=(1, 1))
    p3 = b.tensor("p3", shape, "int8", quant=q)
    b.op("MAX_POOL_2D", [x], [p3], {"padding": "SAME", "filter_height": 3, "filter_width": 3, "stride_h": 1,
                                    "stride_w": 1})
    cat = b.tensor("cat", [1, 9, 12, 8], "int8", quant=q)
    b.op("CONCATENATION", [a, p3], [cat], {"axis": 3, "fused_activation_function": "NONE"})
    c = conv(b, cat, [1, 9, 12, 8], q[0], 5, (0.4, -2))
    y = conv(b, c, [1, 9, 12, 5], 0.4, 3, (0.6, 1), k=1, name="y")
    b.output(y)
    graph = save(b, tmp_path)
    result = convert(graph)
    producers = {o: n.op_type for n in result.model.graph.node for o in n.output}
    assert producers["cat"] == "QuantizeLinear" and producers["p"] == producers["p3"] == "Cast"
    assert ort_optimised(result, tmp_path).count("QLinearConv") == 1
    xs = RNG.integers(-128, 128, shape).astype(np.int8)
    ref = run_tflite(graph, [xs])
    feeds = {result.trace.tensor_values[graph.main.inputs[0]][0]: np.transpose(xs, result.plan.perm(0, 4))}
    got = run_onnx(result.model, feeds, extra=["cat"])["cat"]
    t = next(i for i, ten in enumerate(graph.main.tensors) if ten.name == "cat")
    np.testing.assert_array_equal(np.transpose(got, np.argsort(result.plan.perm(t, 4))), ref[t])
