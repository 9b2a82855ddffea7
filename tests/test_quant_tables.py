"""int8 unary ops whose LiteRT kernel is a table or a fixed-point formula (HARD_SWISH, LOGISTIC, TANH, ELU,
GELU, LEAKY_RELU) reproduce it in the default QDQ mode, as --exact-int does: computed in float, HARD_SWISH lands
up to 3 steps off per op and a network of them drifts by tens of steps. The table is a Gather on the integers, so
the convolutions around it still fuse."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.proof.validate import validate

from .test_quant import bias_for, nodes, per_channel, save
from .test_quant_seeds import every_int8, litert_and_onnx

RNG = np.random.default_rng(17)
SHAPE = [1, 3, 5, 7]            # below TWIN_MIN elements: small maps always take the table


@pytest.mark.parametrize("opcode, qin, qout, options, version", [
    ("HARD_SWISH", (0.05, 3), (0.04, -40), {}, 1),
    ("HARD_SWISH", (0.11, -20), (0.06, -90), {}, 1),
    ("LOGISTIC", (0.02, 1), (1 / 256, -128), {}, 1),
    ("TANH", (0.05, -3), (1 / 128, 0), {}, 1),
    ("EXP", (0.02, 60), (0.05, -120), {}, 1),
    ("GELU", (0.03, -5), (0.02, -100), {"approximate": True}, 1),
    ("LEAKY_RELU", (0.05, 7), (0.04, 2), {"alpha": 0.2}, 1),
])
def test_table_ops_match_litert_in_the_default_mode(tmp_path, opcode, qin, qout, options, version):
    """Fed every int8 value, the default conversion equals LiteRT's kernel and --exact-int's conversion."""
    b = ModelBuilder()
    x = b.input("x", SHAPE, "int8", quant=qin)
    y = b.tensor("y", SHAPE, "int8", quant=qout)
    b.op(opcode, [x], [y], options, version=version)
    b.output(y)
    graph = save(b, tmp_path)
    xs = [every_int8(SHAPE)]
    (ref,), (got,) = litert_and_onnx(graph, convert(graph), xs)
    (_,), (exact,) = litert_and_onnx(graph, convert(graph, exact_int=True), xs)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(exact, ref)


def hard_swish_net(tmp_path, depth: int = 6):
    """An OCR-classifier-like stack: (1x1 CONV_2D -> HARD_SWISH) x depth on a small non-square int8 map."""
    b = ModelBuilder()
    c, scale = 12, (0.05, 3)
    prev = b.input("x", [1, 5, 9, c], "int8", quant=scale)
    for k in range(depth):
        wq, wquant = per_channel(RNG.uniform(-1, 1, (c, 1, 1, c)) / 4, axis=0)     # gain ~1: errors do not grow
        bq, bquant = bias_for(RNG.uniform(-0.3, 0.3, c), scale[0], wquant["scales"])
        conv = b.tensor(f"conv{k}", [1, 5, 9, c], "int8", quant=(0.05, 3))     # 16 float misses: a table
        b.op("CONV_2D", [prev, b.const(f"w{k}", wq, quant=wquant), b.const(f"b{k}", bq, quant=bquant)], [conv],
             {"padding": "SAME"})
        scale = (0.04, -40)
        prev = b.tensor(f"hs{k}", [1, 5, 9, c], "int8", quant=scale)
        b.op("HARD_SWISH", [conv], [prev], {})
    b.output(prev)
    return save(b, tmp_path)


def test_hard_swish_network_stays_fusable_and_close(tmp_path):
    """Every HARD_SWISH is a Gather between the convolutions' QuantizeLinear and the next DequantizeLinear, so
    ONNX Runtime still fuses the convolutions that do not read the graph input; the output is no further from
    LiteRT than the convolutions' single rounding makes it (1 step here), and every HARD_SWISH adds nothing."""
    graph = hard_swish_net(tmp_path)
    result = convert(graph)
    assert len(nodes(result, "Gather")) == 6 and not nodes(result, "HardSwish")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(result.model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    fused = sum(n.op_type == "QLinearConv" for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node)
    assert fused >= 5, fused
    v = validate(result)
    steps = {e.name: e.steps for e in v.intermediates + v.outputs}
    assert v.ok and max(steps.values()) <= 1, steps
    assert all(steps[f"hs{k}"] <= steps[f"conv{k}"] for k in range(6)), steps


@pytest.mark.parametrize("qin, qout, exact", [
    ((0.05, 3), (0.04, -40), True),
    ((0.17822713, 22), (0.07477638, -123), True),      # MobileNetV3Small int8 HARD_SWISH#29: 2 misses
    # MobileNetV3Small int8's 7th HARD_SWISH: LiteRT's table is no float form moved by one constant
    ((0.41939002, -27), (0.25471717, -127), False),
])
def test_large_maps_keep_the_float_form(tmp_path, qin, qout, exact):
    """On a feature map of TWIN_MIN elements or more, a HARD_SWISH whose float form misses LiteRT's table by one
    step on a few values stays float in the default mode (fused by ONNX Runtime, no Gather), moved by a constant
    of a hundredth of a step or so before QuantizeLinear where that makes it equal LiteRT's table on all 256
    inputs; else one step off on a few values. --exact-int patches it. Both against LiteRT on every int8 value."""
    shape = [1, 16, 12, 9]
    b = ModelBuilder()
    x = b.input("x", shape, "int8", quant=qin)
    y = b.tensor("y", shape, "int8", quant=qout)
    b.op("HARD_SWISH", [x], [y], {})
    b.output(y)
    graph = save(b, tmp_path)
    default, exact_int = convert(graph), convert(graph, exact_int=True)
    assert nodes(default, "HardSwish") and not nodes(default, "Gather")
    assert len(nodes(default, "Add")) == exact
    xs = [every_int8(shape)]
    (ref,), (got,) = litert_and_onnx(graph, default, xs)
    (_,), (bits,) = litert_and_onnx(graph, exact_int, xs)
    d = np.abs(got.astype(int) - ref)
    assert d.max() == (0 if exact else 1) and d.mean() < 0.01, (d.max(), d.mean())
    np.testing.assert_array_equal(bits, ref)


def test_litert_tables_are_shared_within_a_conversion_and_not_kept_after_it(tmp_path, monkeypatch):
    """Six HARD_SWISH ops with the same parameters ask LiteRT for their table once per conversion; the next
    conversion asks again (a table kept by the process made repeated conversions cheaper than a user's first)."""
    from inspector.core.emit.ops import quant_tables
    calls = []
    real = quant_tables._litert_table
    monkeypatch.setattr(quant_tables, "_litert_table", lambda *a: calls.append(a[0].opcode) or real(*a))
    graph = hard_swish_net(tmp_path)
    first = convert(graph)
    assert calls == ["HARD_SWISH"]
    second = convert(graph)
    assert calls == ["HARD_SWISH"] * 2
    assert first.model.SerializeToString() == second.model.SerializeToString()
