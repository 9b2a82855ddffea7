"""The default form of one-row dynamic-range ops: LiteRT's int8 input quantization by DynamicQuantizeLinear (or a
symmetric QuantizeLinear), dequantized, then a float Conv / MatMul on the weights dequantized once. The quantized
inputs are LiteRT's except on rounding ties; the sums are float sums in ONNX Runtime's order, so a hybrid op
agrees with LiteRT to float rounding, and a deep model stays within the spread of LiteRT's own kernels."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from ai_edge_litert.interpreter import OpResolverType

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_reader import read_tflite, read_tflite_bytes
from inspector.core.proof.validate import make_inputs, run_tflite, validate

from .test_hybrid import CONVS, assert_bit_exact, conv_model, fc_model, identity_fc, rows

F32 = np.float32
ONE_ROW = [c for c in CONVS if "batch2" not in c]


def types(result) -> list[str]:
    return [n.op_type for n in result.model.graph.node]


def error(model: bytes, result, seeds=(0, 1), zeros: bool = False) -> float:
    """Worst max |ours - LiteRT| / max |LiteRT| over seeded non-square inputs (ONNX Runtime optimised); `zeros`:
    on an all-zero input instead."""
    graph = read_tflite_bytes(model, "m.tflite")
    t = graph.main.inputs[0]
    perm = result.plan.perm(t, len(graph.main.tensors[t].shape))
    out_t = graph.main.outputs[0]
    sess = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    worst = 0.0
    for seed in seeds:
        shape = graph.main.tensors[t].shape
        x = np.zeros(shape, F32) if zeros else rows(np.random.default_rng(seed), shape)
        ref = next(iter(run_tflite(graph, [x], model_bytes=model, keep_all=False).values()))
        out_perm = result.plan.outputs.get(out_t, result.plan.perm(out_t, ref.ndim))
        got = sess.run(None, {sess.get_inputs()[0].name: np.ascontiguousarray(np.transpose(x, perm))})[0]
        got = np.transpose(got, np.argsort(out_perm))
        worst = max(worst, float(np.abs(got - ref).max() / np.abs(ref).max()))
    return worst


@pytest.mark.parametrize("case", ONE_ROW)
def test_one_row_conv_agrees_with_litert_to_float_rounding(case):
    """Non-square convolutions (per channel, per tensor, depthwise with multiplier, ReLU'd inputs): one op,
    so only the float sums differ: within 2e-6 of the output's scale."""
    kw = CONVS[case]
    model = conv_model(np.random.default_rng(7), **kw)
    result = convert(read_tflite_bytes(model, "conv.tflite"))
    ops = types(result)
    asym = not kw.get("per_tensor")
    assert ops.count("DynamicQuantizeLinear") == asym and ops.count("QuantizeLinear") == (not asym)
    assert ops.count("DequantizeLinear") == 1 and ops.count("Cast") == 1      # the weights' (the exact form: 4+)
    assert error(model, result) < 2e-6


@pytest.mark.parametrize("asym", [True, False], ids=["asymmetric", "symmetric"])
@pytest.mark.parametrize("per_tensor", [False, True], ids=["per_channel", "per_tensor"])
def test_one_row_fully_connected_agrees_with_litert(asym, per_tensor):
    model, _ = fc_model(np.random.default_rng(9), 1, 45, 11, asym=asym, per_tensor=per_tensor, act="RELU")
    result = convert(read_tflite_bytes(model, "fc.tflite"))
    assert "MatMul" in types(result) and types(result).count("Cast") == 1
    assert error(model, result, seeds=(0, 1, 2)) < 2e-6


@pytest.mark.parametrize("asym", [True, False], ids=["asymmetric", "symmetric"])
def test_quantized_inputs_are_litert_s(asym):
    """Identity weights (channel scales 1 and 1/2) show each quantized input: 103 values of random rows (7 past
    the last whole 8, which LiteRT rounds one at a time) give LiteRT's integers, dequantized to float rounding.
    One integer off would be a step of 1/127 to 1/255 of the row's range."""
    model = identity_fc(103, asym)
    assert error(model, convert(read_tflite_bytes(model, "identity.tflite")), seeds=range(6)) < 1e-6


def test_all_zero_input_gives_the_bias():
    """LiteRT's scale 1 and zero point 0 for an all-zero row; ONNX Runtime's DynamicQuantizeLinear also takes scale
    1 there (no 0/0), and the symmetric form replaces a zero range by 1."""
    for case in ("conv_per_channel", "conv_per_tensor"):
        model = conv_model(np.random.default_rng(2), **CONVS[case])
        assert error(model, convert(read_tflite_bytes(model, "zero.tflite")), seeds=(0,), zeros=True) == 0


def test_several_rows_and_exact_int_keep_the_bit_exact_form():
    rng = np.random.default_rng(1)
    kw = CONVS["conv_batch2"]
    model = conv_model(rng, **kw)
    assert "DynamicQuantizeLinear" not in types(assert_bit_exact(model, rows(rng, kw["shape"]), exact_int=False))
    one = conv_model(rng, **CONVS["conv_per_channel"])
    assert "DynamicQuantizeLinear" not in types(assert_bit_exact(one, rows(rng, CONVS["conv_per_channel"]["shape"])))


def test_float_convolutions_upstream_of_one_row_ops_stay_plain_conv():
    """The reference-order sums upstream (test_hybrid.py) only matter for the bit-exact form: here one Conv each."""
    from .test_hybrid import ModelBuilder, int8_weights
    rng = np.random.default_rng(4)
    b = ModelBuilder()
    x = b.input("x", [1, 13, 11, 3], "float32")
    a = b.tensor("a", [1, 7, 6, 8])
    b.op("CONV_2D", [x, b.const("w0", rng.uniform(-1, 1, (8, 3, 3, 3)).astype(F32)),
                     b.const("b0", rng.uniform(-1, 1, 8).astype(F32))], [a],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2, "fused_activation_function": "RELU6"})
    wq, quant = int8_weights(rng, (5, 3, 3, 8), 0)
    y = b.tensor("y", [1, 7, 6, 5])
    b.op("CONV_2D", [a, b.const("w1", wq, quant=quant), b.const("b1", np.zeros(5, F32))], [y], {"padding": "SAME"})
    b.output(y)
    model = b.build()
    result = convert(read_tflite_bytes(model, "up.tflite"))
    assert types(result).count("Conv") == 2 and "Split" not in types(result)
    assert error(model, result, seeds=(0, 1, 2)) < 1e-5
    assert types(convert(read_tflite_bytes(model, "up.tflite"), exact_int=True)).count("Conv") > 2


