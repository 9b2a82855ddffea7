"""`--dynamic-as-float`: dynamic-range (hybrid) ops as float ops on their weights dequantized once. The int8 weights
stay in the file; ONNX Runtime folds their Cast and scale when it loads the model, and the result is LiteRT's float
kernels on those dequantized weights (the same model with float weights, run by LiteRT), not LiteRT's on-the-fly
activation quantization."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from inspector.cli import main
from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.io.tflite_reader import read_tflite_bytes
from inspector.core.proof.validate import run_tflite

from .test_hybrid import int8_weights, rows

F32 = np.float32
QUANTIZING = {"ReduceMax", "ReduceMin", "Where", "Div", "Floor", "Sign"}   # the exact form's row quantization


def model(rng, *, float_weights: bool):
    """conv (per channel) -> depthwise (multiplier 2, per channel) -> fully connected (per tensor, keeping the 4-D shape):
    int8 weights, or the same weights dequantized to float (LiteRT's float kernels then)."""
    b = ModelBuilder()
    x = b.input("x", [1, 7, 5, 3], "float32")

    def weights(name, shape, axis):
        q, quant = int8_weights(rng, shape, axis)
        if not float_weights:
            return b.const(name, q, quant=quant)
        scales = quant["scales"].reshape([-1 if i == axis else 1 for i in range(len(shape))] if axis is not None
                                         else [])
        return b.const(name, (q.astype(F32) * scales).astype(F32))

    bias = lambda name, n: b.const(name, rng.uniform(-1, 1, n).astype(F32))   # noqa: E731
    c = b.tensor("c", [1, 4, 3, 4])
    b.op("CONV_2D", [x, weights("w0", (4, 3, 3, 3), 0), bias("b0", 4)], [c],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2, "fused_activation_function": "RELU6"})
    d = b.tensor("d", [1, 4, 3, 8])
    b.op("DEPTHWISE_CONV_2D", [c, weights("w1", (1, 3, 3, 8), 3), bias("b1", 8)], [d],
         {"padding": "SAME", "depth_multiplier": 2})
    y = b.tensor("y", [1, 4, 3, 6])
    b.op("FULLY_CONNECTED", [d, weights("w2", (6, 8), None), bias("b2", 6)], [y], {"keep_num_dims": True})
    b.output(y)
    return b.build()


def ort_run(result, x):
    """The model's output in TFLite's layout."""
    sess = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    sg = result.graph.main
    perm = result.plan.perm(sg.inputs[0], x.ndim)
    got = sess.run(None, {sess.get_inputs()[0].name: np.ascontiguousarray(np.transpose(x, perm))})[0]
    out_perm = result.plan.outputs.get(sg.outputs[0], result.plan.perm(sg.outputs[0], got.ndim))
    return np.transpose(got, np.argsort(out_perm))


@pytest.mark.parametrize("seed", [0, 1])
def test_dynamic_as_float_is_litert_on_the_dequantized_weights(seed):
    hybrid = model(np.random.default_rng(seed), float_weights=False)
    dequantized = model(np.random.default_rng(seed), float_weights=True)
    x = rows(np.random.default_rng(10 + seed), (1, 7, 5, 3))
    graph = read_tflite_bytes(hybrid, "hybrid.tflite")
    fast = convert(graph, dynamic_as_float=True)
    ops = {n.op_type for n in fast.model.graph.node}
    assert not ops & QUANTIZING and {"Conv", "MatMul", "Cast"} <= ops
    # the file keeps the int8 weights: every weight initializer is INT8, as in the TFLite file
    weights = [i for i in fast.model.graph.initializer if np.prod(i.dims) >= 48]
    assert sorted(tuple(i.dims) for i in weights) == [(4, 3, 3, 3), (8, 1, 3, 3), (8, 6)]
    assert {i.data_type for i in weights} == {onnx.TensorProto.INT8}

    float_graph = read_tflite_bytes(dequantized, "float.tflite")
    ref = next(iter(run_tflite(float_graph, [x], model_bytes=dequantized, keep_all=False).values()))
    got = ort_run(fast, x)
    assert got.shape == ref.shape == (1, 4, 3, 6)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())

    # LiteRT's hybrid kernels quantize the activations: --exact-int's form is LiteRT's bit for bit, the default
    # quantizes them too (to float rounding here), the float form does not
    exact = ort_run(convert(graph, exact_int=True), x)
    default = ort_run(convert(graph), x)
    hybrid_ref = next(iter(run_tflite(graph, [x], model_bytes=hybrid, keep_all=False).values()))
    assert np.array_equal(exact, hybrid_ref) and not np.array_equal(got, hybrid_ref)
    scale = np.abs(hybrid_ref).max()
    assert np.abs(default - hybrid_ref).max() < 1e-5 * scale < np.abs(got - hybrid_ref).max()


def test_cli_flag_and_session_option(tmp_path, capsys):
    src = tmp_path / "hybrid.tflite"
    src.write_bytes(model(np.random.default_rng(0), float_weights=False))
    out, report = tmp_path / "fast.onnx", tmp_path / "report.json"
    assert main(["convert", str(src), "-o", str(out), "--dynamic-as-float", "--report", str(report)]) == 0
    import json
    assert json.loads(report.read_text())["options"].get("dynamic_as_float") is True
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert not ops & QUANTIZING
    default, exact = tmp_path / "default.onnx", tmp_path / "exact.onnx"
    assert main(["convert", str(src), "-o", str(default)]) == 0
    assert "DynamicQuantizeLinear" in {n.op_type for n in onnx.load(str(default)).graph.node}
    assert main(["convert", str(src), "-o", str(exact), "--exact-int"]) == 0
    assert {"ReduceMax", "Where"} <= {n.op_type for n in onnx.load(str(exact)).graph.node}
