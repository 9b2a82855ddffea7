"""Models made by ModelBuilder read back through read_tflite and run in LiteRT with the results numpy predicts."""
from __future__ import annotations

import math

import numpy as np
import pytest
import tflite

from inspector.core.ir.graph import Quantization
from inspector.core.io.tflite_builder import ModelBuilder, options_class
from inspector.core.io.tflite_reader import read_tflite, read_tflite_bytes

from .reference import conv2d, run_litert

RNG = np.random.default_rng(7)


def _conv_model(padding="SAME", stride=(2, 1), fused="RELU"):
    b = ModelBuilder()
    x = b.input("x", [1, 5, 7, 3])
    w = RNG.standard_normal((4, 3, 2, 3)).astype(np.float32)      # O, H, W, I: kernel not square either
    bias = RNG.standard_normal(4).astype(np.float32)
    oh, ow = (-(-5 // stride[0]), -(-7 // stride[1])) if padding == "SAME" else ((5 - 3) // stride[0] + 1,
                                                                                 (7 - 2) // stride[1] + 1)
    y = b.tensor("y", [1, oh, ow, 4])
    b.op("CONV_2D", [x, b.const("w", w), b.const("bias", bias)], [y],
         {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "fused_activation_function": fused})
    b.output(y)
    return b.build(), w, bias


@pytest.mark.parametrize("padding,stride,fused", [("SAME", (2, 1), "RELU"), ("VALID", (1, 2), "NONE"),
                                                  ("SAME", (2, 3), "RELU6")])
def test_conv2d_runs_as_numpy_predicts(padding, stride, fused):
    data, w, bias = _conv_model(padding, stride, fused)
    x = RNG.standard_normal((1, 5, 7, 3)).astype(np.float32)
    (got,) = run_litert(data, x)
    want = conv2d(x, w, bias, stride, padding, fused=fused)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv2d_reads_back():
    data, w, bias = _conv_model()
    g = read_tflite_bytes(data)
    sg = g.main
    assert [t.name for t in sg.tensors] == ["x", "y", "w", "bias"]
    assert sg.tensors[0].shape == (1, 5, 7, 3) and sg.tensors[1].shape == (1, 3, 7, 4)
    np.testing.assert_array_equal(sg.tensors[2].data, w)
    np.testing.assert_array_equal(sg.tensors[3].data, bias)
    assert sg.tensors[0].data is None and sg.tensors[1].data is None
    (op,) = sg.ops
    assert op.opcode == "CONV_2D" and op.inputs == [0, 2, 3] and op.outputs == [1]
    assert op.options["padding"] == "SAME" and op.options["stride_h"] == 2 and op.options["stride_w"] == 1
    assert op.options["fused_activation_function"] == "RELU"
    assert op.options["dilation_h_factor"] == 1            # filled in: the schema default 0 is never meant
    assert sg.inputs == [0] and sg.outputs == [1]


def test_buffer_zero_is_the_empty_sentinel():
    data, _, _ = _conv_model()
    m = tflite.Model.GetRootAsModel(data, 0)
    assert m.Buffers(0).DataLength() == 0
    assert m.Subgraphs(0).Tensors(0).Buffer() == 0            # activations point at it
    assert all(m.Buffers(i).DataLength() > 0 for i in range(1, m.BuffersLength()))


def test_add_broadcasts_with_fused_activation():
    b = ModelBuilder()
    x = b.input("x", [2, 3, 5])
    c = RNG.standard_normal((1, 5)).astype(np.float32)
    y = b.tensor("y", [2, 3, 5])
    b.op("ADD", [x, b.const("c", c)], [y], {"fused_activation_function": "RELU6"})
    b.output(y)
    x_val = (RNG.standard_normal((2, 3, 5)) * 4).astype(np.float32)
    (got,) = run_litert(b.build(), x_val)
    np.testing.assert_allclose(got, np.clip(x_val + c, 0, 6), rtol=1e-6)


def test_reshape_with_shape_tensor_and_option():
    b = ModelBuilder()
    x = b.input("x", [1, 4, 6])
    y = b.tensor("y", [3, 8], shape_signature=[-1, 8])
    b.op("RESHAPE", [x, b.const("shape", np.array([-1, 8], np.int32))], [y], {"new_shape": [-1, 8]})
    b.output(y)
    data = b.build()
    x_val = np.arange(24, dtype=np.float32).reshape(1, 4, 6)
    (got,) = run_litert(data, x_val)
    np.testing.assert_array_equal(got, x_val.reshape(3, 8))
    g = read_tflite_bytes(data)
    assert g.main.ops[0].options == {"new_shape": [-1, 8]}
    assert g.main.tensors[y].shape_signature == (-1, 8) and g.main.tensors[y].dynamic


def test_two_subgraph_while_loop():
    """WHILE i < 5: (i + 1, x * 2): cond and body are subgraphs 1 and 2."""
    b = ModelBuilder()
    i0 = b.const("i0", np.array([0], np.int32))
    x = b.input("x", [2, 3])
    i_out, x_out = b.tensor("i_out", [1], "int32"), b.tensor("x_out", [2, 3])
    cond, body = b.subgraph("cond"), b.subgraph("body")
    b.op("WHILE", [i0, x], [i_out, x_out], {"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    b.output(x_out, i_out)

    ci, cx = cond.input("i", [1], "int32"), cond.input("x", [2, 3])
    ok = cond.tensor("ok", [1], "bool")
    cond.op("LESS", [ci, cond.const("limit", np.array([5], np.int32))], [ok])
    cond.output(ok)
    del cx

    bi, bx = body.input("i", [1], "int32"), body.input("x", [2, 3])
    bi2, bx2 = body.tensor("i2", [1], "int32"), body.tensor("x2", [2, 3])
    body.op("ADD", [bi, body.const("one", np.array([1], np.int32))], [bi2])
    body.op("MUL", [bx, body.const("two", np.full((2, 3), 2, np.float32))], [bx2])
    body.output(bi2, bx2)

    data = b.build()
    x_val = RNG.standard_normal((2, 3)).astype(np.float32)
    got_x, got_i = run_litert(data, x_val)
    np.testing.assert_allclose(got_x, x_val * 32, rtol=1e-6)
    assert got_i.tolist() == [5]
    g = read_tflite_bytes(data)
    assert [s.name for s in g.subgraphs] == ["main", "cond", "body"]
    assert g.main.ops[0].options == {"cond_subgraph_index": 1, "body_subgraph_index": 2}
    assert [op.opcode for op in g.subgraphs[2].ops] == ["ADD", "MUL"]


def test_quantize_per_tensor_and_per_channel_params():
    b = ModelBuilder()
    x = b.input("x", [1, 3, 4])
    q = b.tensor("q", [1, 3, 4], "int8", quant=(0.05, -3))
    b.op("QUANTIZE", [x], [q])
    b.output(q)
    pc = Quantization(scales=np.array([0.1, 0.2, 0.3], np.float32), zero_points=np.zeros(3, np.int64), axis=1)
    b.const("per_channel", np.zeros((4, 3), np.int8), quant=pc)
    data = b.build()
    x_val = RNG.uniform(-7, 7, (1, 3, 4)).astype(np.float32)
    (got,) = run_litert(data, x_val)
    want = np.clip(np.round(x_val / np.float32(0.05)) - 3, -128, 127)
    assert np.abs(got.astype(np.int32) - want).max() <= 1       # round-half differences only
    t = read_tflite_bytes(data).main.tensors
    assert t[q].quantization.scales.tolist() == [pytest.approx(0.05)] and t[q].quantization.zero_points.tolist() == [-3]
    assert t[2].quantization.per_channel and t[2].quantization.axis == 1
    np.testing.assert_allclose(t[2].quantization.scales, [0.1, 0.2, 0.3])


def test_builtin_code_above_127_keeps_deprecated_placeholder():
    b = ModelBuilder()
    x = b.input("x", [2, 5])
    y = b.tensor("y", [2, 5])
    b.op("GELU", [x], [y], {"approximate": False})
    b.output(y)
    data = b.build()
    oc = tflite.Model.GetRootAsModel(data, 0).OperatorCodes(0)
    assert oc.BuiltinCode() == tflite.BuiltinOperator.GELU > 127 and oc.DeprecatedBuiltinCode() == 127
    x_val = RNG.standard_normal((2, 5)).astype(np.float32)
    (got,) = run_litert(data, x_val)
    want = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))(x_val.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert read_tflite_bytes(data).main.ops[0].opcode == "GELU"


def test_custom_op_metadata_signature_variable(tmp_path):
    b = ModelBuilder(description="made in a test")
    x = b.input("x", [1, 2])
    state = b.tensor("state", [1, 2], variable=True)
    y = b.tensor("y", [1, 2])
    b.custom_op("MyCustomOp", [x, state, None], [y], b"\x01\x02\x03", version=2)
    b.output(y)
    b.add_metadata("min_runtime_version", "1.5.0")
    b.add_metadata("blob", b"\x00\xff")
    b.signature("serving_default", {"in": x}, {"out": y})
    g = read_tflite(b.save(tmp_path / "m.tflite"))
    op = g.main.ops[0]
    assert op.custom and op.opcode == "MyCustomOp" and op.version == 2 and op.custom_options == b"\x01\x02\x03"
    assert op.inputs == [0, 1, -1]
    assert g.main.tensors[state].is_variable and not g.main.tensors[x].is_variable
    assert g.metadata == {"min_runtime_version": b"1.5.0", "blob": b"\x00\xff"}
    assert g.description == "made in a test"
    (sig,) = g.signature_defs
    assert (sig.key, sig.subgraph, sig.inputs, sig.outputs) == ("serving_default", 0, {"in": 0}, {"out": 2})
    assert g.op_histogram() == {"CUSTOM:MyCustomOp": 1}


def test_signature_seen_by_litert():
    b = ModelBuilder()
    x = b.input("x", [3, 2])
    y = b.tensor("y", [3, 2])
    b.op("RELU", [x], [y])
    b.output(y)
    b.signature("serving_default", {"pixels": x}, {"scores": y})
    from ai_edge_litert.interpreter import Interpreter
    sigs = Interpreter(model_content=b.build()).get_signature_list()
    assert sigs == {"serving_default": {"inputs": ["pixels"], "outputs": ["scores"]}}


def test_options_table_names():
    assert options_class("CONV_2D") == "Conv2DOptions"
    assert options_class("DEPTHWISE_CONV_2D") == "DepthwiseConv2DOptions"
    assert options_class("MAX_POOL_2D") == "Pool2DOptions"
    assert options_class("MEAN") == "ReducerOptions"
    assert options_class("BATCH_TO_SPACE_ND") == "BatchToSpaceNDOptions"
    assert options_class("STABLEHLO_GATHER") == "StablehloGatherOptions"
    assert options_class("RELU") is None


def test_builtin_options2_and_string_options_read_back():
    b = ModelBuilder()
    x = b.input("x", [2, 3], "int64")
    y = b.tensor("y", [3, 2], "int64")
    b.op("STABLEHLO_TRANSPOSE", [x], [y], {"permutation": [1, 0]})
    h = b.tensor("h", [], "resource")
    b.op("VAR_HANDLE", [], [h], {"container": "c", "shared_name": "state"})
    ops = read_tflite_bytes(b.build()).main.ops
    assert ops[0].options == {"permutation": [1, 0]}
    assert ops[1].options == {"container": "c", "shared_name": "state"}


@pytest.mark.parametrize("call,match", [
    (lambda b, x: b.op("NOT_AN_OP", [x], [x]), "unknown builtin"),
    (lambda b, x: b.op("CONV_2D", [x], [x], {"strides": 2}), "no option"),
    (lambda b, x: b.op("RELU", [x], [x], {"alpha": 1}), "takes no options"),
    (lambda b, x: b.op("CONV_2D", [x], [x], {"padding": "FULL"}), "unknown value"),
    (lambda b, x: b.tensor("t", [1], "float8"), "unknown tensor dtype"),
])
def test_mistakes_are_named(call, match):
    b = ModelBuilder()
    x = b.input("x", [1])
    with pytest.raises(ValueError, match=match):
        call(b, x)
        b.build()


def test_tail_buffers_use_offset_and_size():
    """Constants stored after the flatbuffer (the >2 GB layout) read back and run like inline ones."""
    b = ModelBuilder()
    x = b.input("x", [2, 3])
    c = RNG.standard_normal((2, 3)).astype(np.float32)
    y = b.tensor("y", [2, 3])
    b.op("MUL", [x, b.const("c", c, tail=True)], [y])
    b.output(y)
    data = b.build()
    buf = tflite.Model.GetRootAsModel(data, 0).Buffers(1)
    assert buf.Offset() % 16 == 0 and buf.Size() == c.nbytes and buf.DataLength() == 0
    assert data[buf.Offset():buf.Offset() + buf.Size()] == c.tobytes()
    np.testing.assert_array_equal(read_tflite_bytes(data).main.tensors[2].data, c)
    x_val = RNG.standard_normal((2, 3)).astype(np.float32)
    (got,) = run_litert(data, x_val)
    np.testing.assert_allclose(got, x_val * c, rtol=1e-6)
