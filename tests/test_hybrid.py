"""Dynamic-range (hybrid) ops: float activations, int8 weights. LiteRT quantizes the float input per batch row on
the fly and runs integer arithmetic; with --exact-int (and by default for inputs of several rows) the converted model
must give LiteRT's float output bit for bit, with ONNX Runtime's graph optimisations on and off (tolerance 0: every
difference would be a different rounding). The default one-row form: tests/test_hybrid_requantized.py."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from inspector.core.emit.convert import convert
from inspector.core.emit.ops.hybrid import HALF_EXACT, LANES, nonnegative
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite, read_tflite_bytes
from inspector.core.proof.validate import run_tflite, validate

F32 = np.float32
LEVELS = {"optimised": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
          "unoptimised": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}


def int8_weights(rng, shape, axis: int | None):
    """Symmetric int8 weights as TFLite's dynamic-range quantizer stores them (per channel on `axis`)."""
    w = rng.uniform(-1, 1, shape)
    if axis is None:
        scales = np.array([np.abs(w).max() / 127], F32)
        q = np.round(w / scales[0])
        quant = {"scales": scales, "zero_points": np.zeros(1, np.int64)}
    else:
        other = tuple(i for i in range(w.ndim) if i != axis)
        scales = (np.abs(w).max(axis=other) / 127).astype(F32)
        q = np.round(w / np.expand_dims(scales, other))
        quant = {"scales": scales, "zero_points": np.zeros(scales.size, np.int64), "axis": axis}
    return np.clip(q, -127, 127).astype(np.int8), quant


def rows(rng, shape, spread=(0.2, 6.0), offset=(-2.0, 3.0)):
    """A float input whose batch rows have different ranges and centres."""
    n = shape[0]
    scale = rng.uniform(*spread, (n,) + (1,) * (len(shape) - 1))
    centre = rng.uniform(*offset, (n,) + (1,) * (len(shape) - 1))
    return (rng.standard_normal(shape) * scale + centre).astype(F32)


def assert_bit_exact(model: bytes, x: np.ndarray, exact_int: bool = True):
    graph = read_tflite_bytes(model, "hybrid.tflite")
    result = convert(graph, exact_int=exact_int)
    ref = next(iter(run_tflite(graph, [x], model_bytes=model, keep_all=False).values()))
    perm = result.plan.perm(graph.main.inputs[0], x.ndim)
    out_perm = result.plan.outputs.get(graph.main.outputs[0], result.plan.perm(graph.main.outputs[0], ref.ndim))
    for level, opt in LEVELS.items():
        so = ort.SessionOptions()
        so.graph_optimization_level = opt
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(result.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: np.ascontiguousarray(np.transpose(x, perm))})[0]
        got = np.transpose(got, np.argsort(out_perm))
        bad = np.count_nonzero(got != ref)
        assert bad == 0, f"{level}: {bad} of {ref.size} differ, max {np.abs(got - ref).max()}"
    return result