@pytest.mark.corpus
@pytest.mark.parametrize("model", ["keras/mobilenetv2_dynamic.tflite",
                                   "onnx2tf/mobilenet_v2_w075_dynamic_range_quant.tflite"])
def test_deep_models_stay_within_litert_s_own_kernel_spread(corpus, model):
    """Deep random-input models amplify each rounding tie: the default form lands 0.05-0.09 of the output's scale
    from LiteRT's reference kernels (seeds 0-4), where LiteRT's XNNPACK kernels land 0.14-0.32 away and its
    optimized builtins up to 0.09 (tf2onnx's float weights: 0.12-0.23)."""
    graph = read_tflite(corpus / model)
    result = convert(graph)
    assert "DynamicQuantizeLinear" in types(result)
    for seed in (0, 1):
        ours = validate(result, seed=seed, intermediates=False)
        inputs = make_inputs(graph, seed)
        ref = next(iter(run_tflite(graph, inputs, keep_all=False).values()))
        xnn = next(iter(run_tflite(graph, inputs, keep_all=False, resolver=OpResolverType.AUTO).values()))
        spread = float(np.abs(xnn - ref).max() / np.abs(ref).max())
        assert ours.ok and ours.outputs[0].max_rel < 0.1 and ours.outputs[0].max_rel < spread, \
            (ours.outputs[0].max_rel, spread)
