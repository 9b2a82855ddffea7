"""Models the corpus never had (issue 17): what real converters write that our generated tests did not, each as a
small generated model converted, run in ONNX Runtime and validated against LiteRT; and `convert`'s ONNX Runtime
check, which refuses to write a model ONNX Runtime cannot load or run."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector.cli import main
from inspector.core.emit.convert import convert
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.ir.errors import ConversionError
from inspector.core.proof.ort_check import ort_check
from inspector.core.proof.validate import validate

from .test_quant import bias_for, per_channel, save

RNG = np.random.default_rng(23)


def run_and_validate(graph, **options):
    """Convert, pass ONNX Runtime's check (load + one run), validate every tensor against LiteRT."""
    result = convert(graph, **options)
    assert ort_check(result.model) is None
    v = validate(result)
    assert v.ok and not v.first_bad(), [(e.name, e.max_rel, e.steps) for e in v.outputs + v.intermediates
                                        if not e.ok]
    return result, v


# --- 3: constant operands in the shape ONNX wants ----------------------------------------------------------------
def transpose_conv(tmp_path, bias_shape, quantized: bool):
    """TRANSPOSE_CONV stride 2 SAME on a non-square map, its bias [1, 1, 1, C] as onnx2tf writes it."""
    b = ModelBuilder()
    sx = 0.05
    x = b.input("x", [1, 3, 4, 5], "int8" if quantized else "float32", quant=(sx, 1) if quantized else None)
    w = RNG.uniform(-1, 1, (6, 3, 3, 5))
    bias = RNG.uniform(-0.3, 0.3, 6)
    if quantized:
        wq, wquant = per_channel(w, axis=0)
        bq, bquant = bias_for(bias, sx, wquant["scales"])
        wc = b.const("w", wq, quant=wquant)
        bquant["axis"] = len(bias_shape) - 1
        bc = b.const("b", bq.reshape(bias_shape), quant=bquant)
    else:
        wc = b.const("w", w.astype(np.float32))
        bc = b.const("b", bias.reshape(bias_shape).astype(np.float32))
    y = b.tensor("y", [1, 6, 8, 6], "int8" if quantized else "float32", quant=(0.08, -3) if quantized else None)
    b.op("TRANSPOSE_CONV", [b.const("out_shape", np.array([1, 6, 8, 6], np.int32)), wc, x, bc], [y],
         {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    b.output(y)
    return save(b, tmp_path)


@pytest.mark.parametrize("quantized", [False, True])
def test_transpose_conv_with_a_4d_bias(tmp_path, quantized):
    result, _ = run_and_validate(transpose_conv(tmp_path, (1, 1, 1, 6), quantized))
    conv = next(n for n in result.model.graph.node if n.op_type == "ConvTranspose")
    shapes = {i.name: list(i.dims) for i in result.model.graph.initializer}
    producers = {o: n for n in result.model.graph.node for o in n.output}
    bias = conv.input[2]
    while bias not in shapes:                    # quantized: the int32 bias behind its DequantizeLinear
        bias = producers[bias].input[0]
    assert shapes[bias] == [6]


def test_fully_connected_with_a_2d_bias(tmp_path):
    """A [1, units] bias on a 3-D FULLY_CONNECTED (keep_num_dims): an Add of it as given would still broadcast
    right, but a [1, 1, units] one would not; any rank is flattened."""
    b = ModelBuilder()
    x = b.input("x", [1, 4, 7], "float32")
    y = b.tensor("y", [1, 4, 3])
    b.op("FULLY_CONNECTED", [x, b.const("w", RNG.uniform(-1, 1, (3, 7)).astype(np.float32)),
                             b.const("b", RNG.uniform(-1, 1, (1, 1, 3)).astype(np.float32))], [y],
         {"keep_num_dims": True})
    b.output(y)
    run_and_validate(save(b, tmp_path))


# --- convert runs the result in ONNX Runtime before writing it --------------------------------------------------
def test_ort_check_names_onnx_runtimes_reason():
    """A model the ONNX checker accepts and ONNX Runtime refuses to run (ConvTranspose with a 4-D bias)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 5, 6])
    w = onnx.numpy_helper.from_array(RNG.uniform(-1, 1, (5, 6, 3, 3)).astype(np.float32), "w")
    bias = onnx.numpy_helper.from_array(np.zeros((1, 1, 1, 6), np.float32), "b")
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[3, 3])
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [w, bias]),
                              opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    with pytest.raises(ConversionError, match="ONNX Runtime cannot run the converted model: .*[Bb]ias"):
        ort_check(model)


def test_convert_refuses_to_write_what_onnx_runtime_cannot_run(tmp_path, monkeypatch, capsys):
    """With the bias normalisation undone (the defect onnx2tf's files exposed), `convert` exits 1 with ONNX
    Runtime's reason and writes nothing; --no-ort-check writes it anyway; fixed, it converts."""
    from inspector.core.emit.ops import conv
    graph = transpose_conv(tmp_path, (1, 1, 1, 6), quantized=False)
    out = tmp_path / "out.onnx"
    assert main(["convert", graph.path, "-o", str(out)]) == 0 and out.exists()
    out.unlink()
    monkeypatch.setattr(conv, "bias_1d", lambda ctx, op, slot: ctx.input(op, slot))
    assert main(["convert", graph.path, "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert not out.exists() and "ONNX Runtime cannot run" in err and "Traceback" not in err, err
    assert main(["convert", graph.path, "-o", str(out), "--no-ort-check"]) == 0 and out.exists()