def conv_model(rng, shape, out_c, kernel, *, depthwise=False, per_tensor=False, relu_in=False, act="RELU6",
               stride=(1, 2), multiplier=1):
    b = ModelBuilder()
    x = b.input("x", shape, "float32")
    src = x
    if relu_in:                                 # a non-negative input takes the shorter quantization
        src = b.tensor("r", shape)
        b.op("RELU", [x], [src])
    n, h, w_, c = shape
    oh, ow = -(-h // stride[0]), -(-w_ // stride[1])
    opts = {"padding": "SAME", "stride_h": stride[0], "stride_w": stride[1], "fused_activation_function": act}
    if depthwise:
        out_c = c * multiplier
        wq, quant = int8_weights(rng, (1, kernel, kernel, out_c), 3)
        opts["depth_multiplier"] = multiplier
        opcode = "DEPTHWISE_CONV_2D"
    else:
        wq, quant = int8_weights(rng, (out_c, kernel, kernel, c), None if per_tensor else 0)
        opcode = "CONV_2D"
    y = b.tensor("y", [n, oh, ow, out_c])
    b.op(opcode, [src, b.const("w", wq, quant=quant), b.const("b", rng.uniform(-1, 1, out_c).astype(F32))], [y],
         opts)
    b.output(y)
    return b.build()


CONVS = {
    # H != W != C; 5*7*3 = 105 elements a row: LiteRT rounds the last 105 % 8 one at a time.
    "conv_per_channel": dict(shape=(1, 5, 7, 3), out_c=4, kernel=3),
    "conv_per_channel_1x1": dict(shape=(1, 6, 9, 20), out_c=12, kernel=1, stride=(1, 1), act="NONE"),
    "conv_per_tensor": dict(shape=(1, 6, 9, 5), out_c=7, kernel=3, per_tensor=True),
    "conv_relu_input": dict(shape=(1, 6, 9, 5), out_c=7, kernel=3, relu_in=True, act="RELU"),
    "conv_per_tensor_relu_input": dict(shape=(1, 5, 7, 3), out_c=4, kernel=3, per_tensor=True, relu_in=True),
    "conv_batch2": dict(shape=(2, 6, 9, 5), out_c=7, kernel=3),
    "conv_per_tensor_batch2": dict(shape=(2, 6, 9, 5), out_c=7, kernel=3, per_tensor=True),
    "depthwise": dict(shape=(1, 7, 5, 6), out_c=0, kernel=3, depthwise=True),
    "depthwise_multiplier2": dict(shape=(1, 7, 5, 3), out_c=0, kernel=3, depthwise=True, multiplier=2),
    "depthwise_relu_input": dict(shape=(1, 7, 5, 6), out_c=0, kernel=3, depthwise=True, relu_in=True),
    "depthwise_batch2": dict(shape=(2, 7, 5, 6), out_c=0, kernel=3, depthwise=True, stride=(2, 2)),
}


@pytest.mark.parametrize("case", CONVS)
@pytest.mark.parametrize("seed", [0, 1])
def test_hybrid_conv_is_bit_exact(case, seed):
    rng = np.random.default_rng(seed)
    kw = CONVS[case]
    model = conv_model(rng, **kw)
    assert_bit_exact(model, rows(rng, kw["shape"]))


def test_all_zero_row_quantizes_to_zero():
    """A row of zeros: LiteRT's scale 1 and zero point 0, so the output is the bias (no 0/0 in the scale)."""
    rng = np.random.default_rng(3)
    for kw in (CONVS["conv_batch2"], CONVS["conv_per_tensor_batch2"], CONVS["depthwise_batch2"]):
        x = rows(rng, kw["shape"])
        x[1] = 0
        model = conv_model(rng, **kw)
        assert_bit_exact(model, x)
        assert_bit_exact(model, x, exact_int=False)      # several rows: the default is the exact form too


def fc_model(rng, batch, k, units, *, asym, per_tensor=False, bias=True, act="NONE", keep_dims=None):
    b = ModelBuilder()
    shape = [batch, k] if keep_dims is None else [batch, keep_dims, k]
    x = b.input("x", shape, "float32")
    wq, quant = int8_weights(rng, (units, k), None if per_tensor else 0)
    ins = [x, b.const("w", wq, quant=quant), b.const("b", rng.uniform(-1, 1, units).astype(F32)) if bias else None]
    y = b.tensor("y", shape[:-1] + [units])
    b.op("FULLY_CONNECTED", ins, [y], {"asymmetric_quantize_inputs": asym, "fused_activation_function": act,
                                       "keep_num_dims": keep_dims is not None})
    b.output(y)
    return b.build(), shape


@pytest.mark.parametrize("asym", [True, False], ids=["asymmetric", "symmetric"])
@pytest.mark.parametrize("per_tensor", [False, True], ids=["per_channel", "per_tensor"])
def test_hybrid_fully_connected_is_bit_exact(asym, per_tensor):
    rng = np.random.default_rng(5)
    for k in (45, 64):                         # 45: a tail of 5 rounded one at a time
        model, shape = fc_model(rng, 3, k, 11, asym=asym, per_tensor=per_tensor, act="RELU")
        x = rows(rng, shape)
        x[2] = 0                                # an all-zero row among non-zero ones
        assert_bit_exact(model, x)
        assert_bit_exact(model, x, exact_int=False)      # three rows: the default is the exact form too
    model, shape = fc_model(rng, 2, 20, 6, asym=asym, per_tensor=per_tensor, bias=False, keep_dims=3)
    assert_bit_exact(model, rows(rng, shape))


def test_fully_connected_beyond_float_integers_sums_in_halves():
    """K = 700 inputs near the row maximum times weights of 127: the accumulator (22.7M) passes 2^24, where float
    sums of integers round. Each half stays below, and one Add rounds the total as LiteRT's int-to-float does."""
    k, units = 700, 3
    b = ModelBuilder()
    x = b.input("x", [2, k], "float32")
    w = np.full((units, k), 127, np.int8)
    w[1, ::3] = -127
    quant = {"scales": np.array([0.01, 0.02, 0.03], F32), "zero_points": np.zeros(units, np.int64), "axis": 0}
    y = b.tensor("y", [2, units])
    b.op("FULLY_CONNECTED", [x, b.const("w", w, quant=quant), None], [y], {"asymmetric_quantize_inputs": True})
    b.output(y)
    rng = np.random.default_rng(8)
    value = rng.uniform(0.97, 1.0, (2, k)).astype(F32)
    value[:, 0] = -0.01                        # a negative minimum: zero point -127, q - zp up to 254
    result = assert_bit_exact(b.build(), value)
    assert not result.warnings and sum(n.op_type == "MatMul" for n in result.model.graph.node) == 2


def identity_fc(k: int, asym: bool) -> bytes:
    """FULLY_CONNECTED with identity weights (channel scales 1 and 1/2): its output shows each quantized input."""
    b = ModelBuilder()
    x = b.input("x", [1, k], "float32")
    scales = np.where(np.arange(k) % 2, 0.5, 1.0).astype(F32)
    w = b.const("w", np.eye(k, dtype=np.int8), quant={"scales": scales, "zero_points": np.zeros(k, np.int64),
                                                     "axis": 0})
    y = b.tensor("y", [1, k])
    b.op("FULLY_CONNECTED", [x, w, None], [y], {"asymmetric_quantize_inputs": asym})
    b.output(y)
    return b.build()


@pytest.mark.parametrize("asym", [True, False], ids=["asymmetric", "symmetric"])
def test_rounding_ties_and_near_ties(asym):
    """Inputs planted on x * inv == k + 1/2 and on the float just below 1/2: LiteRT's vector loop adds +-0.5 in
    float and truncates (0.49999997 rounds to 1), its scalar tail rounds half away from zero exactly."""
    k = 8 * 12 + 7                              # 96 values in the vector loop, 7 in the tail
    rng = np.random.default_rng(11)
    lo, hi = F32(-2.3), F32(3.1)
    x = rng.uniform(lo, hi, k).astype(F32)
    x[0], x[1] = lo, hi
    if asym:
        scale = F32(float(hi - lo) / 255.0)
    else:
        scale = max(abs(lo), abs(hi)) / F32(127)
    inv = F32(1.0 / float(scale)) if asym else F32(127) / max(abs(lo), abs(hi))
    planted = 0
    for i in range(2, k):
        target = F32(rng.integers(-60, 60) + 0.5) if i % 3 else F32(np.sign(i % 2 - 0.5) * (0.5 - 2.0 ** -25))
        cand = F32(target / inv)
        for c in (cand, np.nextafter(cand, F32(np.inf)), np.nextafter(cand, F32(-np.inf))):
            if F32(c * inv) == target and lo < c < hi:
                x[i] = c
                planted += 1
                break
    assert planted > k // 2
    assert HALF_EXACT == F32(0.5) - F32(2.0 ** -25) and k % LANES == 7
    assert_bit_exact(identity_fc(k, asym), x[None])


def test_nonnegative_inputs_are_found_through_padding():
    rng = np.random.default_rng(2)
    b = ModelBuilder()
    x = b.input("x", [1, 6, 9, 4], "float32")
    r = b.tensor("r", [1, 6, 9, 4])
    b.op("RELU6", [x], [r])
    p = b.tensor("p", [1, 7, 10, 4])
    b.op("PAD", [r, b.const("pads", np.array([[0, 0], [0, 1], [0, 1], [0, 0]], np.int32))], [p])
    wq, quant = int8_weights(rng, (1, 3, 3, 4), 3)
    y = b.tensor("y", [1, 3, 4, 4])
    b.op("DEPTHWISE_CONV_2D", [p, b.const("w", wq, quant=quant), b.const("b", np.zeros(4, F32))], [y],
         {"padding": "VALID", "stride_h": 2, "stride_w": 2, "depth_multiplier": 1})
    b.output(y)
    model = b.build()
    graph = read_tflite_bytes(model, "pad.tflite")
    assert nonnegative(graph.main, p) and not nonnegative(graph.main, x)
    result = assert_bit_exact(model, rows(rng, (1, 6, 9, 4)))
    assert not any(n.op_type == "ReduceMin" for n in result.model.graph.node)      # no min of a ReLU6 output


def test_concatenation_with_a_negative_constant_is_not_nonnegative():
    """A ReLU output concatenated with a negative constant: the row's min must be taken (else the clamp is lost)."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3], "float32")
    r = b.tensor("r", [1, 5, 7, 3])
    b.op("RELU", [x], [r])
    c = b.tensor("c", [1, 5, 7, 5])
    neg = b.const("neg", -rng.uniform(0.5, 2.0, (1, 5, 7, 2)).astype(F32))
    b.op("CONCATENATION", [r, neg], [c], {"axis": 3})
    wq, quant = int8_weights(rng, (4, 1, 1, 5), 0)
    y = b.tensor("y", [1, 5, 7, 4])
    b.op("CONV_2D", [c, b.const("w", wq, quant=quant), b.const("b", np.zeros(4, F32))], [y],
         {"padding": "VALID", "stride_h": 1, "stride_w": 1})
    b.output(y)
    model = b.build()
    graph = read_tflite_bytes(model, "concat.tflite")
    assert nonnegative(graph.main, r) and not nonnegative(graph.main, c)
    assert_bit_exact(model, rows(rng, (1, 5, 7, 3)))


def test_weights_stay_int8():
    model = conv_model(np.random.default_rng(0), **CONVS["conv_per_channel_1x1"])
    for exact_int in (True, False):
        result = convert(read_tflite_bytes(model, "w.tflite"), exact_int=exact_int)
        big = [i for i in result.model.graph.initializer if np.prod(i.dims) >= 12 * 20]
        assert [(tuple(i.dims), i.data_type) for i in big] == [((12, 20, 1, 1), 3)]   # INT8, Cast once at load


def test_float_convolutions_upstream_are_summed_in_litert_order():
    """A dynamic-range model keeps small weights in float (under 1024 elements): those convolutions feed hybrid
    ops, whose row quantization would turn a 1-ulp difference into a whole step, so they are summed as LiteRT's
    reference kernels sum them (stride 2 and 1, depthwise with multiplier 2, 1x1)."""
    rng = np.random.default_rng(4)
    b = ModelBuilder()
    x = b.input("x", [1, 13, 11, 3], "float32")
    f32c = lambda name, shape: b.const(name, rng.uniform(-1, 1, shape).astype(F32))   # noqa: E731
    a = b.tensor("a", [1, 7, 6, 8])
    b.op("CONV_2D", [x, f32c("w0", (8, 3, 3, 3)), f32c("b0", 8)], [a],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2, "fused_activation_function": "RELU6"})
    d = b.tensor("d", [1, 7, 6, 16])
    b.op("DEPTHWISE_CONV_2D", [a, f32c("w1", (1, 3, 3, 16)), f32c("b1", 16)], [d],
         {"padding": "SAME", "depth_multiplier": 2, "fused_activation_function": "RELU6"})
    p = b.tensor("p", [1, 7, 6, 5])
    b.op("CONV_2D", [d, f32c("w2", (5, 1, 1, 16)), f32c("b2", 5)], [p], {"padding": "VALID"})
    wq, quant = int8_weights(rng, (24, 3, 3, 5), 0)
    y = b.tensor("y", [1, 7, 6, 24])
    b.op("CONV_2D", [p, b.const("w3", wq, quant=quant), f32c("b3", 24)], [y], {"padding": "SAME"})
    b.output(y)
    model = b.build()
    for seed in range(3):
        assert_bit_exact(model, rows(np.random.default_rng(seed), (1, 13, 11, 3)))


@pytest.mark.corpus
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mobilenetv2_dynamic_matches_litert(corpus, seed):
    """Every tensor up to the softmax equals LiteRT's (ONNX Runtime unoptimised, op by op); the output is within
    the softmax's own rounding, optimised too."""
    result = convert(read_tflite(corpus / "keras/mobilenetv2_dynamic.tflite"), exact_int=True)
    v = validate(result, seed=seed)
    assert v.ok and v.outputs[0].max_rel <= 1e-3, (v.outputs[0].max_rel, v.first_bad())
    assert [(e.op, e.max_abs) for e in v.intermediates if e.max_abs] == []
    fused = validate(result, seed=seed, intermediates=False)
    assert fused.ok and fused.outputs[0].max_rel < 1e-6
