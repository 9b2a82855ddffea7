"""Where the default QDQ conversion's quantization error comes from, and the exact_int kernels that remove it,
checked against LiteRT's reference kernels: a QDQ convolution differs from TFLite only where TFLite's two
roundings differ from QuantizeLinear's one; exact_int's float64 requantization and its float forms of table ops
match LiteRT on every input value; corpus models stay bit-exact beyond the seeds the conformance tests use."""
from __future__ import annotations

import math

import numpy as np
import pytest

from inspector.core.emit.convert import convert
from inspector.core.emit.ops.quant_tables import PATCH_MAX
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite
from inspector.core.proof.validate import run_onnx, run_tflite, validate

from .test_quant import bias_for, nodes, per_channel, save

RNG = np.random.default_rng(11)


def litert_and_onnx(graph, result, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Both runtimes' outputs on the given inputs (TFLite layout), ONNX's transposed back to TFLite's layout."""
    sg = graph.main
    ref = run_tflite(graph, inputs, keep_all=False)
    feeds = {result.trace.tensor_values[t][0]: np.transpose(x, result.plan.perm(t, x.ndim))
             for t, x in zip(sg.inputs, inputs)}
    got = run_onnx(result.model, feeds)
    outs = []
    for t in sg.outputs:
        y = got[sg.tensors[t].name]
        outs.append(np.transpose(y, np.argsort(result.plan.outputs.get(t, result.plan.perm(t, y.ndim)))))
    return [ref[t] for t in sg.outputs], outs


def every_int8(shape) -> np.ndarray:
    """All 256 int8 values, repeated and shuffled over `shape`."""
    n = int(np.prod(shape))
    return RNG.permutation(np.resize(np.arange(-128, 128, dtype=np.int8), n)).reshape(shape)


# --- (b) the default: a QDQ convolution rounds once where TFLite rounds twice ------------------------------------
def test_qdq_conv_differs_only_where_tflite_rounds_twice(tmp_path):
    """TFLite requantizes the int32 accumulator with a 31-bit multiplier (first rounding, 2^-(r+1) of a step for
    a right shift r), then a rounding shift; QuantizeLinear rounds acc * M once. Every element the QDQ
    convolution gets wrong must lie within that first rounding of a rounding boundary: no other error source."""
    b = ModelBuilder()
    sx, zx = 0.05, -4
    x = b.input("x", [1, 41, 37, 12], "int8", quant=(sx, zx))
    wq, wquant = per_channel(RNG.uniform(-1, 1, (10, 3, 3, 12)), axis=0)
    bq, bquant = bias_for(RNG.uniform(-0.5, 0.5, 10), sx, wquant["scales"])
    so, zo = 0.11, 5
    y = b.tensor("y", [1, 39, 35, 10], "int8", quant=(so, zo))
    b.op("CONV_2D", [x, b.const("w", wq, quant=wquant), b.const("b", bq, quant=bquant)], [y], {"padding": "VALID"})
    b.output(y)
    graph = save(b, tmp_path)
    result = convert(graph)
    assert nodes(result, "QuantizeLinear") and nodes(result, "Conv")        # QDQ: fusable into QLinearConv
    xs = RNG.integers(-128, 128, (1, 41, 37, 12)).astype(np.int8)
    (ref,), (got,) = litert_and_onnx(graph, result, [xs])
    windows = np.lib.stride_tricks.sliding_window_view(xs[0].astype(np.int64) - zx, (3, 3), axis=(0, 1))
    acc = np.einsum("hwcij,oijc->hwo", windows, wq.astype(np.int64)) + bq
    mult = sx * wquant["scales"].astype(np.float64) / so
    exact = acc * mult                                    # the real-valued result in steps, before rounding
    right = np.array([max(-math.frexp(m)[1], 0) for m in mult])
    off = got[0].astype(np.int64) != ref[0]
    assert 0 < off.mean() < 0.05 and np.abs(got[0].astype(np.int64) - ref[0]).max() == 1
    to_boundary = np.abs(exact - np.floor(exact) - 0.5)
    assert np.all(to_boundary[off] <= np.broadcast_to(2.0 ** -(right + 1), exact.shape)[off] + 1e-9)
    # exact_int: TFLite's two roundings, every element
    (ref,), (got,) = litert_and_onnx(graph, convert(graph, exact_int=True), [xs])
    np.testing.assert_array_equal(got, ref)


# --- exact_int's float64 requantization ---------------------------------------------------------------------------
@pytest.mark.parametrize("sx, zx, sz, zz, so, zo, act", [
    (0.05, 3, 0.04, -7, 0.7, 2, "NONE"),             # multiplier 2.9e-3: right shift 8
    (0.05, 3, 0.04, -7, 0.0015, -20, "NONE"),        # 1.33: left shift
    (0.001, -100, 0.002, 50, 0.0025, 0, "NONE"),     # 8e-4: right shift 10
    (0.05, 0, 0.04, 0, 0.3, -128, "RELU"),           # clamp at the zero point: negative rounding moot
])
def test_exact_mul_matches_litert_on_every_product(tmp_path, sx, zx, sz, zz, so, zo, act):
    """int8 MUL of every pair of int8 values (broadcast [256, 1] x [1, 256]): the float64 requantization equals
    TFLite's fixed-point multiply and rounding shift on all 65,536 products."""
    b = ModelBuilder()
    x = b.input("x", [1, 256, 1], "int8", quant=(sx, zx))
    z = b.input("z", [1, 1, 256], "int8", quant=(sz, zz))
    y = b.tensor("y", [1, 256, 256], "int8", quant=(so, zo))
    b.op("MUL", [x, z], [y], {"fused_activation_function": act})
    b.output(y)
    graph = save(b, tmp_path)
    result = convert(graph, exact_int=True)
    assert not nodes(result, "QuantizeLinear") and nodes(result, "Floor")
    values = np.arange(-128, 128, dtype=np.int8)
    (ref,), (got,) = litert_and_onnx(graph, result, [values.reshape(1, 256, 1), values.reshape(1, 1, 256)])
    assert len(np.unique(ref)) > 20                    # not all saturated
    np.testing.assert_array_equal(got, ref)


def test_exact_wide_accumulators_take_the_split_path(tmp_path):
    """A 1x1 convolution over 600 channels of |weight| 127 can reach |acc| ~ 2^24: x * Q then needs more than
    float64's 53 bits, so the multiplier is split (two Floors); fed the largest inputs it stays exact."""
    b = ModelBuilder()
    sx, zx = 0.02, -60
    x = b.input("x", [1, 3, 5, 600], "int8", quant=(sx, zx))
    w = np.where(RNG.random((7, 1, 1, 600)) < 0.5, -1.0, 1.0)
    w[0] = 1.0                                          # one channel sums every input with the same sign
    wq, wquant = per_channel(w, axis=0)
    bq, bquant = bias_for(RNG.uniform(-1, 1, 7), sx, wquant["scales"])
    y = b.tensor("y", [1, 3, 5, 7], "int8", quant=(600 * 0.02 * 1.5 / 127, -3))
    b.op("CONV_2D", [x, b.const("w", wq, quant=wquant), b.const("b", bq, quant=bquant)], [y], {"padding": "SAME"})
    b.output(y)
    graph = save(b, tmp_path)
    result = convert(graph, exact_int=True)
    assert len(nodes(result, "Floor")) == 2
    xs = np.where(RNG.random((1, 3, 5, 600)) < 0.8, 127, RNG.integers(-128, 128, (1, 3, 5, 600))).astype(np.int8)
    (ref,), (got,) = litert_and_onnx(graph, result, [xs])
    assert np.abs(ref.astype(np.int64) - (-3)).max() > 60       # large accumulators reached the output
    np.testing.assert_array_equal(got, ref)


# --- exact_int's float forms of table ops -----------------------------------------------------------------------
@pytest.mark.parametrize("opcode, onnx_op, qin, qout, form", [
    ("LOGISTIC", "Sigmoid", (0.004734218, 6), (1 / 256, -128), "float"),    # an EfficientNet gate's parameters
    ("LOGISTIC", "Sigmoid", (0.02, 1), (1 / 256, -128), "patched"),
    ("TANH", "Tanh", (0.05, -3), (1 / 128, 0), "patched"),
    ("HARD_SWISH", "HardSwish", (0.08, 20), (0.05, -60), "patched"),
    ("HARD_SWISH", "HardSwish", (0.05, 3), (0.04, -40), "table"),              # 16 misses: LiteRT's table
])
def test_exact_table_ops_match_litert_on_every_value(tmp_path, opcode, onnx_op, qin, qout, form):
    """A unary int8 op on a feature map runs its float form when that gives LiteRT's table on all 256 inputs but
    a few (patched with Where), else a Gather of the table; either way every value is LiteRT's."""
    b = ModelBuilder()
    shape = [1, 8, 16, 24]
    x = b.input("x", shape, "int8", quant=qin)
    y = b.tensor("y", shape, "int8", quant=qout)
    b.op(opcode, [x], [y], {})
    b.output(y)
    graph = save(b, tmp_path)
    result = convert(graph, exact_int=True)
    patches = len(nodes(result, "Where"))
    if form == "table":
        assert nodes(result, "Gather") and not nodes(result, onnx_op)
    else:
        assert nodes(result, onnx_op) and not nodes(result, "Gather")
        assert (patches == 0) == (form == "float") and patches <= PATCH_MAX
    (ref,), (got,) = litert_and_onnx(graph, result, [every_int8(shape)])
    np.testing.assert_array_equal(got, ref)


# --- corpus: bit-exact beyond the conformance seeds ---------------------------------------------------------------
@pytest.mark.corpus
@pytest.mark.parametrize("rel", ["keras/efficientnetb0_int8.tflite", "keras/mobilenetv2_int8.tflite",
                                 "keras/mobilenetv3small_int8.tflite", "ops/mobilenet_v1_0.25_128_quant.tflite"])
def test_exact_int_every_tensor_on_more_seeds(corpus, rel):
    """Every intermediate tensor, not just the outputs, equals LiteRT's at seeds 3 and 4."""
    result = convert(read_tflite(corpus / rel), exact_int=True)
    for seed in (3, 4):
        v = validate(result, seed=seed)
        steps = {e.name: e.steps for e in v.outputs + v.intermediates if e.steps is not None}
        assert len(steps) > 20 and not any(steps.values()), {k: s for k, s in steps.items() if s}
